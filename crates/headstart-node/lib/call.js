// One tool call of a response, as a framework's face runs it (pi's drop-in, the AI SDK's wrapper): the record both the
// engine's side (it asks for the call, or settles it itself) and the framework's side (the call's run) read and write,
// keyed by the engine's id of the call.

/**
 * A promise and its resolve.
 * @template T
 * @returns {{ promise: Promise<T>, resolve: (value: T) => void }}
 */
function deferred() {
  /** @type {(value: T) => void} */
  let resolve = () => {};
  const promise = new Promise((done) => (resolve = done));
  return { promise, resolve };
}

/** A call of a turn, from its seal (or its place in the final message) to its one result. */
export class Call {
  /**
   * The engine's letter once it asks for the call (`{ bridge }`), or `null` once it settled the call itself.
   * @type {{ promise: Promise<{ bridge: any } | null>, resolve: (value: { bridge: any } | null) => void }}
   */
  #asked = deferred();
  /**
   * The call's result for the engine, once it is final.
   * @type {{ promise: Promise<unknown>, resolve: (value: unknown) => void }}
   */
  #answer = deferred();
  #bridge;
  #ended = false;

  /** The engine's id of the call (pi's, unless pi's was missing or repeated). */
  id;
  /** The framework's tool call (pi's: as sealed, then as the final message holds it; the AI SDK's: its part). */
  toolCall;
  /** Sealed by its own event, of a tool that starts early: it runs when the engine asks for it. */
  early = false;
  /** An early call's run, started when the engine asked for it. */
  pipeline;
  /** The framework runs the call itself (the AI SDK's `execute` took it). */
  claimed = false;
  /** The arguments as validated at the seal (`{ arguments, args }` or `{ arguments, error }`), taken once. */
  #validated;
  /** The tool result the engine stored without asking for the call (a limit refused it), when it did. */
  stored;

  constructor(id) {
    this.id = id;
  }

  /** Whether the engine has asked for the call, or settled it without asking. */
  heard = false;

  /** The engine asks for the call (its owner is durable): resolves to the call's result for the store. */
  ask(bridge) {
    this.#bridge = bridge;
    this.heard = true;
    this.#asked.resolve({ bridge });
    return this.#answer.promise;
  }

  /** Resolves once the call has its result. */
  settled() {
    return this.#answer.promise;
  }

  /** Resolves to the engine's letter (`{ bridge }`), or to `null` when the engine settled the call without asking. */
  asked() {
    return this.#asked.promise;
  }

  /**
   * An early call's run once the engine has asked for it (it started then), boxed (`{ pipeline }`): a promise that
   * resolves to a promise waits for it, and a batch reading one call's run must not wait for its end. `undefined` for
   * a call that is not early, or that the engine settled without asking.
   * @returns {Promise<{ pipeline: Promise<any> } | undefined>}
   */
  async earlyRun() {
    if (!this.early) return undefined;
    return (await this.#asked.promise) && this.pipeline ? { pipeline: this.pipeline } : undefined;
  }

  /** The engine stored `message` as the call's result without asking for it, or its run ended (no message). */
  settledByEngine(message) {
    if (message) this.stored = message;
    this.heard = true;
    this.#asked.resolve(null);
  }

  /** Keeps the arguments validated at the call's seal. */
  keepValidated(entry) {
    this.#validated = entry;
  }

  /** The validation made at the seal, when it was of exactly these `args`; taken once. */
  takeValidated(args) {
    const entry = this.#validated;
    this.#validated = undefined;
    return entry && entry.arguments === args ? entry : undefined;
  }

  /** Whether the call has its result. */
  get ended() {
    return this.#ended;
  }

  /**
   * The call's end, its one verb: the engine gets `result` (its stored form: `{content, details, isError,
   * terminate}`) at once (a sequential call after it starts on it), or when it asks. A second end is ignored.
   */
  end(result) {
    if (this.#ended) return;
    this.#ended = true;
    this.#bridge?.answer?.(result);
    this.#answer.resolve(result);
  }
}

/**
 * The calls of one response by the engine's id, each made on first use, and what the engine's events say of them:
 * a call it settled without asking (a limit refused it) is waited for no longer, and once its run has ended no call
 * is, those made later included.
 */
export class CallRecords {
  /** @type {Map<string, Call>} */
  #calls = new Map();
  #runEnded = false;

  /** The record of call `id`, made on first use. */
  get(id) {
    let call = this.#calls.get(id);
    if (!call) {
      call = new Call(id);
      this.#calls.set(id, call);
      if (this.#runEnded) call.settledByEngine(undefined);
    }
    return call;
  }

  /** Whether call `id` has a record. */
  has(id) {
    return this.#calls.has(id);
  }

  /** The records, in the order they were made. */
  values() {
    return this.#calls.values();
  }

  /**
   * Takes one of the engine's events (`null`: its run has ended). A call it asked for was given its letter before its
   * result could be stored, and keeps it. Returns whether the run has ended.
   * @param {any} event
   */
  take(event) {
    if (event === null) {
      this.#runEnded = true;
      for (const call of this.#calls.values()) call.settledByEngine(undefined);
      return true;
    }
    if (event.type === "message_end" && event.message?.role === "tool_result") {
      this.get(event.message.tool_call_id).settledByEngine(event.message);
    }
    return false;
  }
}

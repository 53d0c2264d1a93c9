// The engine's API: `Engine` over a store with tools and hooks (`Engine.open` resolves once the store is open),
// `engine.wrap(session, stream, options)` for one response of any stream, `engine.recover(session, policy)`.

import { native } from "./native.js";
import { createDispatcher, messageOf } from "./bridge.js";
import { nativeFormat } from "./feed.js";
import { errorResult, toResult } from "./results.js";
import { openStore } from "./store.js";
import { toolSpec } from "./tool.js";
import { Wrapped } from "./wrapped.js";

/** The options `Engine` takes; any other is a `TypeError` naming it. */
const OPTIONS = new Set([
  "tools",
  "onCall",
  "beforeToolCall",
  "afterToolCall",
  "durability",
  "toolExecution",
  "earlyExecution",
  "maxInFlight",
  "maxRequests",
]);

/**
 * The engine over a store (a SQLite path or a `postgresql://` URL), with tools and hooks.
 *
 * Options: `tools` (from `tool(...)`), `beforeToolCall({ toolCall, args })` (return `{ block: true, reason }` to
 * block), `afterToolCall({ toolCall, args, result, isError })` (return fields to replace), `durability` (`full` or
 * `normal`, SQLite), `toolExecution` (`parallel` or `sequential`), `earlyExecution` (default true), `maxInFlight` (a
 * number, or `null` for no bound), `maxRequests`. `onCall(call, { signal, onUpdate, answer })` runs every call
 * instead of the tools' `execute` (the tools are then specs: `tool(...)`'s fields without `execute`); it resolves to
 * the call's result, or gives it sooner through `answer`.
 */
export class Engine {
  #engine;
  #store;
  #ready;
  #tools;

  /**
   * An engine whose store is open: rejects with the store's error when it cannot be opened.
   * @param {string} store
   * @param {import("../index.js").EngineOptions} [options]
   * @returns {Promise<Engine>}
   */
  static async open(store, options) {
    const engine = new Engine(store, options);
    await engine.#ready;
    return engine;
  }

  /**
   * @param {string} store
   * @param {import("../index.js").EngineOptions} [options]
   */
  constructor(store, options = {}) {
    const unknown = Object.keys(options).filter((key) => !OPTIONS.has(key));
    if (unknown.length > 0) {
      throw new TypeError(`unknown engine options: ${unknown.join(", ")} (expected ${[...OPTIONS].join(", ")})`);
    }
    const { tools = [], onCall, beforeToolCall, afterToolCall, durability = "full", ...settings } = options;
    if (!Array.isArray(tools)) throw new TypeError("tools must be an array of tool(...) declarations");
    if (onCall !== undefined && typeof onCall !== "function") throw new TypeError("onCall must be a function");
    const names = new Set();
    for (const t of tools) {
      const body = /** @type {{ execute?: unknown }} */ (t)?.execute;
      if (!t || typeof t.name !== "string" || (!onCall && typeof body !== "function")) {
        throw new TypeError("each tool must come from tool({ name, execute, ... })");
      }
      if (names.has(t.name)) throw new TypeError(`two tools are named ${t.name}`);
      names.add(t.name);
    }
    const specs = tools.map(toolSpec);
    this.#tools = new Map(tools.map((t) => [t.name, t]));
    const dispatch = createDispatcher(() => this.#engine, {
      call: onCall ?? ((letter, context) => runTool(this.#tools.get(letter.tool), letter, context)),
      before: async ({ toolCall }) =>
        beforeToolCall ? await beforeToolCall({ toolCall, args: toolCall.arguments }) : undefined,
      after: async ({ toolCall, result, isError }) =>
        afterToolCall ? await afterToolCall({ toolCall, args: toolCall.arguments, result, isError }) : undefined,
    });
    const nativeOptions = JSON.stringify({
      ...settings,
      beforeToolCall: typeof beforeToolCall === "function",
      afterToolCall: typeof afterToolCall === "function",
    });
    this.#ready = openStore(store, { durability }).then((opened) => {
      this.#store = opened;
      this.#engine = new native.NativeEngine(opened, JSON.stringify(specs), nativeOptions, dispatch);
      return this.#engine;
    });
    // A store that cannot be opened is reported by the first call that needs the engine.
    this.#ready.catch(() => {});
  }

  /** The built engine; an `Error` before the store is open (use `Engine.open`). */
  #built() {
    if (!this.#engine) throw new Error("the engine's store is not open yet: open the engine with Engine.open(store, options)");
    return this.#engine;
  }

  /** Creates a session (under `id`, one `newSessionId` gave, when given); resolves to its id. */
  async createSession(id) {
    return (await this.#ready).createSession(id ?? null);
  }

  /** A fresh session id, at once (the session is created by the first response opened with `create`). */
  newSessionId() {
    return this.#built().newSessionId();
  }

  /** Appends a user message with `text` to `session`. */
  async appendUser(session, text) {
    await (await this.#ready).appendUser(session, String(text));
  }

  /**
   * Opens one response of `session`, fed by the caller (what `wrap` builds on): the native response, whose
   * `pushDeltas`, `end` and `fail` take the stream in the `headstart` format and whose `nextBatch` gives the engine's
   * events. `users` are user messages appended first; `create` creates the session first; `after` is the session's
   * previous response, whose results are stored before this one opens. The engine must be open (`Engine.open`).
   * @param {string} session
   * @param {import("../index.js").OpenResponseOptions} [options]
   * @returns {import("../index.js").NativeResponse}
   */
  openResponse(session, { format = "headstart", seal, record, users, create, after } = {}) {
    return this.#built().open(session, { format, seal, record, users, create }, after ?? null);
  }

  /**
   * Wraps one model response of `session`: `stream` is read in `format` (see `FORMATS`), tools flagged early start
   * at their `toolcall_end` once the prefix is durable, the others after the stream. The result is an async
   * iterable of the engine's events; after it, `calls()` gives each call's result with its figures. `signal`
   * cancels the response: every admitted call still gets its stored result.
   * @param {string} session
   * @param {unknown} stream
   * @param {{ format?: import("../index.js").Format, seal?: "complete" | "next-index" | "finish", record?: string, signal?: AbortSignal }} [options]
   * @returns {import("../index.js").Wrapped}
   */
  wrap(session, stream, { format = "pi", seal = "complete", record, signal } = {}) {
    const readAs = nativeFormat(format);
    const opened = this.#ready.then((engine) => engine.open(session, { format: readAs, seal, record }, null));
    return new Wrapped(opened, () => this.#store, session, stream, format, signal);
  }

  /**
   * Recovers `session` after a crash: policy `fail` gives every admitted call without a result the interrupted
   * result; `rerun_idempotent` runs idempotent tools again. Resolves to what was done with each call.
   */
  async recover(session, policy = "fail") {
    return JSON.parse(await (await this.#ready).recover(session, policy));
  }

  /** The figures of `session` from its stored times (per call: headroom, seal to start, run, overlap). */
  async figures(session) {
    await this.#ready;
    return JSON.parse(await this.#store.figures(session, null));
  }

  /** The stored messages of `session`, in order (`{seq, at_us, message}`). */
  async log(session) {
    await this.#ready;
    return JSON.parse(await this.#store.loadLog(session));
  }
}

/** Runs a call of tool `t` (undefined: unknown) as a letter asks; its result, never a throw. */
async function runTool(t, letter, { signal, onUpdate }) {
  if (!t) return errorResult(`Tool ${letter.tool} not found`);
  try {
    const value = await t.execute(letter.arguments, {
      signal,
      callId: letter.callId,
      sessionId: letter.sessionId,
      idempotencyKey: letter.idempotencyKey,
      onUpdate: (partial) => onUpdate(toResult(partial)),
    });
    return toResult(value);
  } catch (error) {
    return errorResult(messageOf(error));
  }
}

// Feeding a model's stream into a native response: the user's stream object, read in the format it is in.
//
// - `pi`: pi-ai `AssistantMessageEvent`s, turned into headstart's delta events here (they are nearly the same).
// - `headstart`: delta events as objects, as in a delta log.
// - `openai-chat`, `openai-responses`, `anthropic`, `gemini`: an SDK's stream. Given the SDK's request promise
//   (it has `asResponse()`), the HTTP body is read through the engine's own SSE parser; given the stream itself,
//   its events are handed over as their wire JSON. Either way one converter reads them.
// - `sse-<wire format>`: an HTTP body (a `fetch` `Response`, its `body`, or any async iterable of bytes).

/** The formats `wrap` reads. */
export const FORMATS = ["pi", "headstart", "openai-chat", "openai-responses", "anthropic", "gemini"];
const WIRES = FORMATS.slice(2);

/** The native format a user-facing format is read as; a `TypeError` naming the formats for anything else. */
export function nativeFormat(format) {
  if (format === "pi" || format === "headstart") return "headstart";
  if (WIRES.includes(format)) return format;
  if (typeof format === "string" && format.startsWith("sse-") && WIRES.includes(format.slice(4))) return format;
  throw new TypeError(
    `unknown stream format ${JSON.stringify(format)}: expected one of ${FORMATS.join(", ")}, or sse- and one of ` +
      WIRES.join(", "),
  );
}

const PI_STOP = { stop: "stop", length: "length", toolUse: "tool_use", deferred: "tool_use" };

function usageOf(usage) {
  if (!usage || typeof usage !== "object") return undefined;
  const count = (value) => (Number.isSafeInteger(value) && value >= 0 ? value : 0);
  return {
    input: count(usage.input),
    output: count(usage.output),
    cache_read: count(usage.cacheRead),
    cache_write: count(usage.cacheWrite),
  };
}

/**
 * The delta event of a pi-ai `AssistantMessageEvent`, or `undefined` for an event the engine does not read. A
 * value that is not a pi event is a `TypeError`.
 */
export function piToDelta(event) {
  if (!event || typeof event !== "object" || typeof event.type !== "string") {
    throw new TypeError(`not a pi-ai AssistantMessageEvent: ${safeJson(event)}`);
  }
  const index = event.contentIndex;
  const block = event.partial?.content?.[index];
  switch (event.type) {
    case "start":
      return { type: "start", ...(event.partial?.model ? { model: String(event.partial.model) } : {}) };
    case "text_start":
    case "text_end":
    case "thinking_start":
      return { type: event.type, index };
    case "text_delta":
    case "thinking_delta":
    case "toolcall_delta":
      return { type: event.type, index, delta: String(event.delta ?? "") };
    case "thinking_end":
      return {
        type: "thinking_end",
        index,
        ...(typeof block?.thinkingSignature === "string" ? { signature: block.thinkingSignature } : {}),
      };
    case "toolcall_start":
      return { type: "toolcall_start", index, id: String(block?.id ?? ""), name: String(block?.name ?? "") };
    case "toolcall_end": {
      const args = event.toolCall?.arguments;
      return { type: "toolcall_end", index, ...(args && typeof args === "object" ? { arguments: args } : {}) };
    }
    case "done": {
      const usage = usageOf(event.message?.usage);
      return { type: "done", stop_reason: PI_STOP[event.reason] ?? "stop", ...(usage ? { usage } : {}) };
    }
    case "error":
      return {
        type: "error",
        stop_reason: event.reason === "aborted" ? "aborted" : "error",
        message: String(event.error?.errorMessage ?? event.reason ?? "error"),
      };
    default:
      return undefined;
  }
}

/** The events that must reach the engine at once: a seal (an early call may start) and the end. */
const URGENT = new Set(["toolcall_end", "done", "error"]);

/** The events of every token: consecutive ones of one block are joined into one before they go to the engine. */
const TOKEN_DELTAS = new Set(["text_delta", "thinking_delta", "toolcall_delta"]);

/**
 * pi-ai events into a native response, in bursts: the events of one turn of the event loop go over as one call (JSON
 * lines), and a seal or the end goes over at once, with whatever is before it. Consecutive token deltas of one block
 * go over as one delta: the transcript is the same, and the engine accumulates one string instead of many. `end` and
 * `fail` close the feed.
 */
export class PiFeed {
  #response;
  /** JSON lines waiting to go over. */
  #pending = [];
  /** The token delta being joined: its type, block and text so far. */
  #joinType = null;
  #joinIndex = -1;
  #joinText = "";
  #scheduled = false;
  #closed = false;

  constructor(response) {
    this.#response = response;
  }

  /** Takes one pi-ai event; a value that is not one is a `TypeError`. */
  add(event) {
    const delta = event?.delta;
    if (typeof delta === "string" && TOKEN_DELTAS.has(event.type)) this.token(event.type, event.contentIndex, delta);
    else this.other(event);
  }

  /**
   * Takes one token delta (`text_delta`, `thinking_delta` or `toolcall_delta`) of block `index`: the hot path, one
   * call per token.
   */
  token(type, index, delta) {
    if (this.#closed) return;
    if (this.#joinType !== type || this.#joinIndex !== index) {
      if (!Number.isSafeInteger(index)) return this.other({ type, contentIndex: index, delta });
      this.#settleJoining();
      this.#joinType = type;
      this.#joinIndex = index;
    }
    this.#joinText += delta;
    this.#schedule();
  }

  /** Takes one pi-ai event that is not a token delta; a value that is not one is a `TypeError`. */
  other(event) {
    if (this.#closed) return;
    const delta = piToDelta(event);
    if (delta === undefined) return;
    this.#settleJoining();
    this.#pending.push(JSON.stringify(delta));
    if (URGENT.has(event.type)) {
      this.flush();
      if (event.type !== "toolcall_end") this.end();
    } else {
      this.#schedule();
    }
  }

  #schedule() {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.flush());
  }

  #settleJoining() {
    if (this.#joinType === null) return;
    this.#pending.push(
      `{"type":"${this.#joinType}","index":${this.#joinIndex},"delta":${JSON.stringify(this.#joinText)}}`,
    );
    this.#joinType = null;
    this.#joinIndex = -1;
    this.#joinText = "";
  }

  /** Hands over what is pending. */
  flush() {
    this.#scheduled = false;
    this.#settleJoining();
    if (this.#pending.length === 0 || this.#closed) return;
    const lines = this.#pending.join("\n");
    this.#pending = [];
    this.#response.pushDeltas(lines);
  }

  /** Whether the feed was closed (its end or a failure handed over). */
  get closed() {
    return this.#closed;
  }

  /** The stream ended. */
  end() {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#response.end();
  }

  /** The stream failed with `message`: the response ends as an error. */
  fail(message) {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#response.fail(message);
  }
}

function safeJson(value) {
  try {
    return JSON.stringify(value)?.slice(0, 200) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Whether `value` can be iterated with `for await`. */
function isAsyncIterable(value) {
  return value != null && (typeof value[Symbol.asyncIterator] === "function" || typeof value[Symbol.iterator] === "function");
}

/** The byte chunks of an HTTP body: a `Response`, a `ReadableStream`, or an async iterable of bytes. */
function bodyOf(value) {
  if (value && typeof value === "object" && "body" in value && value.body && typeof value.arrayBuffer === "function") {
    return value.body;
  }
  return value;
}

/**
 * Reads `stream` (in `format`) into `response` until it ends, fails or `signal` aborts. Never throws: a stream
 * that fails ends the response as an error with its message.
 */
export async function pump(stream, format, response, signal) {
  let iterator;
  let ended = false;
  const stop = () => iterator?.return?.().catch(() => {});
  signal?.addEventListener("abort", stop, { once: true });
  try {
    if (format === "pi") {
      const feed = new PiFeed(response);
      try {
        for await (const event of withIterator(stream, (it) => (iterator = it))) {
          if (signal?.aborted) break;
          feed.add(event);
        }
      } finally {
        feed.flush();
      }
      ended = feed.closed;
    } else if (format === "headstart") {
      for await (const delta of withIterator(stream, (it) => (iterator = it))) {
        if (signal?.aborted) break;
        const text = typeof delta === "string" ? delta : JSON.stringify(delta);
        response.push(text);
        ended ||= /^\{"type":"(done|error)"/.test(text);
      }
    } else if (format.startsWith("sse-")) {
      for await (const chunk of withIterator(bodyOf(await stream), (it) => (iterator = it))) {
        if (signal?.aborted) break;
        response.pushBody(Buffer.from(typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk));
      }
    } else if (stream && typeof stream.asResponse === "function") {
      // The SDK's request promise: its HTTP body, untouched by the SDK's own parser.
      const raw = await stream.asResponse();
      for await (const chunk of withIterator(raw.body, (it) => (iterator = it))) {
        if (signal?.aborted) break;
        response.pushBody(Buffer.from(chunk));
      }
    } else {
      const named = format !== "openai-chat";
      for await (const event of withIterator(await stream, (it) => (iterator = it))) {
        if (signal?.aborted) break;
        const data = typeof event === "string" ? event : JSON.stringify(event);
        response.push(data, named && typeof event?.type === "string" ? event.type : null);
      }
    }
    if (signal?.aborted && !ended && (format === "pi" || format === "headstart")) {
      response.push(JSON.stringify({ type: "error", stop_reason: "aborted", message: "aborted" }));
      response.end();
    } else if (signal?.aborted && !ended) {
      response.fail("aborted");
    } else {
      response.end();
    }
  } catch (error) {
    response.fail(error instanceof Error ? error.message : String(error));
  } finally {
    signal?.removeEventListener("abort", stop);
  }
}

/** Iterates `source` (async or sync iterable), handing its iterator to `keep` so an abort can close it. */
async function* withIterator(source, keep) {
  if (!isAsyncIterable(source)) {
    throw new TypeError("the stream is not an async iterable (for await ... of) of its format's events");
  }
  const iterator =
    typeof source[Symbol.asyncIterator] === "function" ? source[Symbol.asyncIterator]() : source[Symbol.iterator]();
  keep(iterator);
  while (true) {
    const { value, done } = await iterator.next();
    if (done) return;
    yield value;
  }
}

// The engine's API: `new Engine(store, options)`, `tool(...)`, `engine.wrap(session, stream, options)`,
// `engine.recover(session, policy)`, `inspect(store)`.

import { native } from "./native.js";
import { createDispatcher, messageOf } from "./bridge.js";
import { nativeFormat, pump } from "./feed.js";
import { errorResult, toResult } from "./results.js";

const stores = new Map();

/**
 * The open store at `location` (a SQLite path or a PostgreSQL URL), opened once per location, durability and
 * access in this process.
 */
export function openStore(location, { durability = "full", write = true } = {}) {
  if (typeof location !== "string" || location === "") {
    throw new TypeError("a store is a SQLite file path or a postgresql:// URL (a non-empty string)");
  }
  const key = `${write ? "w" : "r"}:${durability}:${location}`;
  let opened = stores.get(key);
  if (!opened) {
    opened = native.openStore(location, write, durability);
    stores.set(key, opened);
    opened.catch(() => stores.delete(key));
  }
  return opened;
}

/**
 * Declares a tool. `parameters` is a JSON Schema (a TypeBox schema is one); `execute(args, { signal, callId,
 * sessionId, idempotencyKey, onUpdate })` returns (a promise of) a string or a result object. `early` starts its
 * calls at their `toolcall_end`, once the prefix is committed; `idempotent` lets recovery run it again;
 * `providerAsync` marks it as OpenAI's provider-async tool (early too).
 */
export function tool({
  name,
  description = "",
  parameters = { type: "object", properties: {} },
  early = false,
  idempotent = false,
  providerAsync = false,
  sequential = false,
  timeoutMs,
  execute,
}) {
  if (typeof name !== "string" || name === "") throw new TypeError("a tool needs a name (a non-empty string)");
  if (typeof execute !== "function") throw new TypeError(`tool ${name}: execute must be a function`);
  if (parameters === null || typeof parameters !== "object") {
    throw new TypeError(`tool ${name}: parameters must be a JSON Schema object`);
  }
  return Object.freeze({
    name,
    description,
    parameters: JSON.parse(JSON.stringify(parameters)),
    early: Boolean(early),
    idempotent: Boolean(idempotent),
    providerAsync: Boolean(providerAsync),
    sequential: Boolean(sequential),
    timeoutMs,
    execute,
  });
}

/** The spec of a tool, as the addon reads it. */
export function specOf(t) {
  const { execute: _execute, ...spec } = t;
  return spec;
}

/**
 * The engine over a store (a SQLite path or a `postgresql://` URL), with tools and hooks.
 *
 * Options: `tools` (from `tool(...)`), `beforeToolCall({ toolCall, args })` (return `{ block: true, reason }` to
 * block), `afterToolCall({ toolCall, args, result, isError })` (return fields to replace), `durability` (`full` or
 * `normal`, SQLite), `toolExecution` (`parallel` or `sequential`), `earlyExecution` (default true), `maxInFlight`.
 */
export class Engine {
  #engine;
  #store;
  #ready;
  #tools;

  constructor(store, { tools = [], beforeToolCall, afterToolCall, durability = "full", ...options } = {}) {
    if (!Array.isArray(tools)) throw new TypeError("tools must be an array of tool(...) declarations");
    const names = new Set();
    for (const t of tools) {
      if (!t || typeof t.execute !== "function" || typeof t.name !== "string") {
        throw new TypeError("each tool must come from tool({ name, execute, ... })");
      }
      if (names.has(t.name)) throw new TypeError(`two tools are named ${t.name}`);
      names.add(t.name);
    }
    this.#tools = new Map(tools.map((t) => [t.name, t]));
    const dispatch = createDispatcher(() => this.#engine, {
      call: (letter, context) => runTool(this.#tools.get(letter.tool), letter, context),
      before: async ({ toolCall }) =>
        beforeToolCall ? await beforeToolCall({ toolCall, args: toolCall.arguments }) : undefined,
      after: async ({ toolCall, result, isError }) =>
        afterToolCall ? await afterToolCall({ toolCall, args: toolCall.arguments, result, isError }) : undefined,
    });
    const nativeOptions = JSON.stringify({
      ...options,
      beforeToolCall: typeof beforeToolCall === "function",
      afterToolCall: typeof afterToolCall === "function",
    });
    this.#ready = openStore(store, { durability }).then((opened) => {
      this.#store = opened;
      this.#engine = new native.NativeEngine(opened, JSON.stringify(tools.map(specOf)), nativeOptions, dispatch);
      return this.#engine;
    });
    // A store that cannot be opened is reported by the first call that needs the engine.
    this.#ready.catch(() => {});
  }

  /** A new session's id. */
  async createSession() {
    return (await this.#ready).createSession();
  }

  /** Appends a user message with `text` to `session`. */
  async appendUser(session, text) {
    await (await this.#ready).appendUser(session, String(text));
  }

  /**
   * Wraps one model response of `session`: `stream` is read in `format` (see `FORMATS`), tools flagged early start
   * at their `toolcall_end` once the prefix is durable, the others after the stream. The result is an async
   * iterable of the engine's events; after it, `calls()` gives each call's result with its figures. `signal`
   * cancels the response: every admitted call still gets its stored result.
   */
  wrap(session, stream, { format = "pi", seal = "complete", record, signal } = {}) {
    const readAs = nativeFormat(format);
    const opened = this.#ready.then((engine) => engine.open(session, readAs, seal, record ?? null));
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

/** One wrapped response: an async iterable of the engine's events, then its calls. */
class Wrapped {
  #events;
  #results = [];
  #store;
  #session;
  #finished = false;

  constructor(opened, store, session, stream, format, signal) {
    this.#store = store;
    this.#session = session;
    this.#events = this.#read(opened, stream, format, signal);
  }

  async *#read(opened, stream, format, signal) {
    const response = await opened;
    const cancel = () => response.cancel();
    if (signal?.aborted) cancel();
    signal?.addEventListener("abort", cancel, { once: true });
    // The pump stops when the caller aborts, and when the engine's side fails (the response could not open): the
    // model's stream is not read on for nothing.
    const failed = new AbortController();
    const feeding = pump(stream, format, response, signal ? AbortSignal.any([signal, failed.signal]) : failed.signal);
    try {
      while (true) {
        let text;
        try {
          text = await response.nextBatch();
        } catch (error) {
          failed.abort();
          throw error;
        }
        const batch = JSON.parse(text);
        // A batch ends with null once the run has ended.
        const ended = batch.at(-1) === null;
        for (const event of ended ? batch.slice(0, -1) : batch) {
          if (event.type === "message_end" && event.message?.role === "tool_result") this.#results.push(event.message);
          yield event;
        }
        if (ended) break;
      }
      this.#finished = true;
    } finally {
      signal?.removeEventListener("abort", cancel);
      await response.close();
      await feeding;
    }
  }

  [Symbol.asyncIterator]() {
    return this.#events;
  }

  /**
   * Each call's stored result with its figures (`headroomMs`: how long before the stream's end it was sealed;
   * `sealToStartMs`: the prefix commit and the start; `runMs`; `overlapMs`: how much of its run overlapped the
   * stream). Read after the events are consumed.
   */
  async calls() {
    if (!this.#finished) throw new Error("calls() is read after the response's events have been consumed");
    const figures = JSON.parse(await this.#store().figures(this.#session, null));
    const byId = new Map((figures.calls ?? []).map((call) => [call.id, call]));
    return this.#results.map((message) => {
      const figure = byId.get(message.tool_call_id) ?? {};
      return {
        callId: message.tool_call_id,
        toolName: message.tool_name,
        content: message.content,
        isError: message.is_error,
        headroomMs: figure.headroom_ms ?? null,
        sealToStartMs: figure.seal_to_start_ms ?? null,
        runMs: figure.run_ms ?? null,
        overlapMs: figure.overlap_ms ?? null,
      };
    });
  }
}

/** What a store holds: its sessions with their messages, tool runs and figures (`headstart inspect --json`). */
export async function inspect(store, session) {
  const opened = await openStore(store, { write: false });
  return JSON.parse(await opened.inspect(session ?? null));
}

// The AI SDK's language-model stream parts (LanguageModelV4's, which `wrapLanguageModel` gives V3 models too) into a
// native response: the engine's delta events, in bursts (the parts of one turn of the event loop go over together; a
// seal and the end at once). Consecutive deltas of one block go over as one.
//
// A call is sealed at the first of: its streamed input forms a complete JSON object (the rule of the engine's own
// Chat Completions parser, for providers such as OpenAI's Chat Completions, whose AI SDK model gives its `tool-call`
// parts only when the stream ends), its `tool-input-end` when the input is whole there, its `tool-call` part.
// Provider-executed calls are the provider's: the engine does not see them. A call the stream sealed without its
// `tool-call` part (it was cut off) is not the AI SDK's: the session answers it as never run.

import { engineFinish, engineUsage } from "./convert.js";
import { ObjectEnd } from "./object-end.js";

/** The engine's events of each kind of block: its start, its delta, its end. */
const ENGINE_EVENTS = {
  text: ["text_start", "text_delta", "text_end"],
  thinking: ["thinking_start", "thinking_delta", "thinking_end"],
  toolCall: ["toolcall_start", "toolcall_delta", "toolcall_end"],
};

/** A call's input as JSON: its object, or `undefined` when it does not parse as one. */
function parsedInput(text) {
  if (text.trim() === "") return {};
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * AI SDK stream parts into a native response. `onSeal(call)` is told of each call sealed, with `{ id, name, text,
 * input }` (`input` its parsed object, when it is one); `finish` says which calls were the AI SDK's.
 */
export class AiFeed {
  #response;
  #onSeal;
  /** JSON lines waiting to go over. */
  #pending = [];
  #scheduled = false;
  #closed = false;
  #started = false;
  /** The engine's next content index. */
  #next = 0;
  /** Text and reasoning blocks by their part id: `{ at, kind, open }`. */
  #blocks = new Map();
  /** Client tool calls by id: `{ at, id, name, text, end, sealed, announced }`. */
  #calls = new Map();
  /** Provider-executed calls' ids. */
  #provider = new Set();
  /** The response's model and id, from `response-metadata`, for the engine's `start`. */
  #metadata = {};
  /**
   * The delta being joined: the block, and its text so far.
   * @type {any}
   */
  #joinBlock = null;
  #joinText = "";

  /**
   * @param {import("../../index.js").NativeResponse} response
   * @param {{ onSeal?: (call: { id: string, name: string, text: string, input: unknown }) => void }} [options]
   */
  constructor(response, { onSeal } = {}) {
    this.#response = response;
    this.#onSeal = onSeal;
  }

  /** Takes one stream part. */
  add(part) {
    if (this.#closed || !part || typeof part !== "object") return;
    switch (part.type) {
      case "text-delta":
      case "reasoning-delta":
        return this.#delta(this.#blocks.get(part.id), part.delta);
      case "tool-input-delta":
        return this.#inputDelta(part);
      case "response-metadata":
        if (typeof part.modelId === "string") this.#metadata.model = part.modelId;
        if (typeof part.id === "string") this.#metadata.response_id = part.id;
        return;
      case "text-start":
      case "reasoning-start":
        return this.#open(part.id, part.type === "text-start" ? "text" : "thinking");
      case "text-end":
      case "reasoning-end":
        return this.#close(this.#blocks.get(part.id));
      case "tool-input-start":
        if (part.providerExecuted) this.#provider.add(part.id);
        else this.#openCall(part.id, part.toolName);
        return this.#schedule();
      case "tool-input-end": {
        const call = this.#calls.get(part.id);
        if (call && !call.sealed && call.end.closed && !call.end.trailing) this.#seal(call);
        return;
      }
      case "tool-call":
        return this.#toolCall(part);
      case "finish":
        return void this.finish(part);
      case "error":
        return this.fail(messageOf(part.error));
      default:
    }
  }

  /** The engine's `start`, once, before anything else. */
  #start() {
    if (this.#started) return;
    this.#started = true;
    this.#pending.push(JSON.stringify({ type: "start", ...this.#metadata }));
  }

  #open(id, kind) {
    if (this.#blocks.has(id)) return;
    this.#start();
    const block = { at: this.#next++, kind, open: true };
    this.#blocks.set(id, block);
    this.#pending.push(`{"type":"${ENGINE_EVENTS[kind][0]}","index":${block.at}}`);
    this.#schedule();
  }

  #delta(block, delta) {
    if (!block?.open || typeof delta !== "string") return;
    if (this.#joinBlock !== block) {
      this.#settleJoining();
      this.#joinBlock = block;
    }
    this.#joinText += delta;
    this.#schedule();
  }

  #close(block) {
    if (!block?.open) return;
    this.#settleJoining();
    block.open = false;
    this.#pending.push(`{"type":"${ENGINE_EVENTS[block.kind][2]}","index":${block.at}}`);
    this.#schedule();
  }

  #openCall(id, name) {
    if (this.#calls.has(id) || typeof id !== "string") return this.#calls.get(id);
    this.#start();
    const call = { at: this.#next++, id, name: String(name ?? ""), text: "", end: new ObjectEnd(), sealed: false, announced: false, open: true };
    this.#calls.set(id, call);
    this.#pending.push(JSON.stringify({ type: "toolcall_start", index: call.at, id, name: call.name }));
    return call;
  }

  #inputDelta(part) {
    const call = this.#calls.get(part.id);
    if (!call || call.sealed || typeof part.delta !== "string") return;
    call.text += part.delta;
    call.end.feed(part.delta);
    this.#delta(call, part.delta);
    if (call.end.closed && !call.end.trailing) this.#seal(call);
  }

  /** The call's `tool-call` part: the AI SDK will see it. Its input seals a call still open. */
  #toolCall(part) {
    if (part.providerExecuted || this.#provider.has(part.toolCallId)) return;
    const call = this.#openCall(part.toolCallId, part.toolName);
    if (!call) return;
    call.announced = true;
    if (call.sealed) return;
    const input = typeof part.input === "string" ? part.input : JSON.stringify(part.input ?? {});
    if (call.text === "" && input !== "") {
      // No deltas came: the engine keeps the input as the model gave it.
      call.text = input;
      this.#delta(call, input);
    }
    this.#seal(call, parsedInput(input));
  }

  /** Seals `call` (its arguments `input` when given, else its streamed text): it may start, so it goes over at once. */
  #seal(call, input = parsedInput(call.text)) {
    this.#settleJoining();
    call.sealed = true;
    call.open = false;
    this.#pending.push(JSON.stringify({ type: "toolcall_end", index: call.at, ...(input ? { arguments: input } : {}) }));
    this.flush();
    this.#onSeal?.({ id: call.id, name: call.name, text: call.text, input });
  }

  /**
   * The response's `finish` part: blocks still open are closed, calls still open sealed, and the end goes over.
   * Returns which calls were the AI SDK's (their `tool-call` part came) and which were not.
   */
  finish(part) {
    if (this.#closed) return { calls: [], orphans: [] };
    this.#settleJoining();
    for (const block of this.#blocks.values()) this.#close(block);
    const calls = [];
    const orphans = [];
    for (const call of this.#calls.values()) {
      if (!call.sealed) this.#seal(call);
      (call.announced ? calls : orphans).push(call.id);
    }
    this.#start();
    const usage = engineUsage(part.usage);
    const end = engineFinish(part.finishReason, calls.length > 0);
    this.#pending.push(JSON.stringify({ ...end, ...(usage ? { usage } : {}) }));
    this.end();
    return { calls, orphans };
  }

  #schedule() {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.flush());
  }

  #settleJoining() {
    const block = this.#joinBlock;
    if (block === null) return;
    const kind = block.kind ?? "toolCall";
    this.#pending.push(`{"type":"${ENGINE_EVENTS[kind][1]}","index":${block.at},"delta":${JSON.stringify(this.#joinText)}}`);
    this.#joinBlock = null;
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

  /** Whether the feed was closed. */
  get closed() {
    return this.#closed;
  }

  /** The stream ended (after its `finish`, or without one: the engine then ends the response as an error). */
  end() {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#response.end();
  }

  /** The stream was cancelled (an abort, a retry that discards the attempt): the response ends as `aborted`. */
  abort(message = "aborted") {
    if (this.#closed) return;
    this.#start();
    this.#pending.push(JSON.stringify({ type: "error", stop_reason: "aborted", message }));
    this.end();
  }

  /** The stream failed with `message`: the response ends as an error. */
  fail(message) {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#response.fail(message);
  }
}

/** The message of an error part's error, of anything. */
function messageOf(error) {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

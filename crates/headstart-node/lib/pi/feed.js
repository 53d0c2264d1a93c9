// pi-ai's `AssistantMessageEvent`s into a native response: the engine's delta events, in bursts.
//
// As in pi-agent-core, the response's final message (`done.message`, or the partial message of `error`) is
// authoritative, and the events only say sooner what it will hold: a stream may skip them (a `streamFn` that wraps a
// non-streaming completion pushes `done` alone), announce a block without its start or end, or end with more blocks
// than it announced. The feed gives the engine the blocks in the final message's order, with what the events did not
// say made up from the event's `partial` message while the stream goes on, and from the final message at its end:
// - an event the engine could not take (a block that is not open, of another kind, a second `start`) is not passed
//   on; the final message says what that block holds;
// - a block no event announced, before one that is, is made from the partial message (a text whole; a call opened,
//   and sealed only from the final message); where the partial message does not have it, the order is kept by
//   taking every later block from the final message;
// - at the end, each block still open is closed from the final message (a text's missing tail added, a call sealed
//   with the final arguments: a call sealed so is a *late* call, which pi runs in its batch), and the blocks no event
//   announced are made whole, in order; a call the events announced that the final message does not hold is an
//   *orphan*, which pi never runs;
// - a failed response (`stopReason` `error` or `aborted`) seals nothing more: pi runs none of its calls.
// A call's id is pi's, unless it has none or repeats one of the response (the engine needs it unique): it is then
// given one (`callAt` says which).

import { engineStop, engineUsage, isFailedStop, kindOf } from "./convert.js";

const KIND_OF_EVENT = {
  text_start: "text",
  text_delta: "text",
  text_end: "text",
  thinking_start: "thinking",
  thinking_delta: "thinking",
  thinking_end: "thinking",
  toolcall_start: "toolCall",
  toolcall_delta: "toolCall",
  toolcall_end: "toolCall",
};

/** The engine's events of each kind of block: its start, its delta, its end. */
const ENGINE_EVENTS = {
  text: ["text_start", "text_delta", "text_end"],
  thinking: ["thinking_start", "thinking_delta", "thinking_end"],
  toolCall: ["toolcall_start", "toolcall_delta", "toolcall_end"],
};

/** The text a pi block of `kind` holds. */
function textOfBlock(kind, block) {
  const text = kind === "text" ? block?.text : block?.thinking;
  return typeof text === "string" ? text : "";
}

/** The JSON text of a call's arguments, for comparing them (`undefined` for what has none). */
function argumentsText(args) {
  try {
    return JSON.stringify(args);
  } catch {
    return undefined;
  }
}

/** What the engine is told of a response's end, from pi's final message: which calls, and how it ended. */
class Ending {
  /** The final message's calls: the engine's call id of each, by the block's index in the message. */
  calls = new Map();
  /** Calls sealed from the final message (no `toolcall_end` came): pi runs them in its batch. */
  late = new Set();
  /** Calls the events announced that the final message does not hold: nothing runs them. */
  orphans = new Set();
  /** Calls sealed by their event whose arguments the final message changed. */
  changed = new Set();

  /** The engine's id of the final message's call at content index `index`. */
  callAt(index) {
    return this.calls.get(index);
  }
}

/**
 * pi-ai events into a native response, in bursts: the events of one turn of the event loop go over as one call (JSON
 * lines), and a seal or the end goes over at once, with whatever is before it. Consecutive token deltas of one block
 * go over as one delta. `finish` (or `add` of `done`/`error`) and `fail` close the feed. `onSeal(id, toolCall)` is
 * told of each call sealed by its `toolcall_end`, with the engine's id of it.
 */
export class PiFeed {
  #response;
  #onSeal;
  /** JSON lines waiting to go over. */
  #pending = [];
  /** The token delta being joined: the engine's event type, the pi block index, the block, and the text so far. */
  #joinType = null;
  #joinIndex = -1;
  /** @type {any} */
  #joinBlock = null;
  #joinText = "";
  #scheduled = false;
  #closed = false;
  #started = false;
  /**
   * The blocks the engine has, in its order: `{kind, open, text, id, piId, name, argumentsText}`. While the response
   * streams, a block's place is its pi content index.
   */
  #blocks = [];
  /** The call ids the engine has. */
  #ids = new Set();
  /** The order could not be kept (a block no event announced nor the partial message held): the rest is the final message's. */
  #gap = false;
  /** How the response ended, once it has. */
  #ending;

  /**
   * @param {import("../../index.js").NativeResponse} response
   * @param {{ onSeal?: (id: string, toolCall: any) => void }} [options]
   */
  constructor(response, { onSeal } = {}) {
    this.#response = response;
    this.#onSeal = onSeal;
  }

  /** Takes one pi-ai event; a value that is not one is a `TypeError`. */
  add(event) {
    if (!event || typeof event !== "object" || typeof event.type !== "string") {
      throw new TypeError(`not a pi-ai AssistantMessageEvent: ${safeJson(event)}`);
    }
    if (typeof event.delta === "string" && event.type.endsWith("_delta")) {
      this.token(event.type, event.contentIndex, event.delta, event);
    } else {
      this.other(event);
    }
  }

  /**
   * Takes one token delta (`text_delta`, `thinking_delta` or `toolcall_delta`) of block `index`: the hot path, one
   * call per token. `event` is read only when the block is new to the feed.
   */
  token(type, index, delta, event) {
    if (this.#closed) return;
    if (this.#joinType !== type || this.#joinIndex !== index) {
      this.#settleJoining();
      const block = this.#blockFor(KIND_OF_EVENT[type], index, event);
      if (!block) return;
      this.#joinType = type;
      this.#joinIndex = index;
      this.#joinBlock = block;
    }
    this.#joinText += delta;
    this.#schedule();
  }

  /** Takes one pi-ai event that is not a token delta with a string. */
  other(event) {
    if (this.#closed) return;
    const kind = KIND_OF_EVENT[event.type];
    switch (event.type) {
      case "start":
        this.#start(event.partial);
        this.#schedule();
        return;
      case "done":
        this.finish(event, event.message);
        return;
      case "error":
        this.finish(event, event.error);
        return;
      case "text_delta":
      case "thinking_delta":
      case "toolcall_delta":
        this.token(event.type, event.contentIndex, String(event.delta ?? ""), event);
        return;
      case "text_start":
      case "thinking_start":
      case "toolcall_start":
        this.#settleJoining();
        this.#blockFor(kind, event.contentIndex, event);
        this.#schedule();
        return;
      case "text_end":
      case "thinking_end": {
        this.#settleJoining();
        const block = this.#blockFor(kind, event.contentIndex, event);
        const signature = event.partial?.content?.[event.contentIndex]?.thinkingSignature;
        if (block) this.#closeText(block, typeof event.content === "string" ? event.content : undefined, signature);
        this.#schedule();
        return;
      }
      case "toolcall_end": {
        this.#settleJoining();
        const block = this.#blockFor(kind, event.contentIndex, event);
        if (!block) return;
        this.#seal(block, event.toolCall?.arguments);
        // A seal goes over at once: the call may start.
        this.flush();
        this.#onSeal?.(block.id, event.toolCall);
        return;
      }
      default:
    }
  }

  /**
   * The response ended with `event` (`done` or `error`); `final` is its final message (`response.result()`, or the
   * event's own). What the events did not say is taken from it, then the end goes over. A `final` that is not a
   * message fails the response, naming what is missing.
   */
  finish(event, final) {
    if (this.#closed) return;
    this.#settleJoining();
    if (!final || typeof final !== "object" || !Array.isArray(final.content)) {
      const field = event.type === "error" ? "error" : "message";
      this.fail(
        `the pi stream's ${event.type} event has no final message (its ${field}, an AssistantMessage with a ` +
          `content array): ${safeJson(final)}`,
      );
      return;
    }
    this.#start(final);
    const failed = isFailedStop(final.stopReason);
    this.#ending = this.#reconcile(final.content, failed);
    const usage = engineUsage(final.usage);
    const end = failed
      ? {
          type: "error",
          stop_reason: final.stopReason,
          message: String(final.errorMessage ?? final.stopReason),
          ...(usage ? { usage } : {}),
        }
      : { type: "done", stop_reason: engineStop(final.stopReason, this.#ending.calls.size > 0), ...(usage ? { usage } : {}) };
    this.#pending.push(JSON.stringify(end));
    this.end();
  }

  /** How the response ended (the final message's calls, late, orphaned and changed), once `finish` has run. */
  get ending() {
    return this.#ending;
  }

  /** The final message's blocks against the engine's: each closed, made or left an orphan (see the file's head). */
  #reconcile(content, failed) {
    const ending = new Ending();
    const known = this.#blocks.length;
    const matched = new Array(known).fill(false);
    const added = [];
    for (const [index, piBlock] of content.entries()) {
      const kind = kindOf(piBlock);
      if (!kind) continue;
      const block = index < known ? this.#blocks[index] : undefined;
      const same = block?.kind === kind && (kind !== "toolCall" || (block.piId === piBlock.id && block.name === piBlock.name));
      if (!same) {
        added.push(index);
        continue;
      }
      matched[index] = true;
      if (kind !== "toolCall") {
        if (block.open) this.#closeText(block, textOfBlock(kind, piBlock), piBlock.thinkingSignature);
        continue;
      }
      ending.calls.set(index, block.id);
      if (block.open && !failed) {
        this.#seal(block, piBlock.arguments);
        ending.late.add(block.id);
      } else if (!block.open && block.argumentsText !== argumentsText(piBlock.arguments)) {
        ending.changed.add(block.id);
      }
    }
    for (const [at, block] of this.#blocks.entries()) {
      if (matched[at]) continue;
      if (block.kind === "toolCall") ending.orphans.add(block.id);
      // `done` takes no open block; an `error` leaves calls open (the engine stores them unsealed, never run).
      if (block.open && block.kind !== "toolCall") this.#closeText(block, undefined, undefined);
      else if (block.open && !failed) this.#seal(block, undefined);
    }
    for (const index of added) {
      const piBlock = content[index];
      const kind = kindOf(piBlock);
      const block = this.#open(kind, piBlock);
      if (kind !== "toolCall") {
        this.#closeText(block, textOfBlock(kind, piBlock), piBlock.thinkingSignature);
        continue;
      }
      ending.calls.set(index, block.id);
      if (failed) {
        // Unsealed, with its arguments as their text: stored as the model gave them, never run.
        const text = argumentsText(piBlock.arguments);
        if (text) this.#pending.push(JSON.stringify({ type: "toolcall_delta", index: block.at, delta: text }));
      } else {
        this.#seal(block, piBlock.arguments);
        ending.late.add(block.id);
      }
    }
    return ending;
  }

  /** The engine's `start`, once: before any block, or at the end of a stream that had none. */
  #start(message) {
    if (this.#started) return;
    this.#started = true;
    const model = message?.model;
    this.#pending.push(JSON.stringify({ type: "start", ...(model ? { model: String(model) } : {}) }));
  }

  /**
   * The open block of `kind` at pi index `index`, opened now if no event announced it (the blocks before it too);
   * `null` when the engine cannot take the event (the block is closed or of another kind, or the order is lost).
   */
  #blockFor(kind, index, event) {
    if (!kind || !Number.isSafeInteger(index) || index < 0) return null;
    if (index < this.#blocks.length) {
      const block = this.#blocks[index];
      return block.open && block.kind === kind ? block : null;
    }
    if (this.#gap) return null;
    this.#start(event?.partial);
    for (let at = this.#blocks.length; at < index; at++) {
      if (!this.#openUnannounced(event?.partial?.content?.[at])) {
        this.#gap = true;
        return null;
      }
    }
    const described = kind === "toolCall" ? (event?.type === "toolcall_end" ? event.toolCall : event?.partial?.content?.[index]) : {};
    if (kind === "toolCall" && kindOf(described) !== "toolCall") {
      // A call whose id and name nothing says yet: it and every later block come from the final message.
      this.#gap = true;
      return null;
    }
    return this.#open(kind, described);
  }

  /**
   * A block of the partial message no event announced, before one that is: a text whole, a call opened (sealed from
   * the final message only). `false` for what is not a block.
   */
  #openUnannounced(piBlock) {
    const kind = kindOf(piBlock);
    if (!kind) return false;
    const block = this.#open(kind, piBlock);
    if (kind !== "toolCall") this.#closeText(block, textOfBlock(kind, piBlock), piBlock.thinkingSignature);
    return true;
  }

  /** Opens a block of `kind` at the engine's next index; a call with pi's id (or one made unique) and name. */
  #open(kind, piBlock) {
    const at = this.#blocks.length;
    const block = { kind, at, open: true, text: "" };
    this.#blocks.push(block);
    const [start] = ENGINE_EVENTS[kind];
    if (kind !== "toolCall") {
      this.#pending.push(`{"type":"${start}","index":${at}}`);
      return block;
    }
    block.piId = piBlock?.id;
    block.name = piBlock?.name;
    block.id = this.#uniqueId(block.piId, at);
    this.#ids.add(block.id);
    this.#pending.push(JSON.stringify({ type: start, index: at, id: block.id, name: String(block.name ?? "") }));
    return block;
  }

  /** pi's call id when it is a string not used yet in the response; else one made from it and the call's place. */
  #uniqueId(piId, at) {
    if (typeof piId === "string" && piId !== "" && !this.#ids.has(piId)) return piId;
    const base = `${typeof piId === "string" && piId !== "" ? piId : "call"}#${at}`;
    let id = base;
    for (let n = 2; this.#ids.has(id); n++) id = `${base}.${n}`;
    return id;
  }

  /** Closes a text or thinking block; `text`, when the streamed text is a prefix of it, gives its missing tail. */
  #closeText(block, text, signature) {
    if (typeof text === "string" && text.length > block.text.length && text.startsWith(block.text)) {
      this.#pending.push(JSON.stringify({ type: ENGINE_EVENTS[block.kind][1], index: block.at, delta: text.slice(block.text.length) }));
      block.text = text;
    }
    const end = { type: ENGINE_EVENTS[block.kind][2], index: block.at };
    if (block.kind === "thinking" && typeof signature === "string") end.signature = signature;
    this.#pending.push(JSON.stringify(end));
    block.open = false;
  }

  /** Seals a call, its arguments `args` when they are an object (else the engine reads its argument text). */
  #seal(block, args) {
    const override = args && typeof args === "object" ? args : undefined;
    this.#pending.push(JSON.stringify({ type: "toolcall_end", index: block.at, ...(override ? { arguments: override } : {}) }));
    block.open = false;
    block.argumentsText = argumentsText(args);
  }

  #schedule() {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.flush());
  }

  #settleJoining() {
    if (this.#joinType === null) return;
    const block = this.#joinBlock;
    if (block.kind !== "toolCall") block.text += this.#joinText;
    this.#pending.push(`{"type":"${this.#joinType}","index":${block.at},"delta":${JSON.stringify(this.#joinText)}}`);
    this.#joinType = null;
    this.#joinIndex = -1;
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

  /** Whether the feed was closed (its end or a failure handed over). */
  get closed() {
    return this.#closed;
  }

  /** The stream ended (after its terminal event, or without one: the engine then ends the response as an error). */
  end() {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#response.end();
  }

  /** The caller aborted the stream: the response ends as `aborted`. */
  abort() {
    if (this.#closed) return;
    this.#pending.push(JSON.stringify({ type: "error", stop_reason: "aborted", message: "aborted" }));
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

function safeJson(value) {
  try {
    return JSON.stringify(value)?.slice(0, 200) ?? String(value);
  } catch {
    return String(value);
  }
}

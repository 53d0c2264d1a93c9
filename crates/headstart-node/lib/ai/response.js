// One model call of the AI SDK, as one response of the chat's session: the model's stream read eagerly into the
// engine and handed on to the AI SDK part for part, unchanged and undelayed; each call's record; an early call's run,
// started when the engine asks for it (its owner is durable).

import { CallRecords } from "../call.js";
import { errorResult } from "../results.js";
import { AiFeed } from "./feed.js";
import { validateInput } from "./validate.js";

/** The result of a call the AI SDK did not announce (its stream was cut before the call's `tool-call` part). */
const NOT_THE_SDKS = "not executed: the model's stream was cut before the call was whole, so the AI SDK never saw it";
/** The result of a call the engine asks for once the chat stopped waiting for it. */
const NOT_RUN = "not executed: the AI SDK did not run the call";

/** A value's result as the engine stores it: its text (a string, or its JSON), the value itself as the details. */
export function engineAnswer(value) {
  if (typeof value === "string") return { content: [{ type: "text", text: value }], details: null, isError: false };
  let text;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return { content: [{ type: "text", text }], details: value ?? null, isError: false };
}

/** A message of anything thrown. */
export function messageOf(error) {
  return error instanceof Error ? error.message : String(error);
}

/** One model call of a chat. */
export class Response {
  /** The calls of the response by id. */
  #calls = new CallRecords();
  /** The stream has ended: which calls the AI SDK saw (`{ calls, orphans }`). */
  #ending;
  /** The engine's run of the response has ended. */
  settled = false;

  /**
   * @param {import("./chat.js").Chat} chat
   * @param {import("../../index.js").NativeResponse} native
   * @param {any} params the model call's options (LanguageModelV4CallOptions)
   */
  constructor(chat, native, params) {
    this.chat = chat;
    this.native = native;
    this.params = params;
    /** The tools the step offers the model (`activeTools`, `prepareStep`): only their calls may start early. */
    this.offered = new Set((params.tools ?? []).map((tool) => tool?.name));
    this.feed = new AiFeed(native, { onSeal: (call) => this.#sealed(call) });
    this.drained = this.#drain();
    params.abortSignal?.addEventListener("abort", () => this.feed.abort("the AI SDK's call was aborted"), { once: true });
  }

  /** The record of call `id`, made on first use. */
  call(id) {
    return this.#calls.get(id);
  }

  /** Whether the response holds call `id`. */
  holds(id) {
    return this.#calls.has(id);
  }

  /** Whether a call of tool `name` may start at its seal in this step. */
  #startsEarly(name) {
    return this.chat.isEarly(name) && this.offered.has(name) && this.params.toolChoice?.type !== "none";
  }

  /** A call was sealed (`{ id, name, text, input }`). */
  #sealed(sealed) {
    const call = this.call(sealed.id);
    call.toolCall = sealed;
    call.early = this.#startsEarly(sealed.name);
  }

  /**
   * Reads the model's stream into the engine as it comes, whoever reads the returned stream and whenever: an early
   * call's seal does not wait for the AI SDK to pull. Each part goes on to the AI SDK as it came.
   * @param {ReadableStream<any>} inner
   * @returns {ReadableStream<any>}
   */
  pipe(inner) {
    const reader = inner.getReader();
    let cancelled = false;
    return new ReadableStream({
      start: (controller) => {
        void (async () => {
          try {
            while (true) {
              const { value, done } = await reader.read();
              if (done) break;
              if (!cancelled) controller.enqueue(value);
              if (value?.type === "finish") this.#finished(this.feed.finish(value));
              else this.feed.add(value);
            }
            this.feed.end();
            if (!cancelled) controller.close();
          } catch (error) {
            if (cancelled) return;
            this.feed.fail(messageOf(error));
            controller.error(error);
          }
        })();
      },
      cancel: (reason) => {
        // An abort, or a retry that discards this attempt: the engine's response ends as aborted.
        cancelled = true;
        this.feed.abort(reason === undefined ? "the AI SDK stopped reading the stream" : messageOf(reason));
        return reader.cancel(reason);
      },
    });
  }

  /** A `generateText` result (no stream): its content as the parts a stream would have had, at once. */
  feedWhole(result) {
    let id = 0;
    for (const part of result?.content ?? []) {
      if (part?.type === "text" || part?.type === "reasoning") {
        const kind = part.type;
        const block = `${kind}-${id++}`;
        this.feed.add({ type: `${kind}-start`, id: block });
        this.feed.add({ type: `${kind}-delta`, id: block, delta: part.text ?? "" });
        this.feed.add({ type: `${kind}-end`, id: block });
      } else if (part?.type === "tool-call") {
        this.feed.add(part);
      }
    }
    this.#finished(this.feed.finish({ type: "finish", finishReason: result?.finishReason, usage: result?.usage }));
  }

  /** The stream has ended with `ending` (which calls the AI SDK saw). */
  #finished(ending) {
    this.#ending = ending;
    if (this.#waiting()) this.native.wake();
  }

  /** The model call failed before its stream came: the response ends as an error. */
  failed(error) {
    this.feed.fail(messageOf(error));
  }

  /**
   * The engine asks for a call: it is durable, and may start. An early call starts now; the others run when the AI
   * SDK runs them; a call the AI SDK never saw is answered at once.
   */
  onCall(letter, bridge) {
    const call = this.call(letter.callId);
    const answer = call.ask(bridge);
    call.toolCall ??= { id: letter.callId, name: letter.tool, text: JSON.stringify(letter.arguments ?? {}), input: letter.arguments };
    if (!call.early && this.#ending?.orphans.includes(call.id)) {
      call.end(errorResult(NOT_THE_SDKS));
    } else if (call.early && !call.pipeline) {
      call.pipeline = this.#runEarly(call, bridge);
    }
    if (this.#waiting()) this.native.wake();
    return answer;
  }

  /**
   * The calls the response waits for JavaScript to end, when that is all it waits for: the stream has ended, and the
   * engine has asked for every call it will ask for (or settled it). Their ends come from the AI SDK's `execute`, an
   * early run, or the app (an approval, a client tool's result, given with the next model call), so the drain need
   * not keep Node's event loop alive meanwhile: a chat that stops at an approval lets its process end.
   */
  #waiting() {
    if (!this.#ending) return undefined;
    const calls = [...this.#calls.values()];
    if (!calls.every((call) => call.heard)) return undefined;
    const pending = calls.filter((call) => !call.ended && call.stored === undefined);
    return pending.length > 0 ? pending : undefined;
  }

  /**
   * An early call's run: its input checked as the AI SDK checks it, then the tool's own `execute`. Resolves to
   * `{ value }` or `{ error }`, the engine having the result first. A call whose input the AI SDK would refuse does not
   * start (`{ invalid }`): it is no longer early, and waits as any other call for the AI SDK to run it (repaired) or
   * for its outcome in the next request (the tool error the AI SDK gave the model).
   */
  async #runEarly(call, bridge) {
    const tool = this.chat.tool(call.toolCall.name);
    const checked = await validateInput(tool, call.toolCall.text);
    if (!checked.success) {
      call.early = false;
      return { invalid: checked.error };
    }
    const signal = this.params.abortSignal ? AbortSignal.any([bridge.signal, this.params.abortSignal]) : bridge.signal;
    try {
      const value = await collect(await tool.execute(checked.value, { toolCallId: call.id, messages: this.params.prompt ?? [], abortSignal: signal }));
      call.end(engineAnswer(value.final));
      return { value, input: checked.value };
    } catch (error) {
      call.end(errorResult(messageOf(error)));
      return { error, input: checked.value };
    }
  }

  /**
   * The calls the engine admitted and the AI SDK did not run by the chat's next model call: each gets the outcome
   * the next prompt holds for it (a result the app supplied, a denial), or the "not run" result.
   */
  reconcile(outcomes) {
    for (const call of this.#calls.values()) {
      // An early call ends with its run; one the AI SDK runs, with its `execute`.
      if (call.ended || call.early || call.claimed) continue;
      call.end(outcomes.get(call.id) ?? errorResult(NOT_RUN));
    }
  }

  /** Reads the engine's events to their end, keeping the results it stored without asking. Never rejects. */
  async #drain() {
    while (true) {
      const waiting = this.#waiting();
      if (waiting) {
        await Promise.all(waiting.map((call) => call.settled()));
        continue;
      }
      let batch;
      try {
        batch = JSON.parse(await this.native.nextBatch(true));
      } catch {
        batch = [null];
      }
      for (const event of batch) {
        if (this.#calls.take(event)) return;
      }
    }
  }
}

/**
 * What a tool's `execute` gave: a value, or the values of an async iterable (the AI SDK's preliminary results, the
 * last one final).
 */
async function collect(value) {
  if (value && typeof value === "object" && typeof value[Symbol.asyncIterator] === "function") {
    const values = [];
    for await (const item of value) values.push(item);
    return { values, final: values.at(-1) };
  }
  return { final: value };
}

// One wrapped response of `Engine.wrap`: the model's stream pumped into the engine in its format, and the engine's
// events out, as an async iterable; then each call's result with its figures.

import { pump } from "./feed.js";

/** One wrapped response: an async iterable of the engine's events, then its calls. */
export class Wrapped {
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

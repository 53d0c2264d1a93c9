// The stream a loop's events are read from: pi-ai's `EventStream` (what pi-agent-core's `agentLoop` returns, so
// `instanceof` and the types hold), with an iterator written by hand. pi-ai's iterator is an async generator, which
// costs a few promise turns per event; this one answers from its queue with one resolved promise, or parks the reader
// until the next push. Same order, same end, same `result()`.

import { EventStream } from "@earendil-works/pi-ai";

const DONE = Object.freeze({ value: undefined, done: true });

/** An `EventStream` of a loop's events, ended by `agent_end` (its messages are the result) or by `end`. */
export class AgentEventStream extends EventStream {
  /** Events pushed and not read yet: `#queue[#head…]`. */
  #queue = [];
  #head = 0;
  /** Readers waiting for the next event, oldest first. */
  #readers = [];
  #ended = false;
  #result;
  #resolveResult;

  constructor() {
    super(
      (event) => event.type === "agent_end",
      (event) => (event.type === "agent_end" ? event.messages : []),
    );
    this.#result = new Promise((resolve) => (this.#resolveResult = resolve));
  }

  push(event) {
    if (this.#ended) return;
    if (event.type === "agent_end") {
      this.#ended = true;
      this.#resolveResult(event.messages);
    }
    const reader = this.#readers.shift();
    if (reader) reader({ value: event, done: false });
    else this.#queue.push(event);
  }

  end(result) {
    this.#ended = true;
    if (result !== undefined) this.#resolveResult(result);
    for (const reader of this.#readers.splice(0)) reader(DONE);
  }

  result() {
    return this.#result;
  }

  [Symbol.asyncIterator]() {
    let finished = false;
    const iterator = {
      next: () => {
        if (finished) return Promise.resolve(DONE);
        if (this.#head < this.#queue.length) {
          const value = this.#queue[this.#head];
          this.#queue[this.#head++] = undefined;
          if (this.#head === this.#queue.length) {
            this.#queue = [];
            this.#head = 0;
          }
          return Promise.resolve({ value, done: false });
        }
        if (this.#ended) {
          finished = true;
          return Promise.resolve(DONE);
        }
        return new Promise((resolve) => this.#readers.push(resolve));
      },
      // A reader that stops early (`break`) ends its own iteration, as an async generator's `return` does.
      return: (value) => {
        finished = true;
        return Promise.resolve({ value, done: true });
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }
}

// headstart/pi: pi-agent-core 1.6's agent loop as a drop-in, on headstart's engine.
//
// The loop follows `@earendil-works/pi-agent-core` 1.6.0 (its turns, events, hooks, steering and follow-up
// messages, `terminate`, length-truncated messages, aborts). What headstart adds sits under it:
// - each response is wrapped by the engine: the stream's events go into it as they arrive, and the transcript is
//   committed durably, in SQLite or PostgreSQL (`config.store`) or in memory;
// - a tool marked early (`executionMode: "early"` or `early: true`) starts at its call's `toolcall_end`, once the
//   prefix that holds the call is durable, while the model goes on streaming; the others run after the response,
//   exactly as pi runs them;
// - `resume` after a crash gives every call without a result its result and rebuilds the messages.
//
// Every call, early or not, runs through one pipeline (prepare: `prepareArguments`, validation, `beforeToolCall`;
// execute; finalize: `afterToolCall`), and the engine only decides when it may start: a call runs when the engine
// asks for it, which it does once the call's owner is durable. The deliberate differences from pi are listed in
// README.md, each with its reason.

import { Agent as PiAgent } from "@earendil-works/pi-agent-core";

import { runAgentLoop, runAgentLoopContinue } from "./lib/pi/loop.js";

export * from "@earendil-works/pi-agent-core";
export {
  agentLoop,
  agentLoopContinue,
  runAgentLoop,
  runAgentLoopContinue,
  setDefaultStreamFn,
} from "./lib/pi/loop.js";
export { resume } from "./lib/pi/resume.js";

/**
 * pi-agent-core's `Agent`, running headstart's loop. Options as pi's, plus `store` (a SQLite path or a
 * `postgresql://` URL), `storeSessionId` (the store's session to go on with; a new one otherwise, in `agent.storeSessionId`
 * after the first run) and `durability`. (pi's own `sessionId` stays the provider's cache key.)
 */
export class Agent extends PiAgent {
  constructor(options = {}) {
    super(options);
    /** Where the transcript is kept (a SQLite path or a `postgresql://` URL); in memory without one. */
    this.store = options.store;
    /** SQLite's durability: `full` (the default with a store) or `normal`. */
    this.durability = options.durability;
    /** The store's session this agent writes; set by its first run when not given. */
    this.storeSessionId = options.storeSessionId;
  }

  #config(config) {
    return {
      ...config,
      store: this.store,
      durability: this.durability,
      storeSessionId: this.storeSessionId,
      onStoreSession: (id) => {
        this.storeSessionId = id;
      },
    };
  }

  async runPromptMessages(messages, options = {}) {
    await this.runWithLifecycle(async (signal) => {
      await runAgentLoop(
        messages,
        this.createContextSnapshot(),
        this.#config(this.createLoopConfig(options)),
        (event) => this.processEvents(event),
        signal,
        this.streamFunction,
      );
    });
  }

  async runContinuation() {
    await this.runWithLifecycle(async (signal) => {
      await runAgentLoopContinue(
        this.createContextSnapshot(),
        this.#config(this.createLoopConfig()),
        (event) => this.processEvents(event),
        signal,
        this.streamFunction,
      );
    });
  }
}

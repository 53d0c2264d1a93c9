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
// pi declares the methods its Agent runs a loop through private; the drop-in overrides the two that call the loop
// (`runPromptMessages`, `runContinuation`) and calls the others as pi's own do.
// @ts-expect-error overriding pi's private runPromptMessages and runContinuation
export class Agent extends PiAgent {
  /** @param {import("./pi.js").AgentOptions & { store?: string, storeSessionId?: string, durability?: "full" | "normal" }} options */
  constructor(options) {
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

  /** pi's private steps of a run, as this class reaches them. */
  get #pi() {
    return /** @type {any} */ (this);
  }

  async runPromptMessages(messages, options = {}) {
    const pi = this.#pi;
    await pi.runWithLifecycle(async (signal) => {
      await runAgentLoop(
        messages,
        pi.createContextSnapshot(),
        this.#config(pi.createLoopConfig(options)),
        (event) => pi.processEvents(event),
        signal,
        this.streamFunction,
      );
    });
  }

  async runContinuation() {
    const pi = this.#pi;
    await pi.runWithLifecycle(async (signal) => {
      await runAgentLoopContinue(
        pi.createContextSnapshot(),
        this.#config(pi.createLoopConfig()),
        (event) => pi.processEvents(event),
        signal,
        this.streamFunction,
      );
    });
  }
}

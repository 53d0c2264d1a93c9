// One turn of the drop-in: a response wrapped by the engine, and a record of each of its calls. The pi events of the
// user's stream go into the engine as they arrive (`feed`); the engine asks for each call once its owner is durable
// (an early one at its seal), and the call then runs through pi's steps (lib/pi/execute.js). Once the stream has
// ended, its final message decides which calls pi's batch runs.

import { validateToolArguments } from "@earendil-works/pi-ai";

import { isEarly } from "./durable.js";
import { CallRecords } from "../call.js";
import { runEarlyToolCall } from "./execute.js";
import { errorResult } from "../results.js";
import { PiFeed } from "./feed.js";
import { createErrorToolResult } from "./steps.js";

/** The result of a call the engine asks for once the loop is gone. */
const LOOP_ENDED = "the agent loop ended before the call finished";
/** The result of a call the events announced and the final message does not hold: pi never runs it. */
const NOT_IN_FINAL_MESSAGE = "Tool call was not executed: it is not in the response's final message";

/** One response of a loop, and its calls. */
export class Turn {
  /** Each call's record, by the engine's id of the call. */
  #calls = new CallRecords();
  #drained;
  /** The turn was closed: calls the engine asks for now get an error result. */
  #closed = false;
  /** How the response ended (the final message's calls: late, orphaned), once the stream has. */
  #ending;
  /** The session's previous turn, whose run may still be storing its results while this one streams. */
  #previous;
  /**
   * Why the engine's side of the response failed: it could not open (an unknown session, a broken store), or a
   * write of its run failed; or the previous turn's did.
   */
  /** @type {Error | null} */
  failure = null;
  /**
   * The message as far as it has streamed (pi's `partial`), once the stream has started.
   * @type {any}
   */
  partial = null;

  constructor(session, response, context, config, signal, emit, previous) {
    this.session = session;
    this.response = response;
    this.context = context;
    this.config = config;
    this.signal = signal;
    this.emit = emit;
    this.feed = new PiFeed(response, { onSeal: (id, toolCall) => this.#sealed(id, toolCall) });
    this.#previous = previous;
    this.#drained = this.#drain();
    // The previous run's failure stops this response too (its stream is not read on). Settled, the previous turn is
    // let go, so that a long loop does not hold every turn it ran.
    previous?.settle().then(
      () => {
        if (this.#previous === previous) this.#previous = undefined;
      },
      (error) => {
        this.failure ??= error;
      },
    );
  }

  /**
   * Opens the session's next response. `previous` is the session's last turn: its calls all have their results,
   * and the engine may still be storing them; this response's opening waits for that (its request does not), so
   * the log stays in order.
   */
  static async open(session, context, config, signal, emit, previous) {
    const engine = await session.engine(context, config);
    const response = engine.openResponse(session.id, {
      users: session.takeUsers(),
      create: session.takeCreation(),
      after: previous?.response,
    });
    const turn = new Turn(session, response, context, config, signal, emit, previous);
    session.turn = turn;
    return turn;
  }

  /** The loop's tool named `name`. */
  tool(name) {
    return (this.context.tools ?? []).find((tool) => tool.name === name);
  }

  /** The record of call `id`, made on first use. */
  #call(id) {
    return this.#calls.get(id);
  }

  /** Whether calls of tool `name` run as the engine asks for them, at their seal, rather than in pi's batch. */
  #startsEarly(name) {
    return this.session.earlyExecution && isEarly(this.tool(name));
  }

  /**
   * A call was sealed by its `toolcall_end`. While the engine commits it, an early call's arguments are validated
   * here: pure work, done before the engine asks for the call rather than after (tools with `prepareArguments` are
   * left to `prepareToolCall`).
   */
  #sealed(id, toolCall) {
    const call = this.#call(id);
    call.toolCall = toolCall;
    call.early = this.#startsEarly(toolCall?.name);
    const tool = this.tool(toolCall?.name);
    if (!tool || tool.prepareArguments || !call.early) return;
    try {
      call.keepValidated({ arguments: toolCall.arguments, args: validateToolArguments(tool, toolCall) });
    } catch (error) {
      call.keepValidated({ arguments: toolCall.arguments, error });
    }
  }

  /**
   * The engine asks for a call: it is durable, and may start. Resolves to the call's result for the store. An early
   * call (one sealed by its own `toolcall_end`) starts now, whenever the engine asks; pi's batch runs the other calls
   * of the final message, and a call it does not hold is answered at once.
   */
  onCall(letter, bridge) {
    const call = this.#call(letter.callId);
    const answer = call.ask(bridge);
    const toolCall = (call.toolCall ??= {
      type: "toolCall",
      id: letter.callId,
      name: letter.tool,
      arguments: letter.arguments,
    });
    if (!call.early && this.#ending?.orphans.has(call.id)) {
      call.end(errorResult(NOT_IN_FINAL_MESSAGE));
    } else if (this.#closed) {
      call.end(errorResult(LOOP_ENDED));
    } else if (call.early && !call.pipeline) {
      // The hooks see the message as far as it has streamed: the call is sealed, the response is not over.
      const assistantMessage = this.partial ? { ...this.partial, content: [...this.partial.content] } : undefined;
      call.pipeline = runEarlyToolCall(this, call, assistantMessage);
      // It may fail (a listener threw) while the response still streams: the batch or `finished` awaits it later
      // and fails the loop with it; until then it is not an unhandled rejection.
      call.pipeline.catch(() => {});
    }
    return answer;
  }

  /** The stream has ended: `ending` says which calls the final message holds (none when it had none to give). */
  ended(ending) {
    this.#ending = ending ?? { callAt: () => undefined, orphans: new Set(), late: new Set() };
  }

  /** The records of the final message's calls, in its order, each holding pi's call unless it is early. */
  callsOf(message) {
    const calls = [];
    for (const [index, block] of message.content.entries()) {
      if (block?.type !== "toolCall") continue;
      const call = this.#call(this.#ending?.callAt(index) ?? block.id);
      if (!call.early) call.toolCall = block;
      calls.push(call);
    }
    return calls;
  }

  /** The result of a call the engine settled without asking: the one it stored, or why there is none. */
  settledWithout(call) {
    const stored = call.stored;
    if (stored) return { result: { content: stored.content ?? [], details: {} }, isError: stored.is_error !== false };
    const why = this.failure ? this.failure.message : "the engine ended the response without running it";
    return { result: createErrorToolResult(`Tool call was not executed: ${why}`), isError: true };
  }

  /**
   * Reads the engine's events to their end, keeping the results it stored without asking. Never rejects: it runs
   * unawaited until the turn settles, and a rejection nobody awaits would end the process.
   */
  async #drain() {
    while (true) {
      let batch;
      try {
        batch = JSON.parse(await this.response.nextBatch(true));
      } catch (error) {
        // The turn fails with it (`stream`, `settle`): nothing of this response can be stored.
        this.failure ??= error instanceof Error ? error : new Error(String(error));
        batch = [null];
      }
      for (const event of batch) {
        if (event?.type === "turn_end" && event.outcome?.store_failure) {
          this.failure ??= new Error(`the transcript could not be stored: ${event.outcome.store_failure}`);
        }
        // The run's end (`null`): nothing more will be stored, and a call still waiting for the letter waits no longer.
        if (this.#calls.take(event)) return;
      }
    }
  }

  /**
   * Ends the turn. A loop that failed (`failed`: a listener or a hook of the loop threw) may leave calls the engine
   * is still waiting for: they get an error result now, and the response is cancelled, so no engine task waits on a
   * loop that is gone. A turn that completed is left to store its results.
   */
  close(failed) {
    this.#closed = true;
    for (const call of this.#calls.values()) {
      call.end(errorResult(LOOP_ENDED));
    }
    if (failed) this.response.cancel();
    if (this.session.turn === this) this.session.turn = undefined;
  }

  /**
   * Waits until every call that started early has its result (in memory: the engine may still be storing it), and
   * every orphan was answered; rejects with the first failure of their pipelines (a listener or a hook of the loop
   * threw).
   */
  async finished() {
    const pipelines = [...this.#calls.values()].flatMap((call) => (call.pipeline ? [call.pipeline] : []));
    // A call the final message dropped is answered when the engine asks (at the response's end): the turn is over
    // once it has been, so that no ask of this response reaches the next.
    const orphans = [...(this.#ending?.orphans ?? [])].map((id) => this.#call(id).asked());
    const outcomes = await Promise.allSettled([...pipelines, ...orphans]);
    const failed = outcomes.find((outcome) => outcome.status === "rejected");
    if (failed) throw failed.reason;
  }

  /**
   * Resolves once the engine's run has ended, and the previous turn's: what they could store is stored. Never
   * rejects, and waits for nothing of JavaScript's (a failed loop's calls were answered by `close`).
   */
  async stored() {
    await this.#drained;
    await this.#previous?.stored();
  }

  /**
   * Waits until the engine's run is over (every admitted call has its stored result), and the previous turn's;
   * rejects with the first failure of either.
   */
  async settle() {
    await this.finished();
    await this.#drained;
    if (this.failure) throw this.failure;
    if (this.#previous) {
      await this.#previous.settle();
      // Settled: nothing of it is needed any more.
      this.#previous = undefined;
    }
  }
}

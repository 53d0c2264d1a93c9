// One turn of the drop-in: a response wrapped by the engine, and its calls. The pi events of the user's stream go
// into the engine as they arrive; the engine asks for each call once its owner is durable (an early one at its
// seal), and the call then runs through pi's steps. After the response, the batch runs as pi runs it, with the
// early calls already under way.

import { DEFAULT_AGENT_IDENTITY } from "@earendil-works/pi-agent-core";
import { mergeClientIdentity, normalizeContext, validateToolArguments } from "@earendil-works/pi-ai";

import { messageOf } from "../bridge.js";
import { PiFeed } from "../feed.js";
import { active, engineResult, errorToolResult, isEarly } from "./durable.js";
import {
  createErrorToolResult,
  executePrepared,
  finalizeExecuted,
  prepareCall,
  shouldTerminate,
  toolResultMessage,
} from "./steps.js";

/** One response of a loop, and its calls. */
export class Turn {
  /** Each call's answer to the engine, by call id: resolved with the call's result once it is final. */
  #answers = new Map();
  /** The engine's letter for each call, by call id: it may start. */
  #asked = new Map();
  /** Each asked call's line back to the engine (`answer`, `onUpdate`, `signal`), by call id. */
  #bridges = new Map();
  /** Early calls' arguments as validated at their seal, off the path to their start, by call id (`validated`). */
  #validated = new Map();
  /** Early calls' pipelines, by call id. */
  #early = new Map();
  /** The results the engine stored by itself (calls it settled without asking), by call id. */
  #stored = new Map();
  #toolCalls = new Map();
  #partial = null;
  #drained;
  /**
   * Why the engine's side of the response failed: it could not open (an unknown session, a broken store), or a
   * write of its run failed; or the previous turn's did.
   */
  #failure = null;
  /** The session's previous turn, whose run may still be storing its results while this one streams. */
  #previous;

  constructor(session, response, context, config, signal, emit, previous) {
    this.session = session;
    this.response = response;
    this.context = context;
    this.config = config;
    this.signal = signal;
    this.emit = emit;
    this.#previous = previous;
    this.#drained = this.#drain();
    // The previous run's failure stops this response too (its stream is not read on, `stream`). Settled, the
    // previous turn is let go, so that a long loop does not hold every turn it ran.
    previous?.settle().then(
      () => {
        if (this.#previous === previous) this.#previous = undefined;
      },
      (error) => {
        this.#failure ??= error;
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
    const response = engine.open(
      session.id,
      "headstart",
      null,
      null,
      session.takeUsers(),
      session.takeCreation(),
      previous?.response ?? null,
    );
    const turn = new Turn(session, response, context, config, signal, emit, previous);
    active.set(session.id, turn);
    return turn;
  }

  /**
   * Ends the turn. A loop that failed (`failed`: a listener or a hook of the loop threw) may leave calls the engine
   * is still waiting for: they get an error result now, and the response is cancelled, so no engine task waits on a
   * loop that is gone. A turn that completed is left to store its results.
   */
  close(failed) {
    for (const answer of this.#answers.values()) {
      answer.resolve(errorToolResult("the agent loop ended before the call finished", true));
    }
    if (failed) this.response.cancel();
    if (active.get(this.session.id) === this) active.delete(this.session.id);
  }

  #slot(map, callId) {
    let slot = map.get(callId);
    if (!slot) {
      slot = deferred();
      map.set(callId, slot);
    }
    return slot;
  }

  /** The engine asks for a call: it is durable, and may start. Resolves to the call's result for the store. */
  onCall(letter, bridge) {
    this.#bridges.set(letter.callId, bridge);
    this.#slot(this.#asked, letter.callId).resolve({ letter, bridge });
    if (this.#startsEarly(letter.tool) && !this.#early.has(letter.callId)) {
      const pipeline = this.#runEarly(letter);
      // It may fail (a listener threw) while the response still streams: the batch (`execute`) or `finished`
      // awaits it later and fails the loop with it; until then it is not an unhandled rejection.
      pipeline.catch(() => {});
      this.#early.set(letter.callId, pipeline);
    }
    return this.#slot(this.#answers, letter.callId).promise;
  }

  /** Validates the arguments of an early call just sealed (tools with `prepareArguments` are left to `prepareCall`). */
  #validate(toolCall) {
    const tool = this.tool(toolCall?.name);
    if (!tool || tool.prepareArguments || !this.#startsEarly(toolCall.name)) return;
    try {
      this.#validated.set(toolCall.id, { arguments: toolCall.arguments, args: validateToolArguments(tool, toolCall) });
    } catch (error) {
      this.#validated.set(toolCall.id, { arguments: toolCall.arguments, error });
    }
  }

  /**
   * The arguments of `toolCall` as validated at its seal (`{ args }` or `{ error }`), taken once; `undefined` when
   * they were not, or were other arguments.
   */
  validated(toolCall) {
    const entry = this.#validated.get(toolCall.id);
    if (!entry || entry.arguments !== toolCall.arguments) return undefined;
    this.#validated.delete(toolCall.id);
    return entry;
  }

  /** The loop's tool named `name`. */
  tool(name) {
    return (this.context.tools ?? []).find((tool) => tool.name === name);
  }

  /** Whether calls of tool `name` run as the engine asks for them, at their seal, rather than in pi's batch. */
  #startsEarly(name) {
    return this.session.earlyExecution && isEarly(this.tool(name));
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
        this.#failure ??= error instanceof Error ? error : new Error(String(error));
        batch = [null];
      }
      for (const event of batch) {
        if (event === null) {
          // The run has ended: nothing more will be stored, and a call still waiting for the engine's letter waits
          // no longer.
          for (const asked of this.#asked.values()) asked.resolve(null);
          return;
        }
        if (event.type === "turn_end" && event.outcome?.store_failure) {
          this.#failure ??= new Error(`the transcript could not be stored: ${event.outcome.store_failure}`);
        }
        if (event.type === "message_end" && event.message?.role === "tool_result") {
          const id = event.message.tool_call_id;
          this.#stored.set(id, event.message);
          // A call the engine settled without asking (a limit refused it) is waited for no longer. One it asked for
          // was resolved with its letter before its result could be stored, and stays so.
          this.#slot(this.#asked, id).resolve(null);
        }
      }
    }
  }

  /** Streams the response (pi's `streamAssistantResponse`), feeding each event to the engine. */
  async stream(streamFn) {
    const { context, config, signal, emit } = this;
    let messages = context.messages;
    if (config.transformContext) messages = await config.transformContext(messages, signal);
    const llmMessages = await config.convertToLlm(messages);
    const llmContext = normalizeContext({ messages: llmMessages });
    const apiKey = (config.getApiKey ? await config.getApiKey(config.model.provider) : undefined) || config.apiKey;
    const feed = new PiFeed(this.response);
    try {
      const response = await streamFn(config.model, llmContext, {
        ...config,
        apiKey,
        identity: mergeClientIdentity(DEFAULT_AGENT_IDENTITY, config.identity),
        signal,
      });
      const result = async () => Object.assign(await response.result(), { thinkingLevel: config.reasoning ?? "off" });
      let added = false;
      for await (const event of response) {
        // The engine could not open the response: stop reading the model, whose answer could not be stored.
        if (this.#failure) throw this.#failure;
        switch (event.type) {
          case "start":
            feed.add(event);
            this.#partial = event.partial;
            context.messages.push(this.#partial);
            added = true;
            await emit({ type: "message_start", message: { ...this.#partial } });
            break;
          case "text_delta":
          case "thinking_delta":
          case "toolcall_delta":
            // One per token: the feed's own path for them.
            if (typeof event.delta === "string") feed.token(event.type, event.contentIndex, event.delta);
            else feed.add(event);
            if (this.#partial) await this.#update(event);
            break;
          case "text_start":
          case "text_end":
          case "thinking_start":
          case "thinking_end":
          case "toolcall_start":
          case "toolcall_end":
            if (event.type === "toolcall_end") this.#toolCalls.set(event.toolCall.id, event.toolCall);
            feed.add(event);
            // While the engine commits the call, its arguments are validated here: pure work, done before the
            // engine asks for the call rather than after.
            if (event.type === "toolcall_end") this.#validate(event.toolCall);
            if (this.#partial) await this.#update(event);
            break;
          case "done":
          case "error":
            feed.add(event);
            return await this.#finish(await result(), added);
        }
      }
      feed.fail("the stream ended without done or error");
      return await this.#finish(await result(), added);
    } catch (error) {
      feed.fail(messageOf(error));
      throw error;
    } finally {
      feed.fail("the stream failed");
    }
  }

  /** pi's `message_update` for `event`, with the partial message it carries; what `emit` returns. */
  #update(event) {
    this.#partial = event.partial;
    this.context.messages[this.context.messages.length - 1] = this.#partial;
    return this.emit({ type: "message_update", assistantMessageEvent: event, message: { ...this.#partial } });
  }

  async #finish(message, added) {
    const { context, emit } = this;
    if (added) {
      context.messages[context.messages.length - 1] = message;
    } else {
      context.messages.push(message);
      await emit({ type: "message_start", message: { ...message } });
    }
    await emit({ type: "message_end", message });
    return message;
  }

  /**
   * Waits until every call that started early has its result (in memory: the engine may still be storing it);
   * rejects with the first failure of their pipelines (a listener or a hook of the loop threw).
   */
  async finished() {
    const outcomes = await Promise.allSettled(this.#early.values());
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
    if (this.#failure) throw this.#failure;
    if (this.#previous) {
      await this.#previous.settle();
      // Settled: nothing of it is needed any more.
      this.#previous = undefined;
    }
  }

  /** An early call, started as the engine asked: the whole pipeline, its events as they happen. */
  async #runEarly(letter) {
    const toolCall = this.#toolCalls.get(letter.callId) ?? {
      type: "toolCall",
      id: letter.callId,
      name: letter.tool,
      arguments: letter.arguments,
    };
    // The hooks see the message as far as it has streamed: the call is sealed, the response is not over.
    const assistantMessage = this.#partial ? { ...this.#partial, content: [...this.#partial.content] } : undefined;
    await this.#emitStart(toolCall);
    const preparation = await prepareCall(this, assistantMessage, toolCall);
    const finalized =
      preparation.kind === "immediate"
        ? { toolCall, result: preparation.result, isError: preparation.isError }
        : await this.#run(assistantMessage, preparation);
    await this.#emitEnd(finalized);
    return finalized;
  }

  async #emitStart(toolCall) {
    await this.emit({ type: "tool_execution_start", toolCallId: toolCall.id, toolName: toolCall.name, args: toolCall.arguments });
  }

  async #emitEnd(finalized) {
    const result = engineResult(finalized.result, finalized.isError);
    // The engine has the result at once (a sequential call after this one starts on it), before the listeners.
    this.#bridges.get(finalized.toolCall.id)?.answer?.(result);
    this.#slot(this.#answers, finalized.toolCall.id).resolve(result);
    await this.emit({
      type: "tool_execution_end",
      toolCallId: finalized.toolCall.id,
      toolName: finalized.toolCall.name,
      result: finalized.result,
      isError: finalized.isError,
      ...(finalized.durationMs === undefined ? {} : { durationMs: finalized.durationMs }),
    });
  }

  /** Runs a prepared call once the engine asks for it, then `afterToolCall`. */
  async #run(assistantMessage, prepared) {
    const { toolCall } = prepared;
    const asked = await this.#slot(this.#asked, toolCall.id).promise;
    if (!asked) {
      // The engine settled the call by itself (a limit refused it): its stored result is the call's.
      const stored = this.#stored.get(toolCall.id);
      return {
        toolCall,
        result: { content: stored?.content ?? [], details: {} },
        isError: stored?.is_error !== false,
      };
    }
    const executed = await executePrepared(this, prepared, asked.bridge);
    return finalizeExecuted(this, assistantMessage, prepared, executed);
  }

  /** pi's batch (`executeToolCalls`), where a call that started early is already under way. */
  async execute(assistantMessage, toolCalls) {
    const sequential =
      this.config.toolExecution === "sequential" ||
      toolCalls.some((call) => this.tool(call.name)?.executionMode === "sequential");
    return sequential
      ? this.#executeSequential(assistantMessage, toolCalls)
      : this.#executeParallel(assistantMessage, toolCalls);
  }

  #earlyRun(toolCall) {
    return this.#startsEarly(toolCall.name) ? this.#awaitEarly(toolCall) : undefined;
  }

  /** An early call's finalized outcome: its pipeline, once the engine has asked for it. */
  async #awaitEarly(toolCall) {
    const asked = await this.#slot(this.#asked, toolCall.id).promise;
    if (asked) return this.#early.get(toolCall.id);
    await this.#emitStart(toolCall);
    const finalized = await this.#run(undefined, { toolCall });
    await this.#emitEnd(finalized);
    return finalized;
  }

  async #executeSequential(assistantMessage, toolCalls) {
    const finalizedCalls = [];
    const messages = [];
    for (const toolCall of toolCalls) {
      let finalized = await this.#earlyRun(toolCall);
      if (!finalized) {
        await this.#emitStart(toolCall);
        const preparation = await prepareCall(this, assistantMessage, toolCall);
        finalized =
          preparation.kind === "immediate"
            ? { toolCall, result: preparation.result, isError: preparation.isError }
            : await this.#run(assistantMessage, preparation);
        await this.#emitEnd(finalized);
      }
      const message = toolResultMessage(finalized);
      await this.#emitMessage(message);
      finalizedCalls.push(finalized);
      messages.push(message);
    }
    return { messages, terminate: shouldTerminate(finalizedCalls) };
  }

  async #executeParallel(assistantMessage, toolCalls) {
    const entries = [];
    for (const toolCall of toolCalls) {
      const early = this.#earlyRun(toolCall);
      if (early) {
        entries.push(() => early);
        continue;
      }
      await this.#emitStart(toolCall);
      const preparation = await prepareCall(this, assistantMessage, toolCall);
      if (preparation.kind === "immediate") {
        const finalized = { toolCall, result: preparation.result, isError: preparation.isError };
        await this.#emitEnd(finalized);
        entries.push(finalized);
        continue;
      }
      entries.push(async () => {
        if (this.signal?.aborted) {
          const finalized = { toolCall, result: createErrorToolResult("Operation aborted"), isError: true };
          await this.#emitEnd(finalized);
          return finalized;
        }
        const finalized = await this.#run(assistantMessage, preparation);
        await this.#emitEnd(finalized);
        return finalized;
      });
    }
    const ordered = await Promise.all(entries.map((entry) => (typeof entry === "function" ? entry() : entry)));
    const messages = [];
    for (const finalized of ordered) {
      const message = toolResultMessage(finalized);
      await this.#emitMessage(message);
      messages.push(message);
    }
    return { messages, terminate: shouldTerminate(ordered) };
  }

  /** pi's answer to a length-truncated message: no call runs; an early one that already ran keeps its result. */
  async failTruncated(toolCalls) {
    const messages = [];
    for (const toolCall of toolCalls) {
      let finalized = await this.#earlyRun(toolCall);
      if (!finalized) {
        await this.#emitStart(toolCall);
        finalized = {
          toolCall,
          result: createErrorToolResult(
            `Tool call "${toolCall.name}" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.`,
          ),
          isError: true,
        };
        await this.#emitEnd(finalized);
      }
      const message = toolResultMessage(finalized);
      await this.#emitMessage(message);
      messages.push(message);
    }
    return { messages, terminate: false };
  }

  async #emitMessage(message) {
    await this.emit({ type: "message_start", message });
    await this.emit({ type: "message_end", message });
  }
}

function deferred() {
  let resolve;
  const promise = new Promise((done) => (resolve = done));
  return { promise, resolve };
}

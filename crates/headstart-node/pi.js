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

import { Agent as PiAgent, DEFAULT_AGENT_IDENTITY, setDefaultStreamFn as setPiDefaultStreamFn } from "@earendil-works/pi-agent-core";
import {
  EventStream,
  getCurrentTools,
  getToolStateChanges,
  mergeClientIdentity,
  normalizeContext,
  toToolDeclaration,
  validateToolArguments,
} from "@earendil-works/pi-ai";

import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { native } from "./lib/native.js";
import { createDispatcher, messageOf } from "./lib/bridge.js";
import { openStore, toResult } from "./lib/engine.js";
import { piToDelta } from "./lib/feed.js";

export * from "@earendil-works/pi-agent-core";

let defaultStreamFn;

/** Sets the stream function loops use when none is given (pi's own default is set too). */
export function setDefaultStreamFn(streamFn) {
  defaultStreamFn = streamFn;
  setPiDefaultStreamFn(streamFn);
}

function streamFnOr(streamFn) {
  const chosen = streamFn ?? defaultStreamFn;
  if (!chosen) {
    throw new Error("No default stream function configured. Pass streamFn explicitly or call setDefaultStreamFn().");
  }
  return chosen;
}

// ---------------------------------------------------------------------------------------------------------------
// The durable side: a store, an engine per tool set, a session.

/**
 * The store of loops given none: one SQLite file for the process, in memory where the machine has a memory file
 * system (`/dev/shm`), removed when the process exits. (SQLite's own `:memory:` cannot hold the store: it needs a
 * write-ahead log.)
 */
let ephemeral;
function ephemeralStore() {
  if (!ephemeral) {
    const folder = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
    ephemeral = join(folder, `headstart-${process.pid}-${randomUUID()}.db`);
    process.once("exit", () => {
      for (const suffix of ["", "-wal", "-shm"]) rmSync(ephemeral + suffix, { force: true });
    });
  }
  return ephemeral;
}

/** Whether a pi tool starts early. */
function isEarly(tool) {
  return tool?.executionMode === "early" || tool?.early === true;
}

/** The engine's spec of a pi tool: scheduling only (pi validates the arguments itself, with its own schema). */
function specOfPiTool(tool) {
  return {
    name: tool.name,
    description: tool.description ?? "",
    parameters: { type: "object" },
    early: isEarly(tool),
    sequential: tool.executionMode === "sequential",
    idempotent: tool.replay === "safe",
  };
}

/** Loops in progress, by session: where the engine's letters for a session's calls go. */
const active = new Map();
/** Engines by store and tool set. */
const engines = new Map();

async function engineFor(storeLocation, durability, tools, toolExecution, earlyExecution) {
  const specs = tools.map(specOfPiTool);
  const options = { toolExecution: toolExecution === "sequential" ? "sequential" : "parallel", earlyExecution };
  const key = JSON.stringify([storeLocation, durability, specs, options]);
  let engine = engines.get(key);
  if (!engine) {
    engine = openStore(storeLocation, { durability }).then((store) => {
      let built;
      const dispatch = createDispatcher(() => built, {
        call: (letter, context) => {
          const loop = active.get(letter.sessionId);
          if (loop) return loop.onCall(letter, context);
          // No loop of this process holds the session: a recovery running an idempotent call again.
          return recoveryCall(tools, letter, context);
        },
      });
      built = new native.NativeEngine(store, JSON.stringify(specs), JSON.stringify(options), dispatch);
      return { engine: built, store };
    });
    engines.set(key, engine);
    engine.catch(() => engines.delete(key));
  }
  return engine;
}

async function recoveryCall(tools, letter, { signal, onUpdate }) {
  const tool = tools.find((candidate) => candidate.name === letter.tool);
  if (!tool) return errorToolResult(`Tool ${letter.tool} not found`, true);
  try {
    return engineResult(toResult(await tool.execute(letter.callId, letter.arguments, signal, onUpdate)), false);
  } catch (error) {
    return errorToolResult(messageOf(error), true);
  }
}

/** The text of a pi message's content: a string, or its text blocks joined. */
function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((block) => block?.type === "text")
    .map((block) => block.text)
    .join("\n");
}

/** A session of a loop: where its transcript goes. */
class Session {
  constructor(config) {
    this.location = config.store ?? ephemeralStore();
    this.durability = config.durability ?? (config.store ? "full" : "normal");
    this.id = config.storeSessionId;
    this.onSession = config.onStoreSession;
    this.earlyExecution = config.earlyExecution !== false;
  }

  async engine(context, config) {
    const { engine } = await engineFor(
      this.location,
      this.durability,
      context.tools ?? [],
      config.toolExecution,
      this.earlyExecution,
    );
    if (!this.id) {
      this.id = await engine.createSession();
      this.onSession?.(this.id);
    }
    return engine;
  }

  /** Writes the user messages among `messages` (their text) to the transcript. */
  async record(messages, context, config) {
    const users = messages.filter((message) => message?.role === "user");
    if (users.length === 0) return;
    const engine = await this.engine(context, config);
    for (const message of users) await engine.appendUser(this.id, textOf(message.content));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// pi's loop.

/** Starts a loop with new prompt messages (pi-agent-core's `agentLoop`). */
export function agentLoop(prompts, context, config, signal, streamFn) {
  const stream = createAgentStream();
  void runAgentLoop(prompts, context, config, async (event) => stream.push(event), signal, streamFn).then(
    (messages) => stream.end(messages),
    (error) => failStream(stream, config, error, signal),
  );
  return stream;
}

/** Continues a loop from its context (pi-agent-core's `agentLoopContinue`). */
export function agentLoopContinue(context, config, signal, streamFn) {
  checkContinuable(context);
  const stream = createAgentStream();
  void runAgentLoopContinue(context, config, async (event) => stream.push(event), signal, streamFn).then(
    (messages) => stream.end(messages),
    (error) => failStream(stream, config, error, signal),
  );
  return stream;
}

function checkContinuable(context) {
  if (context.messages.length === 0) throw new Error("Cannot continue: no messages in context");
  if (context.messages[context.messages.length - 1].role === "assistant") {
    throw new Error("Cannot continue from message role: assistant");
  }
}

function createAgentStream() {
  return new EventStream(
    (event) => event.type === "agent_end",
    (event) => (event.type === "agent_end" ? event.messages : []),
  );
}

/** A loop that threw (its store failed, a hook of the loop threw) ends its stream as pi's Agent ends a failed run. */
function failStream(stream, config, error, signal) {
  const failure = failureMessage(config?.model, error, signal?.aborted === true);
  stream.push({ type: "message_start", message: failure });
  stream.push({ type: "message_end", message: failure });
  stream.push({ type: "turn_end", message: failure, toolResults: [] });
  stream.push({ type: "agent_end", messages: [failure] });
  stream.end([failure]);
}

function failureMessage(model, error, aborted) {
  return {
    role: "assistant",
    content: [{ type: "text", text: "" }],
    api: model?.api ?? "unknown",
    provider: model?.provider ?? "unknown",
    model: model?.id ?? "unknown",
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: aborted ? "aborted" : "error",
    errorMessage: messageOf(error),
    timestamp: Date.now(),
  };
}

/** pi-agent-core's `runAgentLoop`: the loop with new prompts, events to `emit`; resolves to the new messages. */
export async function runAgentLoop(prompts, context, config, emit, signal, streamFn) {
  const session = new Session(config);
  const initial = declareToolChanges(context, prompts);
  const newMessages = [...initial];
  const current = { ...context, messages: [...context.messages, ...initial] };
  await session.record(initial, current, config);
  await emit({ type: "agent_start" });
  await emit({ type: "turn_start" });
  for (const message of initial) {
    await emit({ type: "message_start", message });
    await emit({ type: "message_end", message });
  }
  await runLoop(session, current, newMessages, config, signal, emit, streamFnOr(streamFn));
  return newMessages;
}

/** pi-agent-core's `runAgentLoopContinue`: the loop from its context, events to `emit`. */
export async function runAgentLoopContinue(context, config, emit, signal, streamFn) {
  checkContinuable(context);
  const session = new Session(config);
  const newMessages = [];
  const current = { ...context };
  await emit({ type: "agent_start" });
  await emit({ type: "turn_start" });
  await runLoop(session, current, newMessages, config, signal, emit, streamFnOr(streamFn));
  return newMessages;
}

/** Applies a turn update (`prepareNextTurn`, `prepareRequest`) to the loop's config. */
function withTurnUpdate(config, update) {
  const reasoning =
    update.thinkingLevel === undefined ? config.reasoning : update.thinkingLevel === "off" ? undefined : update.thinkingLevel;
  return { ...config, model: update.model ?? config.model, reasoning };
}

async function runLoop(session, initialContext, newMessages, initialConfig, signal, emit, streamFn) {
  let context = initialContext;
  let config = initialConfig;
  let lastTurn;
  let explicitContinuation = false;
  let pending = (await config.getSteeringMessages?.()) || [];
  while (true) {
    let moreToolCalls = true;
    while (moreToolCalls || pending.length > 0) {
      let prepared = [];
      if (lastTurn) {
        const update = await config.prepareNextTurn?.(lastTurn);
        if (update) {
          context = update.context ?? context;
          prepared = update.messages ?? [];
          config = withTurnUpdate(config, update);
        }
        // Steering queued while the preparation ran, unless this turn already has some.
        if (pending.length === 0) pending = (await config.getSteeringMessages?.()) || [];
        await emit({ type: "turn_start" });
      }
      const queued = declareToolChanges(context, [...prepared, ...pending]);
      await session.record(queued, context, config);
      for (const message of queued) {
        await emit({ type: "message_start", message });
        await emit({ type: "message_end", message });
        context.messages.push(message);
        newMessages.push(message);
      }
      pending = [];
      const requestUpdate = await config.prepareRequest?.(
        { context, model: config.model, thinkingLevel: config.reasoning ?? "off" },
        signal,
      );
      if (requestUpdate) {
        context = requestUpdate.context ?? context;
        config = withTurnUpdate(config, requestUpdate);
      }

      const turn = await Turn.open(session, context, config, signal, emit);
      let message;
      try {
        message = await turn.stream(streamFn);
        newMessages.push(message);
        if (message.stopReason === "error" || message.stopReason === "aborted") {
          await turn.settle();
          lastTurn = { message, toolResults: [], context, newMessages };
          await config.finishTurn?.(lastTurn, signal);
          await emit({ type: "turn_end", message, toolResults: [] });
          await emit({ type: "agent_end", messages: newMessages });
          return;
        }
        const toolCalls = message.content.filter((block) => block.type === "toolCall");
        const toolResults = [];
        moreToolCalls = false;
        if (toolCalls.length > 0) {
          const batch =
            message.stopReason === "length" ? await turn.failTruncated(toolCalls) : await turn.execute(message, toolCalls);
          toolResults.push(...batch.messages);
          moreToolCalls = !batch.terminate;
          for (const result of toolResults) {
            context.messages.push(result);
            newMessages.push(result);
          }
        }
        await turn.settle();
        lastTurn = { message, toolResults, context, newMessages };
        const decision = await config.finishTurn?.(lastTurn, signal);
        await emit({ type: "turn_end", message, toolResults });
        if (decision?.action === "end") {
          await emit({ type: "agent_end", messages: newMessages });
          return;
        }
        explicitContinuation = decision?.action === "continue";
      } finally {
        turn.close();
      }
      pending = (await config.getSteeringMessages?.()) || [];
      if (moreToolCalls || pending.length > 0) explicitContinuation = false;
    }
    const followUps = (await config.getFollowUpMessages?.()) || [];
    if (followUps.length > 0) {
      explicitContinuation = false;
      pending = followUps;
      continue;
    }
    if (explicitContinuation) {
      explicitContinuation = false;
      continue;
    }
    break;
  }
  await emit({ type: "agent_end", messages: newMessages });
}

/**
 * The tool loadout the model may call, declared on a system message whenever it changes (pi 1.6's rule): a pending
 * system message gets the difference between the transcript's tools and `context.tools`; otherwise a new system
 * message is put before the first pending message that is not one.
 */
function declareToolChanges(context, pendingMessages) {
  const systemIndex = pendingMessages.findLastIndex((message) => message.role === "system");
  const pending = systemIndex >= 0 ? pendingMessages[systemIndex] : undefined;
  const baseline = pending
    ? pendingMessages.map((message, index) => (index === systemIndex ? withToolChanges(pending, [], []) : message))
    : pendingMessages;
  const { toolsAdded, toolsRemoved } = getToolStateChanges(
    getCurrentTools([...context.messages, ...baseline]),
    (context.tools ?? []).map(toToolDeclaration),
  );
  const unchanged = toolsAdded.length === 0 && toolsRemoved.length === 0;
  if (pending) {
    if (unchanged && !pending.toolsAdded?.length && !pending.toolsRemoved?.length) return pendingMessages;
    return baseline.map((message, index) =>
      index === systemIndex ? withToolChanges(pending, toolsAdded, toolsRemoved) : message,
    );
  }
  if (unchanged) return pendingMessages;
  const update = withToolChanges({ role: "system", content: "", timestamp: Date.now() }, toolsAdded, toolsRemoved);
  const first = pendingMessages.findIndex((message) => message.role !== "system");
  const at = first === -1 ? pendingMessages.length : first;
  return [...pendingMessages.slice(0, at), update, ...pendingMessages.slice(at)];
}

function withToolChanges(message, toolsAdded, toolsRemoved) {
  const { toolsAdded: _added, toolsRemoved: _removed, ...rest } = message;
  return {
    ...rest,
    ...(toolsAdded.length > 0 ? { toolsAdded } : {}),
    ...(toolsRemoved.length > 0 ? { toolsRemoved } : {}),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// One turn: a response wrapped by the engine, and its calls.

function deferred() {
  let resolve;
  const promise = new Promise((done) => (resolve = done));
  return { promise, resolve };
}

/** A tool result as the engine stores it. */
function engineResult(result, isError) {
  return { content: result.content ?? [], details: result.details ?? null, isError, terminate: result.terminate === true };
}

function errorToolResult(message, isError) {
  return { content: [{ type: "text", text: message }], details: {}, isError, terminate: false };
}

function createErrorToolResult(message) {
  return { content: [{ type: "text", text: message }], details: {} };
}

class Turn {
  /** Each call's answer to the engine, by call id: resolved with the call's result once it is final. */
  #answers = new Map();
  /** The engine's letter for each call, by call id: it may start. */
  #asked = new Map();
  /** Early calls' pipelines, by call id. */
  #early = new Map();
  /** The results the engine stored by itself (calls it settled without asking), by call id. */
  #stored = new Map();
  #toolCalls = new Map();
  #partial = null;
  #drained;

  constructor(session, engine, response, context, config, signal, emit) {
    this.session = session;
    this.engine = engine;
    this.response = response;
    this.context = context;
    this.config = config;
    this.signal = signal;
    this.emit = emit;
    this.#drained = this.#drain();
  }

  static async open(session, context, config, signal, emit) {
    const engine = await session.engine(context, config);
    const response = await engine.open(session.id, "headstart", null, null);
    const turn = new Turn(session, engine, response, context, config, signal, emit);
    active.set(session.id, turn);
    return turn;
  }

  close() {
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
    this.#slot(this.#asked, letter.callId).resolve({ letter, bridge });
    if (this.#startsEarly(letter.tool) && !this.#early.has(letter.callId)) {
      this.#early.set(letter.callId, this.#runEarly(letter));
    }
    return this.#slot(this.#answers, letter.callId).promise;
  }

  #tool(name) {
    return (this.context.tools ?? []).find((tool) => tool.name === name);
  }

  /** Whether calls of tool `name` run as the engine asks for them, at their seal, rather than in pi's batch. */
  #startsEarly(name) {
    return this.session.earlyExecution && isEarly(this.#tool(name));
  }

  /** Reads the engine's events to their end, keeping the results it stored without asking. */
  async #drain() {
    while (true) {
      const batch = JSON.parse(await this.response.nextBatch());
      if (batch.length === 0) return;
      for (const event of batch) {
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
    let fed = false;
    const feed = (event) => {
      try {
        const delta = piToDelta(event);
        if (delta) this.response.push(JSON.stringify(delta));
        if (delta?.type === "done" || delta?.type === "error") {
          fed = true;
          this.response.end();
        }
      } catch (error) {
        fed = true;
        this.response.fail(messageOf(error));
      }
    };
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
        switch (event.type) {
          case "start":
            feed(event);
            this.#partial = event.partial;
            context.messages.push(this.#partial);
            added = true;
            await emit({ type: "message_start", message: { ...this.#partial } });
            break;
          case "text_start":
          case "text_delta":
          case "text_end":
          case "thinking_start":
          case "thinking_delta":
          case "thinking_end":
          case "toolcall_start":
          case "toolcall_delta":
          case "toolcall_end":
            if (event.type === "toolcall_end") this.#toolCalls.set(event.toolCall.id, event.toolCall);
            feed(event);
            if (this.#partial) {
              this.#partial = event.partial;
              context.messages[context.messages.length - 1] = this.#partial;
              await emit({ type: "message_update", assistantMessageEvent: event, message: { ...this.#partial } });
            }
            break;
          case "done":
          case "error":
            feed(event);
            return await this.#finish(await result(), added);
        }
      }
      if (!fed) {
        this.response.fail("the stream ended without done or error");
        fed = true;
      }
      return await this.#finish(await result(), added);
    } finally {
      if (!fed) this.response.fail("the stream failed");
    }
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
    this.message = message;
    return message;
  }

  /** Waits until the engine's run is over: every admitted call has its stored result. */
  async settle() {
    await Promise.allSettled(this.#early.values());
    await this.#drained;
    await this.response.settled();
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
    const preparation = await this.#prepare(assistantMessage, toolCall);
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
    this.#slot(this.#answers, finalized.toolCall.id).resolve(engineResult(finalized.result, finalized.isError));
    await this.emit({
      type: "tool_execution_end",
      toolCallId: finalized.toolCall.id,
      toolName: finalized.toolCall.name,
      result: finalized.result,
      isError: finalized.isError,
      ...(finalized.durationMs === undefined ? {} : { durationMs: finalized.durationMs }),
    });
  }

  /** pi's preparation: abort, lookup, `prepareArguments`, validation, `beforeToolCall`. */
  async #prepare(assistantMessage, toolCall) {
    const { signal, config, context } = this;
    const immediate = (message, extra = {}) => ({
      kind: "immediate",
      result: { ...createErrorToolResult(message), ...extra },
      isError: true,
    });
    if (signal?.aborted) return immediate("Operation aborted");
    const tool = this.#tool(toolCall.name);
    if (!tool) return immediate(`Tool ${toolCall.name} not found`);
    try {
      let prepared = toolCall;
      if (tool.prepareArguments) {
        const args = tool.prepareArguments(toolCall.arguments);
        if (args !== toolCall.arguments) prepared = { ...toolCall, arguments: args };
      }
      const args = validateToolArguments(tool, prepared);
      if (config.beforeToolCall) {
        const before = await config.beforeToolCall({ assistantMessage, toolCall, args, context }, signal);
        if (signal?.aborted) return immediate("Operation aborted");
        if (before?.block) {
          return immediate(before.reason || "Tool execution was blocked", before.terminate === true ? { terminate: true } : {});
        }
      }
      return { kind: "prepared", toolCall, tool, args };
    } catch (error) {
      return immediate(messageOf(error));
    }
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
    const executed = await this.#execute(prepared, asked.bridge);
    return this.#finalize(assistantMessage, prepared, executed);
  }

  async #execute(prepared, bridge) {
    const updates = [];
    let accepting = true;
    const startedAt = performance.now();
    const elapsed = () => Math.round(performance.now() - startedAt);
    const onUpdate = (partialResult) => {
      if (!accepting) return;
      bridge?.onUpdate(toResult(partialResult));
      updates.push(
        Promise.resolve(
          this.emit({
            type: "tool_execution_update",
            toolCallId: prepared.toolCall.id,
            toolName: prepared.toolCall.name,
            args: prepared.toolCall.arguments,
            partialResult,
          }),
        ),
      );
    };
    try {
      // The loop's signal, and the engine's: a cancelled response aborts its calls.
      const signal = this.signal && bridge?.signal ? AbortSignal.any([this.signal, bridge.signal]) : (this.signal ?? bridge?.signal);
      const result = await prepared.tool.execute(prepared.toolCall.id, prepared.args, signal, onUpdate);
      const durationMs = elapsed();
      accepting = false;
      await Promise.all(updates);
      return { result, isError: result.isError === true, durationMs };
    } catch (error) {
      const durationMs = elapsed();
      accepting = false;
      await Promise.all(updates);
      return { result: createErrorToolResult(messageOf(error)), isError: true, durationMs };
    } finally {
      accepting = false;
    }
  }

  /** pi's `afterToolCall` step. */
  async #finalize(assistantMessage, prepared, executed) {
    const { config, signal, context } = this;
    let { result, isError } = executed;
    if (config.afterToolCall) {
      try {
        const after = await config.afterToolCall(
          { assistantMessage, toolCall: prepared.toolCall, args: prepared.args, result, isError, context },
          signal,
        );
        if (after) {
          // Structured content that was not replaced with the content may no longer match it.
          const structuredContent = after.structuredContent ?? (after.content ? undefined : result.structuredContent);
          result = {
            ...result,
            content: after.content ?? result.content,
            details: after.details ?? result.details,
            usage: after.usage ?? result.usage,
            terminate: after.terminate ?? result.terminate,
          };
          if (structuredContent === undefined) delete result.structuredContent;
          else result.structuredContent = structuredContent;
          isError = after.isError ?? isError;
        }
      } catch (error) {
        result = createErrorToolResult(messageOf(error));
        isError = true;
      }
    }
    return { toolCall: prepared.toolCall, result, isError, durationMs: executed.durationMs };
  }

  /** pi's batch (`executeToolCalls`), where a call that started early is already under way. */
  async execute(assistantMessage, toolCalls) {
    const sequential =
      this.config.toolExecution === "sequential" ||
      toolCalls.some((call) => this.#tool(call.name)?.executionMode === "sequential");
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
        const preparation = await this.#prepare(assistantMessage, toolCall);
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
      const preparation = await this.#prepare(assistantMessage, toolCall);
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

function shouldTerminate(finalizedCalls) {
  return finalizedCalls.length > 0 && finalizedCalls.every((finalized) => finalized.result.terminate === true);
}

function toolResultMessage(finalized) {
  return {
    role: "toolResult",
    toolCallId: finalized.toolCall.id,
    toolName: finalized.toolCall.name,
    content: finalized.result.content ?? [],
    details: finalized.result.details,
    usage: finalized.result.usage,
    isError: finalized.isError,
    ...(finalized.durationMs === undefined ? {} : { durationMs: finalized.durationMs }),
    timestamp: Date.now(),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The stateful Agent, and resuming after a crash.

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

/**
 * Resumes a session after a crash: every call the transcript admitted without a result gets one (`policy`
 * `fail`: interrupted; `rerun_idempotent`: tools with `replay: "safe"` run again), then the session's messages are
 * rebuilt as pi messages, to go on with `agentLoopContinue(..., { store, storeSessionId })`.
 */
export async function resume({ store, storeSessionId: sessionId, tools = [], policy = "fail", durability }) {
  if (typeof store !== "string" || store === "") throw new TypeError("resume needs the store the session is in");
  if (typeof sessionId !== "string" || sessionId === "") throw new TypeError("resume needs the storeSessionId to resume");
  const { engine, store: opened } = await engineFor(store, durability ?? "full", tools, "parallel", true);
  const recovered = JSON.parse(await engine.recover(sessionId, policy));
  const log = JSON.parse(await opened.loadLog(sessionId));
  return { messages: piMessages(log), recovered };
}

/**
 * The stored log as pi messages: the fragments of one response joined into one assistant message, and each tool
 * result after the message that holds its call (the log keeps them in the order they were written: an early call's
 * result can come before its response's last fragment).
 */
function piMessages(log) {
  const entries = [];
  const turns = new Map();
  const turnOfCall = new Map();
  for (const { message, at_us: atUs } of log) {
    const timestamp = Math.round((atUs ?? 0) / 1000);
    if (message.role === "assistant") {
      let turn = turns.get(message.turn_id);
      if (!turn) {
        turn = { assistant: assistantShell(message, timestamp), results: [] };
        turns.set(message.turn_id, turn);
        entries.push(turn);
      }
      for (const block of message.content ?? []) {
        const piBlock = piBlockOf(block);
        if (piBlock) turn.assistant.content.push(piBlock);
        if (block.type === "tool_call") turnOfCall.set(block.id, turn);
      }
      if (message.stop_reason) turn.assistant.stopReason = PI_STOP_OF[message.stop_reason] ?? "stop";
    } else if (message.role === "user") {
      entries.push({ message: { role: "user", content: [{ type: "text", text: textOf(message.content) }], timestamp } });
    } else if (message.role === "tool_result") {
      const result = {
        role: "toolResult",
        toolCallId: message.tool_call_id,
        toolName: message.tool_name,
        content: (message.content ?? []).filter((block) => block.type === "text"),
        details: message.details ?? {},
        isError: message.is_error === true,
        timestamp,
      };
      const turn = turnOfCall.get(message.tool_call_id);
      if (turn) turn.results.push(result);
      else entries.push({ message: result });
    }
  }
  return entries.flatMap((entry) => (entry.assistant ? [entry.assistant, ...entry.results] : [entry.message]));
}

function assistantShell(message, timestamp) {
  return {
    role: "assistant",
    content: [],
    api: "headstart",
    provider: "headstart",
    model: message.model ?? "unknown",
    responseId: message.turn_id,
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: "stop",
    timestamp,
  };
}

function piBlockOf(block) {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "thinking":
      return { type: "thinking", thinking: block.thinking };
    case "tool_call":
      return { type: "toolCall", id: block.id, name: block.name, arguments: block.arguments ?? {} };
    default:
      return undefined;
  }
}

const PI_STOP_OF = { stop: "stop", length: "length", tool_use: "toolUse", error: "error", aborted: "aborted" };

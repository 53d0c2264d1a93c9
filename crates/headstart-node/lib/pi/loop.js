// pi-agent-core 1.6's agent loop (`agentLoop`, `agentLoopContinue`, `runAgentLoop`, `runAgentLoopContinue`), on
// headstart: its turns, events, hooks, steering and follow-up messages and tool declarations as pi's; each response
// a `Turn`.

import { setDefaultStreamFn as setPiDefaultStreamFn } from "@earendil-works/pi-agent-core";
import { getCurrentTools, getToolStateChanges, toToolDeclaration } from "@earendil-works/pi-ai";

import { messageOf } from "../bridge.js";
import { piUsage } from "./convert.js";
import { Session } from "./durable.js";
import { AgentEventStream } from "./events.js";
import { executeToolCalls, failToolCallsFromTruncatedMessage } from "./execute.js";
import { streamAssistantResponse } from "./stream.js";
import { Turn } from "./turn.js";

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

/** Starts a loop with new prompt messages (pi-agent-core's `agentLoop`). */
export function agentLoop(prompts, context, config, signal, streamFn) {
  const stream = new AgentEventStream();
  void runAgentLoop(prompts, context, config, (event) => void stream.push(event), signal, streamFn).then(
    (messages) => stream.end(messages),
    (error) => failStream(stream, config, error, signal),
  );
  return stream;
}

/** Continues a loop from its context (pi-agent-core's `agentLoopContinue`). */
export function agentLoopContinue(context, config, signal, streamFn) {
  checkContinuable(context);
  const stream = new AgentEventStream();
  void runAgentLoopContinue(context, config, (event) => void stream.push(event), signal, streamFn).then(
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
    usage: piUsage(),
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
  await keepingUsers(session, async () => {
    await emit({ type: "agent_start" });
    await emit({ type: "turn_start" });
    for (const message of initial) {
      await emit({ type: "message_start", message });
      await emit({ type: "message_end", message });
    }
    await runLoop(session, current, newMessages, config, signal, emit, streamFnOr(streamFn));
  });
  return newMessages;
}

/** pi-agent-core's `runAgentLoopContinue`: the loop from its context, events to `emit`. */
export async function runAgentLoopContinue(context, config, emit, signal, streamFn) {
  checkContinuable(context);
  const session = new Session(config);
  const newMessages = [];
  const current = { ...context };
  await keepingUsers(session, async () => {
    await emit({ type: "agent_start" });
    await emit({ type: "turn_start" });
    await runLoop(session, current, newMessages, config, signal, emit, streamFnOr(streamFn));
  });
  return newMessages;
}

/**
 * Runs `body`, a loop of `session`. A loop that fails between recording user messages and its next request (a
 * listener or a hook threw) still writes them; the loop's own error is the one the caller sees.
 */
async function keepingUsers(session, body) {
  try {
    await body();
  } catch (error) {
    await session.flush().catch(() => {});
    throw error;
  }
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
  // The last response's turn: its calls have their results; the engine may still be storing them while the next
  // request goes out (the next response's opening waits for it, and the loop's end does).
  let previous;
  let explicitContinuation = false;
  try {
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

        const turn = await Turn.open(session, context, config, signal, emit, previous);
        previous = turn;
        let completed = false;
        let message;
        try {
          message = await streamAssistantResponse(turn, streamFn);
          newMessages.push(message);
          if (message.stopReason === "error" || message.stopReason === "aborted") {
            await turn.settle();
            completed = true;
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
              message.stopReason === "length"
                ? await failToolCallsFromTruncatedMessage(turn, message)
                : await executeToolCalls(turn, message);
            toolResults.push(...batch.messages);
            moreToolCalls = !batch.terminate;
            for (const result of toolResults) {
              context.messages.push(result);
              newMessages.push(result);
            }
          }
          // Every call has its result: the next request need not wait for the store (`previous`).
          await turn.finished();
          completed = true;
          lastTurn = { message, toolResults, context, newMessages };
          const decision = await config.finishTurn?.(lastTurn, signal);
          await emit({ type: "turn_end", message, toolResults });
          if (decision?.action === "end") {
            await turn.settle();
            await emit({ type: "agent_end", messages: newMessages });
            return;
          }
          explicitContinuation = decision?.action === "continue";
        } finally {
          turn.close(!completed);
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
  } catch (error) {
    // A loop that fails lets what the engine already has be stored before it ends.
    await previous?.stored();
    throw error;
  }
  // The loop ends once its transcript is stored.
  await previous?.settle();
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

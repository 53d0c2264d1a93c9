// pi-agent-core 1.6's batch of a response's tool calls, under pi's names (`executeToolCalls`, sequential and
// parallel, and `failToolCallsFromTruncatedMessage`), with the calls that started early already under way; and the
// early start itself.
//
// Every call goes through one pipeline, in two halves as pi's parallel batch splits it: `startToolCall` (its
// `tool_execution_start`, its preparation), then `completeToolCall` (its execution once the engine asks for it,
// `afterToolCall`, its end). An early call runs both at once when the engine asks; the batch runs the others.

import { engineResult } from "../results.js";
import {
  createErrorToolResult,
  createToolResultMessage,
  createTruncatedToolResult,
  executePreparedToolCall,
  finalizeExecutedToolCall,
  prepareToolCall,
  shouldTerminateToolBatch,
} from "./steps.js";

/** Starts an early call as the engine asks for it: its whole pipeline, its events as they happen. */
export function runEarlyToolCall(turn, call, assistantMessage) {
  return startToolCall(turn, call, assistantMessage).then((preparation) =>
    completeToolCall(turn, call, assistantMessage, preparation),
  );
}

/** The pipeline's first half: the call's `tool_execution_start`, then pi's preparation of it. */
async function startToolCall(turn, call, assistantMessage) {
  await emitToolExecutionStart(turn, call.toolCall);
  return prepareToolCall(turn, assistantMessage, call);
}

/** The pipeline's second half: the call's outcome (run once the engine asks, or immediate), then its end. */
async function completeToolCall(turn, call, assistantMessage, preparation) {
  const finalized =
    preparation.kind === "immediate"
      ? { toolCall: call.toolCall, result: preparation.result, isError: preparation.isError }
      : await runPrepared(turn, call, assistantMessage, preparation);
  await endToolCall(turn, call, finalized);
  return finalized;
}

/** Runs a prepared call once the engine asks for it (its owner is durable), then `afterToolCall`. */
async function runPrepared(turn, call, assistantMessage, prepared) {
  const asked = await call.asked();
  // The engine settled the call by itself (a limit refused it): its stored result is the call's.
  if (!asked) return { toolCall: prepared.toolCall, ...turn.settledWithout(call) };
  const executed = await executePreparedToolCall(turn, prepared, asked.bridge);
  return finalizeExecutedToolCall(turn, assistantMessage, prepared, executed);
}

/** A call's end: the engine has its result first (a sequential call after it starts on it), then the listeners. */
async function endToolCall(turn, call, finalized) {
  call.end(engineResult(finalized.result, finalized.isError));
  await emitToolExecutionEnd(turn, finalized);
}

/** pi's `executeToolCalls`: the final message's calls, sequential when the config or one of the tools says so. */
export async function executeToolCalls(turn, assistantMessage) {
  const calls = turn.callsOf(assistantMessage);
  const sequential =
    turn.config.toolExecution === "sequential" ||
    calls.some((call) => turn.tool(call.toolCall.name)?.executionMode === "sequential");
  return sequential
    ? executeToolCallsSequential(turn, assistantMessage, calls)
    : executeToolCallsParallel(turn, assistantMessage, calls);
}

async function executeToolCallsSequential(turn, assistantMessage, calls) {
  const finalizedCalls = [];
  const messages = [];
  for (const call of calls) {
    const early = await call.earlyRun();
    const finalized = early
      ? await early.pipeline
      : await completeToolCall(turn, call, assistantMessage, await startToolCall(turn, call, assistantMessage));
    const message = createToolResultMessage(finalized);
    await emitToolResultMessage(turn, message);
    finalizedCalls.push(finalized);
    messages.push(message);
  }
  return { messages, terminate: shouldTerminateToolBatch(finalizedCalls) };
}

async function executeToolCallsParallel(turn, assistantMessage, calls) {
  const entries = [];
  for (const call of calls) {
    const early = await call.earlyRun();
    if (early) {
      entries.push(early.pipeline);
      continue;
    }
    const preparation = await startToolCall(turn, call, assistantMessage);
    if (preparation.kind === "immediate") {
      entries.push(await completeToolCall(turn, call, assistantMessage, preparation));
      continue;
    }
    entries.push(() =>
      completeToolCall(
        turn,
        call,
        assistantMessage,
        turn.signal?.aborted
          ? { kind: "immediate", result: createErrorToolResult("Operation aborted"), isError: true }
          : preparation,
      ),
    );
  }
  const ordered = await Promise.all(entries.map((entry) => (typeof entry === "function" ? entry() : entry)));
  const messages = [];
  for (const finalized of ordered) {
    const message = createToolResultMessage(finalized);
    await emitToolResultMessage(turn, message);
    messages.push(message);
  }
  return { messages, terminate: shouldTerminateToolBatch(ordered) };
}

/**
 * pi's `failToolCallsFromTruncatedMessage`: a length-truncated message runs none of its calls. An early call that
 * already ran keeps its result (saying "not executed" of a call that ran would be false).
 */
export async function failToolCallsFromTruncatedMessage(turn, assistantMessage) {
  const messages = [];
  for (const call of turn.callsOf(assistantMessage)) {
    const early = await call.earlyRun();
    let finalized = early && (await early.pipeline);
    if (!finalized) {
      await emitToolExecutionStart(turn, call.toolCall);
      finalized = { toolCall: call.toolCall, result: createTruncatedToolResult(call.toolCall.name), isError: true };
      await endToolCall(turn, call, finalized);
    }
    const message = createToolResultMessage(finalized);
    await emitToolResultMessage(turn, message);
    messages.push(message);
  }
  return { messages, terminate: false };
}

async function emitToolExecutionStart(turn, toolCall) {
  await turn.emit({ type: "tool_execution_start", toolCallId: toolCall.id, toolName: toolCall.name, args: toolCall.arguments });
}

async function emitToolExecutionEnd(turn, finalized) {
  await turn.emit({
    type: "tool_execution_end",
    toolCallId: finalized.toolCall.id,
    toolName: finalized.toolCall.name,
    result: finalized.result,
    isError: finalized.isError,
    ...(finalized.durationMs === undefined ? {} : { durationMs: finalized.durationMs }),
  });
}

async function emitToolResultMessage(turn, message) {
  await turn.emit({ type: "message_start", message });
  await turn.emit({ type: "message_end", message });
}

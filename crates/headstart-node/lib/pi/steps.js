// pi-agent-core 1.6's steps of one tool call, under pi's names (prepare, execute, finalize) and the results they
// make. Every call of the drop-in goes through them, whether it started early or in the batch after its response.
// `turn` gives what the steps read: `context`, `config`, `signal`, `emit` and `tool(name)`.

import { validateToolArguments } from "@earendil-works/pi-ai";

import { messageOf } from "../bridge.js";
import { toResult } from "../results.js";

/** An error result with `message`, as pi makes them. */
export function createErrorToolResult(message) {
  return { content: [{ type: "text", text: message }], details: {} };
}

/** pi's result of a call of tool `name` in a length-truncated message, which it does not run. */
export function createTruncatedToolResult(name) {
  return createErrorToolResult(
    `Tool call "${name}" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments.`,
  );
}

/** pi's `prepareToolCallArguments`: the call with the tool's `prepareArguments` applied, or the call itself. */
function prepareToolCallArguments(tool, toolCall) {
  if (!tool.prepareArguments) return toolCall;
  const args = tool.prepareArguments(toolCall.arguments);
  return args === toolCall.arguments ? toolCall : { ...toolCall, arguments: args };
}

/**
 * pi's `prepareToolCall` of `call` (its `toolCall`): abort, lookup, `prepareArguments`, validation,
 * `beforeToolCall`. An immediate outcome (`{kind: "immediate", result, isError}`) or the prepared call.
 */
export async function prepareToolCall(turn, assistantMessage, call) {
  const { signal, config, context } = turn;
  const { toolCall } = call;
  const immediate = (message, extra = {}) => ({
    kind: "immediate",
    result: { ...createErrorToolResult(message), ...extra },
    isError: true,
  });
  if (signal?.aborted) return immediate("Operation aborted");
  const tool = turn.tool(toolCall.name);
  if (!tool) return immediate(`Tool ${toolCall.name} not found`);
  try {
    const prepared = prepareToolCallArguments(tool, toolCall);
    // An early call's arguments were validated at its seal (`Turn.sealed`): the same check, the same error.
    const validated = prepared === toolCall ? call.takeValidated(toolCall.arguments) : undefined;
    if (validated?.error) throw validated.error;
    const args = validated ? validated.args : validateToolArguments(tool, prepared);
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

/**
 * pi's `executePreparedToolCall`: the tool's `execute`, its updates as events (and to the engine, through `bridge`),
 * its time.
 */
export async function executePreparedToolCall(turn, prepared, bridge) {
  const updates = [];
  let accepting = true;
  const startedAt = performance.now();
  const elapsed = () => Math.round(performance.now() - startedAt);
  const onUpdate = (partialResult) => {
    if (!accepting) return;
    bridge?.onUpdate(toResult(partialResult));
    updates.push(
      Promise.resolve(
        turn.emit({
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
    const signal = turn.signal && bridge?.signal ? AbortSignal.any([turn.signal, bridge.signal]) : (turn.signal ?? bridge?.signal);
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

/** pi's `finalizeExecutedToolCall`: the `afterToolCall` step. */
export async function finalizeExecutedToolCall(turn, assistantMessage, prepared, executed) {
  const { config, signal, context } = turn;
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

/** pi's `shouldTerminateToolBatch`: a batch ends the loop when every call asked for it. */
export function shouldTerminateToolBatch(finalizedCalls) {
  return finalizedCalls.length > 0 && finalizedCalls.every((finalized) => finalized.result.terminate === true);
}

/** pi's `createToolResultMessage`: the tool result message of a finalized call. */
export function createToolResultMessage(finalized) {
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

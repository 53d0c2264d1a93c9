// Resuming a session after a crash: recovery gives every admitted call its result, and the stored log comes back as
// pi messages.

import { piBlockOf, piStop, piToolResultOf, piUsage } from "./convert.js";
import { openEngine, runRecovered } from "./durable.js";
import { createTruncatedToolResult } from "./steps.js";

/** The engine's result of a sync call of a length-truncated response (contract §3.5.3), which it stores itself. */
const NOT_EXECUTED_AT_LENGTH = "not executed: the response ended with stop reason length";

/**
 * A stored result as the live loop had it: a call of a length-truncated response that did not run has pi's result
 * (the engine stored its own text for it).
 */
function liveResultOf(result, assistant) {
  const text = result.content.length === 1 ? result.content[0].text : undefined;
  if (assistant?.stopReason !== "length" || !result.isError || text !== NOT_EXECUTED_AT_LENGTH) return result;
  return { ...result, ...createTruncatedToolResult(result.toolName) };
}

/**
 * Resumes a session after a crash: every call the transcript admitted without a result gets one (`policy`
 * `fail`: interrupted; `rerun_idempotent`: tools with `replay: "safe"` run again), then the session's messages are
 * rebuilt as pi messages, to go on with `agentLoopContinue(..., { store, storeSessionId })`.
 */
export async function resume({ store, storeSessionId: sessionId, tools = [], policy = "fail", durability }) {
  if (typeof store !== "string" || store === "") throw new TypeError("resume needs the store the session is in");
  if (typeof sessionId !== "string" || sessionId === "") throw new TypeError("resume needs the storeSessionId to resume");
  // An engine of its own: recovery runs these tools, whatever other engines of the process run.
  const engine = await openEngine(store, {
    durability: durability ?? "full",
    tools,
    onCall: (letter, context) => runRecovered(tools, letter, context),
  });
  const recovered = await engine.recover(sessionId, policy);
  return { messages: piMessages(await engine.log(sessionId)), recovered };
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
  for (const { message, request, at_us: atUs } of log) {
    const timestamp = Math.round((atUs ?? 0) / 1000);
    if (message.role === "assistant") {
      // A response's fragments share its request number (its turn id may repeat: a provider's response id).
      let turn = turns.get(request);
      if (!turn) {
        turn = { assistant: assistantShell(message, timestamp), results: [] };
        turns.set(request, turn);
        entries.push(turn);
      }
      for (const block of message.content ?? []) {
        const piBlock = piBlockOf(block);
        if (piBlock) turn.assistant.content.push(piBlock);
        if (block.type === "tool_call") turnOfCall.set(block.id, turn);
      }
      if (message.stop_reason) turn.assistant.stopReason = piStop(message.stop_reason);
      // A response's usage is on its last fragment; the prefix fragments before it carry none.
      if (message.usage?.total > 0) {
        const { input, output, cache_read: cacheRead, cache_write: cacheWrite } = message.usage;
        turn.assistant.usage = piUsage({ input, output, cacheRead, cacheWrite });
      }
    } else if (message.role === "user") {
      entries.push({ message: { role: "user", content: [{ type: "text", text: message.text ?? "" }], timestamp } });
    } else if (message.role === "tool_result") {
      const turn = turnOfCall.get(message.tool_call_id);
      const result = liveResultOf(piToolResultOf(message, timestamp), turn?.assistant);
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
    usage: piUsage(),
    stopReason: "stop",
    timestamp,
  };
}

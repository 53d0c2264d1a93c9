// The AI SDK's shapes and the engine's, both ways: finish reasons, usage, a prompt's user messages and tool results,
// and a stored transcript as the AI SDK's `ModelMessage`s.

/**
 * The engine's end of a response that finished with `finishReason` (`{ unified }`, or the reason itself). The AI SDK
 * runs a step's calls when it finishes with `stop` or `tool-calls`: the engine admits them (`tool_use`). A `length`
 * cut runs none; `content-filter` and `other` neither (the engine stores them as a `stop` whose calls were not
 * executed); `error` and `interrupted` end the response as failed.
 */
export function engineFinish(finishReason, hasCalls) {
  const unified = typeof finishReason === "string" ? finishReason : finishReason?.unified;
  switch (unified) {
    case "tool-calls":
      return { type: "done", stop_reason: "tool_use" };
    case "stop":
      return { type: "done", stop_reason: hasCalls ? "tool_use" : "stop" };
    case "length":
      return { type: "done", stop_reason: "length" };
    case "error":
      return { type: "error", stop_reason: "error", message: `the model finished with an error (${finishReason?.raw ?? "error"})` };
    case "interrupted":
      return { type: "error", stop_reason: "aborted", message: "the model's response was interrupted" };
    default:
      return { type: "done", stop_reason: "stop" };
  }
}

/** A count of tokens: an AI SDK usage field (a number, or `{ total }`), 0 when absent. */
function tokens(value) {
  const count = typeof value === "number" ? value : value?.total;
  return Number.isSafeInteger(count) && count >= 0 ? count : 0;
}

/** The engine's usage of an AI SDK usage (LanguageModelV4's: `{ inputTokens: {total, noCache, cacheRead, cacheWrite}, outputTokens: {total} }`). */
export function engineUsage(usage) {
  if (!usage || typeof usage !== "object") return undefined;
  const input = usage.inputTokens;
  const cacheRead = tokens(input?.cacheRead);
  const cacheWrite = tokens(input?.cacheWrite);
  const noCache = typeof input?.noCache === "number" ? tokens(input.noCache) : Math.max(0, tokens(input) - cacheRead - cacheWrite);
  return { input: noCache, output: tokens(usage.outputTokens), cache_read: cacheRead, cache_write: cacheWrite };
}

/** The text of a prompt message's content: a string, or its text parts joined. */
export function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part) => part?.type === "text" && typeof part.text === "string")
    .map((part) => part.text)
    .join("\n");
}

/** The user messages of a prompt (LanguageModelV4Prompt), their text. */
export function userTexts(prompt) {
  return (Array.isArray(prompt) ? prompt : []).filter((message) => message?.role === "user").map((message) => textOf(message.content));
}

/**
 * The outcomes the AI SDK gave a prompt's calls without running them (a tool without `execute`, whose result the
 * app supplied; an approval denied), by call id, as the engine stores a result.
 */
export function promptOutcomes(prompt) {
  const outcomes = new Map();
  for (const message of Array.isArray(prompt) ? prompt : []) {
    if (message?.role !== "tool" || !Array.isArray(message.content)) continue;
    for (const part of message.content) {
      if (part?.type === "tool-result") outcomes.set(part.toolCallId, outputResult(part.output));
      else if (part?.type === "tool-approval-response" && part.approved === false) {
        outcomes.set(part.toolCallId, { content: [{ type: "text", text: `denied: ${part.reason ?? "the user denied the call"}` }], details: null, isError: true });
      }
    }
  }
  return outcomes;
}

/** A tool result's output (LanguageModelV4ToolResultOutput) as the engine stores a result. */
function outputResult(output) {
  const text = (value) => [{ type: "text", text: typeof value === "string" ? value : JSON.stringify(value ?? null) }];
  switch (output?.type) {
    case "text":
      return { content: text(output.value), details: null, isError: false };
    case "json":
      return { content: text(output.value), details: output.value ?? null, isError: false };
    case "error-text":
    case "error-json":
      return { content: text(output.value), details: null, isError: true };
    case "execution-denied":
      return { content: text(`denied: ${output.reason ?? "the user denied the call"}`), details: null, isError: true };
    default:
      return { content: text(output?.value ?? output), details: null, isError: false };
  }
}

/**
 * A stored transcript (`engine.log`) as the AI SDK's `ModelMessage`s: the prompts, each response's fragments joined
 * into one assistant message, and its calls' results in one tool message after it (a string result as `text`, one
 * whose details hold a value as `json`, an error as `error-text`).
 */
export function modelMessages(log) {
  const out = [];
  const responses = new Map();
  const responseOfCall = new Map();
  for (const { message, request } of log) {
    if (message.role === "user") {
      out.push({ role: "user", content: message.text ?? "" });
    } else if (message.role === "assistant") {
      // A response's fragments share its request number (its turn id may repeat: a provider's response id).
      let response = responses.get(request);
      if (!response) {
        response = { assistant: { role: "assistant", content: [] }, tool: { role: "tool", content: [] } };
        responses.set(request, response);
        out.push(response.assistant, response.tool);
      }
      for (const block of message.content ?? []) {
        if (block.type === "text") response.assistant.content.push({ type: "text", text: block.text });
        else if (block.type === "thinking") response.assistant.content.push({ type: "reasoning", text: block.thinking });
        else if (block.type === "tool_call") {
          response.assistant.content.push({ type: "tool-call", toolCallId: block.id, toolName: block.name, input: block.arguments ?? {} });
          responseOfCall.set(block.id, response);
        }
      }
    } else if (message.role === "tool_result") {
      const text = (message.content ?? []).filter((block) => block.type === "text").map((block) => block.text).join("\n");
      const output = message.is_error
        ? { type: "error-text", value: text }
        : message.details !== null && message.details !== undefined
          ? { type: "json", value: message.details }
          : { type: "text", value: text };
      responseOfCall.get(message.tool_call_id)?.tool.content.push({
        type: "tool-result",
        toolCallId: message.tool_call_id,
        toolName: message.tool_name,
        output,
      });
    }
  }
  return out.filter((message) => message.role !== "tool" || message.content.length > 0);
}

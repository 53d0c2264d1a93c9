// pi-ai's shapes and the engine's, both ways: stop reasons, usage, content blocks and stored messages. Each
// conversion sits beside its inverse.

/** Whether a pi stop reason ends a response as a failure (pi-agent-core runs none of its calls). */
export function isFailedStop(stopReason) {
  return stopReason === "error" || stopReason === "aborted";
}

/**
 * The engine's stop reason of a response pi ended with `stopReason`, not failed. pi runs the calls of every such
 * response but a length-truncated one, whatever its reason says (`stop` included): the engine admits them on
 * `tool_use`.
 */
export function engineStop(stopReason, hasCalls) {
  if (stopReason === "length") return "length";
  return hasCalls ? "tool_use" : "stop";
}

const PI_STOP_OF = { stop: "stop", length: "length", tool_use: "toolUse", error: "error", aborted: "aborted" };

/** pi's stop reason of a stored response (the inverse of `engineStop`). */
export function piStop(stopReason) {
  return PI_STOP_OF[stopReason] ?? "stop";
}

/** The engine's usage of a pi `Usage` (its token counts; a count that is not one is 0), or `undefined`. */
export function engineUsage(usage) {
  if (!usage || typeof usage !== "object") return undefined;
  const count = (value) => (Number.isSafeInteger(value) && value >= 0 ? value : 0);
  return {
    input: count(usage.input),
    output: count(usage.output),
    cache_read: count(usage.cacheRead),
    cache_write: count(usage.cacheWrite),
  };
}

/** A pi `Usage` of these token counts (each 0 when absent); the cost is not known here, so it is 0. */
export function piUsage({ input = 0, output = 0, cacheRead = 0, cacheWrite = 0 } = {}) {
  return {
    input,
    output,
    cacheRead,
    cacheWrite,
    totalTokens: input + output + cacheRead + cacheWrite,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
}

/** The kind of a pi content block the engine keeps (`text`, `thinking`, `toolCall`), or `undefined`. */
export function kindOf(block) {
  const type = block?.type;
  return type === "text" || type === "thinking" || type === "toolCall" ? type : undefined;
}

/** A stored content block as pi's, or `undefined` for a kind pi has not. */
export function piBlockOf(block) {
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

/** A stored tool result as pi's `ToolResultMessage` (its text blocks; images are not stored). */
export function piToolResultOf(message, timestamp) {
  return {
    role: "toolResult",
    toolCallId: message.tool_call_id,
    toolName: message.tool_name,
    content: (message.content ?? []).filter((block) => block.type === "text"),
    details: message.details ?? {},
    isError: message.is_error === true,
    timestamp,
  };
}

/** The text of a pi message's content: a string, or its text blocks joined. */
export function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((block) => block?.type === "text")
    .map((block) => block.text)
    .join("\n");
}

// Tool results: what a tool returns, read as a result; an error result; pi's result as the engine stores it. Every
// result the package builds comes from here.

/** A tool result as the engine stores it: `{content: [{type: "text", text}], details?, isError?, terminate?}`. */
export function toResult(value) {
  if (typeof value === "string") return { content: [{ type: "text", text: value }] };
  if (value == null) return { content: [] };
  if (typeof value === "object" && Array.isArray(value.content)) return value;
  if (typeof value === "object" && typeof value.content === "string") {
    return { ...value, content: [{ type: "text", text: value.content }] };
  }
  return { content: [{ type: "text", text: JSON.stringify(value) }] };
}

/** An error result with `message`. */
export function errorResult(message) {
  return { content: [{ type: "text", text: message }], details: {}, isError: true };
}

/** pi's tool result (`{content, details, terminate}`) and whether it is an error, as the engine stores it. */
export function engineResult(result, isError) {
  return { content: result.content ?? [], details: result.details ?? null, isError, terminate: result.terminate === true };
}

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
  const text = jsonOf(value);
  // A value JSON cannot hold (a symbol, a function, a BigInt) crosses as it is: the engine names it in the call's
  // error result, with what a tool may return.
  return text === undefined ? value : { content: [{ type: "text", text }] };
}

/** The JSON text of `value`, or `undefined` when JSON cannot hold it. */
function jsonOf(value) {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** An error result with `message`. */
export function errorResult(message) {
  return { content: [{ type: "text", text: message }], details: {}, isError: true };
}

/** pi's tool result (`{content, details, terminate}`) and whether it is an error, as the engine stores it. */
export function engineResult(result, isError) {
  return { content: result.content ?? [], details: result.details ?? null, isError, terminate: result.terminate === true };
}

// Tools as the engine's API declares them: `tool(...)`, and the spec of one as the addon reads it (the host layer's
// `HostToolSpec`).

/**
 * @typedef {import("../index.js").ToolDeclaration} ToolDeclaration
 */

/**
 * Declares a tool. `parameters` is a JSON Schema (a TypeBox schema is one); `execute(args, { signal, callId,
 * sessionId, idempotencyKey, onUpdate })` returns (a promise of) a string or a result object. `early` starts its
 * calls at their `toolcall_end`, once the prefix is committed; `idempotent` lets recovery run it again;
 * `providerAsync` marks it as OpenAI's provider-async tool (early too); `sequential` fences its batch;
 * `conflictKey` orders calls with equal keys (the name of an argument, whose value is the key, or a fixed key).
 * @param {ToolDeclaration & { execute: import("../index.js").Tool["execute"] }} declaration
 * @returns {import("../index.js").Tool}
 */
export function tool({
  name,
  description = "",
  parameters = { type: "object", properties: {} },
  early = false,
  idempotent = false,
  providerAsync = false,
  sequential = false,
  timeoutMs,
  conflictKey,
  execute,
}) {
  if (typeof execute !== "function") throw new TypeError(`tool ${name}: execute must be a function`);
  return Object.freeze({
    ...toolSpec({ name, description, parameters, early, idempotent, providerAsync, sequential, timeoutMs, conflictKey }),
    execute,
  });
}

/**
 * A tool's spec, checked: what the engine schedules its calls by, without its body (an engine given `onCall` runs
 * the calls itself). A `TypeError` names what is wrong.
 * @param {ToolDeclaration} declaration
 * @returns {import("../index.js").ToolSpec}
 */
export function toolSpec({
  name,
  description = "",
  parameters = { type: "object", properties: {} },
  early = false,
  idempotent = false,
  providerAsync = false,
  sequential = false,
  timeoutMs,
  conflictKey,
}) {
  if (typeof name !== "string" || name === "") throw new TypeError("a tool needs a name (a non-empty string)");
  if (parameters === null || typeof parameters !== "object" || Array.isArray(parameters)) {
    throw new TypeError(`tool ${name}: parameters must be a JSON Schema object`);
  }
  if (timeoutMs !== undefined && (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs))) {
    throw new TypeError(`tool ${name}: timeoutMs must be a finite number of milliseconds`);
  }
  if (conflictKey !== undefined && typeof conflictKey !== "string") {
    throw new TypeError(`tool ${name}: conflictKey must be a string`);
  }
  return {
    name,
    description: String(description),
    parameters: JSON.parse(JSON.stringify(parameters)),
    early: Boolean(early),
    idempotent: Boolean(idempotent),
    providerAsync: Boolean(providerAsync),
    sequential: Boolean(sequential),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    ...(conflictKey === undefined ? {} : { conflictKey }),
  };
}

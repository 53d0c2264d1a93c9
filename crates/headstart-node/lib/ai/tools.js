// The AI SDK's tools, wrapped: when the AI SDK runs a call (`execute`), an early call hands over its early run's
// result (waiting for it if it still runs, rethrowing its error), and any other call runs its body once the engine
// has admitted it (its owner is durable). The body runs once.

import { engineAnswer, messageOf } from "./response.js";
import { errorResult } from "../results.js";

/** The result text of a call the engine settled without running (a limit refused it). */
function refusal(call) {
  const text = (call.stored?.content ?? []).map((block) => block.text).join("\n");
  return new Error(text || "the engine did not run the call");
}

/**
 * `tools` with each `execute` wrapped for `chat`; tools without one are the app's to answer, and stay as they are.
 * @param {Record<string, any>} tools
 * @param {import("./chat.js").Chat} chat
 * @returns {Record<string, any>}
 */
export function wrapTools(tools, chat) {
  return Object.fromEntries(
    Object.entries(tools).map(([name, tool]) => [
      name,
      typeof tool?.execute === "function" ? { ...tool, execute: (input, options) => run(chat, name, tool, input, options) } : tool,
    ]),
  );
}

/** The AI SDK runs a call of `tool` (named `name`). */
async function run(chat, name, tool, input, options) {
  const claimed = chat.claim(options?.toolCallId);
  // A call the engine never saw (a model call that did not go through the wrapped model), or saw as a call of another
  // tool (`experimental_repairToolCall` renamed it): the tool runs as it would, outside the transcript.
  if (!claimed || (claimed.call.toolCall && claimed.call.toolCall.name !== name)) return tool.execute(input, options);
  const { call } = claimed;
  if (call.early) {
    const early = await call.earlyRun();
    if (early) {
      const outcome = await early.pipeline;
      if (outcome.error !== undefined) throw outcome.error;
      if (outcome.invalid === undefined) return replay(outcome.value);
      // The AI SDK runs what the early check refused (its input was repaired or refined since): not early, then.
    }
  }
  const asked = await call.asked();
  if (!asked) throw refusal(call);
  const signal = options?.abortSignal ? AbortSignal.any([asked.bridge.signal, options.abortSignal]) : asked.bridge.signal;
  try {
    const value = await tool.execute(input, { ...options, abortSignal: signal });
    if (value && typeof value === "object" && typeof value[Symbol.asyncIterator] === "function") {
      return relay(value, call);
    }
    call.end(engineAnswer(value));
    return value;
  } catch (error) {
    call.end(errorResult(messageOf(error)));
    throw error;
  }
}

/** An early run's value as the AI SDK gets it: the value, or its preliminary results again, the last final. */
function replay(value) {
  if (!value.values) return value.final;
  return (async function* () {
    yield* value.values;
  })();
}

/** An async iterable's values passed on as they come; the last one is the call's result. */
async function* relay(iterable, call) {
  let last;
  try {
    for await (const item of iterable) {
      last = item;
      yield item;
    }
    call.end(engineAnswer(last));
  } catch (error) {
    call.end(errorResult(messageOf(error)));
    throw error;
  }
}

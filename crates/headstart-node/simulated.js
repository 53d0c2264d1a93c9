// headstart/simulated: a simulated streaming model, as pi-ai streams that follow a script. The demo runs on it with no
// key, and the test suite drives pi-agent-core's own loop and headstart's drop-in with the same scripts.
import { createAssistantMessageEventStream } from "@earendil-works/pi-ai";

/** @typedef {import("@earendil-works/pi-ai").AssistantMessage} AssistantMessage */

/** The model the simulated streams say they come from. */
export const MODEL = {
  id: "scripted",
  name: "scripted",
  api: "scripted",
  provider: "scripted",
  baseUrl: "",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 100000,
  maxTokens: 1000,
};

const USAGE = {
  input: 10,
  output: 5,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 15,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

/** Waits `ms` milliseconds: a pace for `scriptedStream` that streams as a model does. */
export function sleep(ms) {
  return new Promise((done) => setTimeout(done, ms));
}

/** Waits for `rounds` turns of the event loop. */
export async function ticks(rounds) {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * A pi-ai stream of one scripted response. `turn.blocks`: `{text}` or `{call: {id, name, arguments}}`;
 * `turn.stop`: `stop`, `toolUse`, `length`, `error`, or `abort` (the stream aborts `controller` after `abortAt`
 * events and ends as `aborted`). `onEvent(index, event)` sees each event before it is pushed; `pace(index)` is
 * awaited before each event (one event-loop turn by default; when it returns nothing, the event is pushed in the
 * same tick as the one before); `gate(toolCall, earlierCalls)`, after each call's `toolcall_end`, holds the stream
 * until it resolves. `skip(event)` leaves out the events it returns true for, as stream functions that push only
 * `done` do (the final message still holds everything); `stream()` makes the stream the events go into (pi-ai's
 * `createAssistantMessageEventStream()` by default).
 * @param {import("./simulated.js").ScriptedTurn} turn
 * @param {import("./simulated.js").ScriptedOptions} [options]
 * @returns {import("@earendil-works/pi-ai").AssistantMessageEventStream}
 */
export function scriptedStream(
  turn,
  { controller, onEvent, pace = () => ticks(1), gate, skip, stream: makeStream = createAssistantMessageEventStream } = {},
) {
  const stream = makeStream();
  /** @type {AssistantMessage} */
  const partial = {
    role: "assistant",
    content: [],
    api: MODEL.api,
    provider: MODEL.provider,
    model: MODEL.id,
    usage: { ...USAGE },
    stopReason: "stop",
    timestamp: Date.now(),
  };
  void (async () => {
    let index = 0;
    // Whether the last event went out (a skipped `toolcall_end` holds nothing back: no call can start on it).
    let pushed = false;
    const emit = async (make) => {
      const paced = pace(index);
      if (paced) await paced;
      if (turn.stop === "abort" && index === (turn.abortAt ?? 1)) {
        controller?.abort();
        /** @type {AssistantMessage} */
        const error = { ...partial, content: [...partial.content], stopReason: "aborted", errorMessage: "Request was aborted" };
        stream.push({ type: "error", reason: "aborted", error });
        return false;
      }
      const event = make();
      pushed = !skip?.(event);
      if (pushed) {
        onEvent?.(index, event);
        stream.push(event);
      }
      index++;
      return true;
    };
    if (!(await emit(() => ({ type: "start", partial })))) return;
    for (const block of turn.blocks) {
      const contentIndex = partial.content.length;
      if ("text" in block) {
        /** @type {import("@earendil-works/pi-ai").TextContent} */
        const text = { type: "text", text: "" };
        partial.content.push(text);
        if (!(await emit(() => ({ type: "text_start", contentIndex, partial })))) return;
        for (const piece of chunks(block.text)) {
          if (
            !(await emit(() => {
              text.text += piece;
              return { type: "text_delta", contentIndex, delta: piece, partial };
            }))
          )
            return;
        }
        if (!(await emit(() => ({ type: "text_end", contentIndex, content: block.text, partial })))) return;
      } else {
        const call = block.call;
        const text = JSON.stringify(call.arguments);
        partial.content.push({ type: "toolCall", id: call.id, name: call.name, arguments: {} });
        if (!(await emit(() => ({ type: "toolcall_start", contentIndex, partial })))) return;
        for (const piece of chunks(text)) {
          if (!(await emit(() => ({ type: "toolcall_delta", contentIndex, delta: piece, partial })))) return;
        }
        /** @type {import("@earendil-works/pi-ai").ToolCall} */
        const toolCall = {
          type: "toolCall",
          id: call.id,
          name: call.name,
          arguments: /** @type {import("@earendil-works/pi-ai").ToolCall["arguments"]} */ (call.arguments),
        };
        if (
          !(await emit(() => {
            partial.content[contentIndex] = toolCall;
            return { type: "toolcall_end", contentIndex, toolCall, partial };
          }))
        )
          return;
        // The model goes on only once `gate` lets it (an early call started, say): a paced stream without timers.
        const earlier = partial.content.filter(
          /** @returns {block is import("@earendil-works/pi-ai").ToolCall} */ (block) => block.type === "toolCall" && block !== toolCall,
        );
        if (pushed) await gate?.(toolCall, earlier);
      }
    }
    if (turn.stop === "error") {
      /** @type {AssistantMessage} */
      const error = { ...partial, content: [...partial.content], stopReason: "error", errorMessage: "provider failed" };
      await emit(() => ({ type: "error", reason: "error", error }));
      return;
    }
    const reason = turn.stop === "abort" ? "stop" : turn.stop;
    const message = { ...partial, content: [...partial.content], stopReason: reason };
    await emit(() => ({ type: "done", reason, message }));
  })();
  return stream;
}

function chunks(text) {
  const pieces = [];
  for (let i = 0; i < text.length; i += 7) pieces.push(text.slice(i, i + 7));
  return pieces.length > 0 ? pieces : [""];
}

/**
 * A stream function answering each request with the next scripted turn (text `done` once they run out); `options`
 * as `scriptedStream`'s. `streamFn.requests()` counts the requests so far.
 */
export function scriptedStreamFn(turns, options = {}) {
  let next = 0;
  const streamFn = () => {
    const turn = turns[next++] ?? { blocks: [{ text: "done" }], stop: "stop" };
    return scriptedStream(turn, options);
  };
  streamFn.requests = () => next;
  return streamFn;
}

// pi-agent-core 1.6's `streamAssistantResponse`, on a turn: each event of the user's stream goes into the engine (the
// turn's feed) as it arrives, and on to pi's events as in pi.

import { DEFAULT_AGENT_IDENTITY } from "@earendil-works/pi-agent-core";
import { mergeClientIdentity, normalizeContext } from "@earendil-works/pi-ai";

import { messageOf } from "../bridge.js";
import { isFailedStop } from "./convert.js";

/** Streams the turn's response from `streamFn`; resolves to pi's final message. */
export async function streamAssistantResponse(turn, streamFn) {
  const { context, config, signal, emit, feed } = turn;
  let messages = context.messages;
  if (config.transformContext) messages = await config.transformContext(messages, signal);
  const llmMessages = await config.convertToLlm(messages);
  const llmContext = normalizeContext({ messages: llmMessages });
  const apiKey = (config.getApiKey ? await config.getApiKey(config.model.provider) : undefined) || config.apiKey;
  try {
    const response = await streamFn(config.model, llmContext, {
      ...config,
      apiKey,
      identity: mergeClientIdentity(DEFAULT_AGENT_IDENTITY, config.identity),
      signal,
    });
    let added = false;
    // The final message, once the stream has ended (`event` its terminal event, if it had one): the engine is given
    // what the events did not say, and the turn its calls.
    const finish = async (event) => {
      const final = await response.result();
      feed.finish(event ?? { type: isFailedStop(final?.stopReason) ? "error" : "done" }, final);
      turn.ended(feed.ending);
      return finishMessage(turn, Object.assign(final, { thinkingLevel: config.reasoning ?? "off" }), added);
    };
    for await (const event of response) {
      // The engine could not open the response: stop reading the model, whose answer could not be stored.
      if (turn.failure) throw turn.failure;
      switch (event.type) {
        case "start":
          feed.other(event);
          turn.partial = event.partial;
          context.messages.push(turn.partial);
          added = true;
          await emit({ type: "message_start", message: { ...turn.partial } });
          break;
        case "text_delta":
        case "thinking_delta":
        case "toolcall_delta":
          // One per token: the feed's own path for them.
          if (typeof event.delta === "string") feed.token(event.type, event.contentIndex, event.delta, event);
          else feed.other(event);
          if (turn.partial) await messageUpdate(turn, event);
          break;
        case "text_start":
        case "text_end":
        case "thinking_start":
        case "thinking_end":
        case "toolcall_start":
        case "toolcall_end":
          feed.other(event);
          if (turn.partial) await messageUpdate(turn, event);
          break;
        case "done":
        case "error":
          return await finish(event);
      }
    }
    return await finish(undefined);
  } catch (error) {
    feed.fail(messageOf(error));
    throw error;
  } finally {
    feed.fail("the stream failed");
  }
}

/** pi's `message_update` for `event`, with the partial message it carries; what `emit` returns. */
function messageUpdate(turn, event) {
  turn.partial = event.partial;
  turn.context.messages[turn.context.messages.length - 1] = turn.partial;
  return turn.emit({ type: "message_update", assistantMessageEvent: event, message: { ...turn.partial } });
}

async function finishMessage(turn, message, added) {
  const { context, emit } = turn;
  if (added) {
    context.messages[context.messages.length - 1] = message;
  } else {
    context.messages.push(message);
    await emit({ type: "message_start", message: { ...message } });
  }
  await emit({ type: "message_end", message });
  return message;
}

// Feeding a model's stream into a native response: the user's stream object, read in the format it is in.
//
// - `pi`: pi-ai `AssistantMessageEvent`s, turned into headstart's delta events by `PiFeed` (lib/pi/feed.js), their final
//   message authoritative as in pi.
// - `headstart`: delta events as objects, as in a delta log.
// - `openai-chat`, `openai-responses`, `anthropic`, `gemini`: an SDK's stream. Given the SDK's request promise
//   (it has `asResponse()`), the HTTP body is read through the engine's own SSE parser; given the stream itself,
//   its events are handed over as their wire JSON. Either way one converter reads them.
// - `sse-<wire format>`: an HTTP body (a `fetch` `Response`, its `body`, or any async iterable of bytes).

import { PiFeed } from "./pi/feed.js";

/** The formats `wrap` reads. */
export const FORMATS = ["pi", "headstart", "openai-chat", "openai-responses", "anthropic", "gemini"];
const WIRES = FORMATS.slice(2);

/** The native format a user-facing format is read as; a `TypeError` naming the formats for anything else. */
export function nativeFormat(format) {
  if (format === "pi" || format === "headstart") return "headstart";
  if (WIRES.includes(format)) return format;
  if (typeof format === "string" && format.startsWith("sse-") && WIRES.includes(format.slice(4))) return format;
  throw new TypeError(
    `unknown stream format ${JSON.stringify(format)}: expected one of ${FORMATS.join(", ")}, or sse- and one of ` +
      WIRES.join(", "),
  );
}

/** Whether `value` can be iterated with `for await`. */
function isAsyncIterable(value) {
  return value != null && (typeof value[Symbol.asyncIterator] === "function" || typeof value[Symbol.iterator] === "function");
}

/** The byte chunks of an HTTP body: a `Response`, a `ReadableStream`, or an async iterable of bytes. */
function bodyOf(value) {
  if (value && typeof value === "object" && "body" in value && value.body && typeof value.arrayBuffer === "function") {
    return value.body;
  }
  return value;
}

/**
 * Reads `stream` (in `format`) into `response` until it ends, fails or `signal` aborts. Never throws: a stream
 * that fails ends the response as an error with its message.
 */
export async function pump(stream, format, response, signal) {
  let iterator;
  let ended = false;
  const stop = () => iterator?.return?.().catch(() => {});
  signal?.addEventListener("abort", stop, { once: true });
  try {
    if (format === "pi") {
      const feed = new PiFeed(response);
      try {
        for await (const event of withIterator(stream, (it) => (iterator = it))) {
          if (signal?.aborted) break;
          feed.add(event);
        }
      } finally {
        feed.flush();
      }
      if (signal?.aborted) feed.abort();
      else feed.end();
      return;
    } else if (format === "headstart") {
      for await (const delta of withIterator(stream, (it) => (iterator = it))) {
        if (signal?.aborted) break;
        const text = typeof delta === "string" ? delta : JSON.stringify(delta);
        response.push(text);
        ended ||= /^\{"type":"(done|error)"/.test(text);
      }
    } else if (format.startsWith("sse-")) {
      for await (const chunk of withIterator(bodyOf(await stream), (it) => (iterator = it))) {
        if (signal?.aborted) break;
        response.pushBody(Buffer.from(typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk));
      }
    } else if (stream && typeof stream.asResponse === "function") {
      // The SDK's request promise: its HTTP body, untouched by the SDK's own parser.
      const raw = await stream.asResponse();
      for await (const chunk of withIterator(raw.body, (it) => (iterator = it))) {
        if (signal?.aborted) break;
        response.pushBody(Buffer.from(chunk));
      }
    } else {
      const named = format !== "openai-chat";
      for await (const event of withIterator(await stream, (it) => (iterator = it))) {
        if (signal?.aborted) break;
        const data = typeof event === "string" ? event : JSON.stringify(event);
        response.push(data, named && typeof event?.type === "string" ? event.type : null);
      }
    }
    if (signal?.aborted && !ended && format === "headstart") {
      response.push(JSON.stringify({ type: "error", stop_reason: "aborted", message: "aborted" }));
      response.end();
    } else if (signal?.aborted && !ended) {
      response.fail("aborted");
    } else {
      response.end();
    }
  } catch (error) {
    response.fail(error instanceof Error ? error.message : String(error));
  } finally {
    signal?.removeEventListener("abort", stop);
  }
}

/** Iterates `source` (async or sync iterable), handing its iterator to `keep` so an abort can close it. */
async function* withIterator(source, keep) {
  if (!isAsyncIterable(source)) {
    throw new TypeError("the stream is not an async iterable (for await ... of) of its format's events");
  }
  const iterator =
    typeof source[Symbol.asyncIterator] === "function" ? source[Symbol.asyncIterator]() : source[Symbol.iterator]();
  keep(iterator);
  while (true) {
    const { value, done } = await iterator.next();
    if (done) return;
    yield value;
  }
}

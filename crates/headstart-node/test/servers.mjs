// Paced provider servers on loopback for the suite: the real SDKs read them as they read the providers.
import { createServer } from "node:http";

/** A promise and its resolve. */
export function deferred() {
  let resolve;
  const promise = new Promise((done) => (resolve = done));
  return { promise, resolve };
}

/** A bound, not a timing: a promise that never settles fails the test instead of hanging the suite. */
export function within(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms))),
  ]);
}

async function listen(handler) {
  const server = createServer(handler);
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return { server, port: server.address().port };
}

/**
 * A paced Chat Completions server: a call to `lookup` with complete arguments, then (once `started` resolves: the
 * call has started) `after` text chunks `paceMs` apart, then the finish. Resolves to its URL.
 */
export async function pacedChatServer({ started, after = 10, paceMs = 20 }) {
  const chunk = (delta, finish = null) =>
    `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 0, model: "paced", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const { server, port } = await listen(async (request, response) => {
    for await (const _ of request);
    response.writeHead(200, { "content-type": "text/event-stream" });
    response.write(chunk({ role: "assistant", content: null, tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "lookup", arguments: "" } }] }));
    response.write(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"query": "weather"}' } }] }));
    await within(started, 10_000, "the early call's start");
    for (let i = 0; i < after; i++) {
      await new Promise((done) => setTimeout(done, paceMs));
      response.write(chunk({ content: `word${i} ` }));
    }
    response.write(chunk({}, "tool_calls"));
    response.write("data: [DONE]\n\n");
    response.end();
  });
  return { url: `http://127.0.0.1:${port}/v1`, close: () => server.close() };
}

/**
 * Anthropic's Messages stream: a call closed early, then (once `started` resolves: the call has started) `after`
 * text deltas `paceMs` apart; a second request gets a text answer.
 */
export async function anthropicServer({ started, after = 10, paceMs = 20 }) {
  let requests = 0;
  const { server, port } = await listen(async (request, response) => {
    for await (const _ of request);
    const send = (type, data) => response.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    response.writeHead(200, { "content-type": "text/event-stream" });
    send("message_start", { message: { id: `msg_${requests}`, type: "message", role: "assistant", model: "paced", content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } });
    if (requests++ === 0) {
      send("content_block_start", { index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} } });
      send("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: '{"city": "Lisbon"}' } });
      send("content_block_stop", { index: 0 });
      await within(started, 10_000, "the early call's start");
      send("content_block_start", { index: 1, content_block: { type: "text", text: "" } });
      for (let i = 0; i < after; i++) {
        await new Promise((done) => setTimeout(done, paceMs));
        send("content_block_delta", { index: 1, delta: { type: "text_delta", text: `word${i} ` } });
      }
      send("content_block_stop", { index: 1 });
      send("message_delta", { delta: { stop_reason: "tool_use" }, usage: { output_tokens: 20 } });
    } else {
      send("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
      send("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Sunny in Lisbon." } });
      send("content_block_stop", { index: 0 });
      send("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } });
    }
    send("message_stop", {});
    response.end();
  });
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}


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

/**
 * A paced server of three wire formats, for the AI SDK's provider packages: OpenAI Chat Completions
 * (`/chat/completions`), OpenAI Responses (`/responses`) and Anthropic Messages (`/messages`). The first request of
 * each answers with a call (`call`: to `lookup` by default) whose arguments are whole at once, then (once `started`
 * resolves, when given: the call has started, a bound on the wait) `after` text pieces `paceMs` apart, then the end;
 * the next ones answer with text.
 * `endedAt[path]` is when the first response's last byte was written (`performance.now()`).
 */
export async function aiProviderServer({ started, after = 10, paceMs = 20, call = { name: "lookup", input: { query: "weather" } } }) {
  const name = call.name;
  const args = JSON.stringify(call.input);
  const requests = new Map();
  const endedAt = {};
  const chat = (delta, finish = null) => ({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "paced", choices: [{ index: 0, delta, finish_reason: finish }] });
  const withCall = {
    "/chat/completions": {
      call: [
        [null, chat({ role: "assistant", content: null })],
        [null, chat({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name, arguments: "" } }] })],
        [null, chat({ tool_calls: [{ index: 0, function: { arguments: args } }] })],
      ],
      answer: [[null, chat({ role: "assistant", content: "Sunny." })]],
      text: (i) => [null, chat({ content: `word${i} ` })],
      end: (calls) => [
        [null, chat({}, calls ? "tool_calls" : "stop")],
        [null, { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "paced", choices: [], usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } }],
        [null, "[DONE]"],
      ],
    },
    "/responses": {
      call: [
        ["response.created", { type: "response.created", response: { id: "resp_1", created_at: 1, model: "paced" } }],
        ["response.output_item.added", { type: "response.output_item.added", output_index: 0, item: { type: "function_call", id: "fc_1", call_id: "call_1", name, arguments: "", status: "in_progress" } }],
        ["response.function_call_arguments.delta", { type: "response.function_call_arguments.delta", item_id: "fc_1", output_index: 0, delta: args }],
        ["response.output_item.done", { type: "response.output_item.done", output_index: 0, item: { type: "function_call", id: "fc_1", call_id: "call_1", name, arguments: args, status: "completed" } }],
        ["response.output_item.added", { type: "response.output_item.added", output_index: 1, item: { type: "message", id: "msg_1" } }],
      ],
      answer: [
        ["response.created", { type: "response.created", response: { id: "resp_2", created_at: 1, model: "paced" } }],
        ["response.output_item.added", { type: "response.output_item.added", output_index: 1, item: { type: "message", id: "msg_1" } }],
        ["response.output_text.delta", { type: "response.output_text.delta", item_id: "msg_1", output_index: 1, delta: "Sunny." }],
      ],
      text: (i) => ["response.output_text.delta", { type: "response.output_text.delta", item_id: "msg_1", output_index: 1, delta: `word${i} ` }],
      end: () => [
        ["response.output_item.done", { type: "response.output_item.done", output_index: 1, item: { type: "message", id: "msg_1" } }],
        ["response.completed", { type: "response.completed", response: { incomplete_details: null, usage: { input_tokens: 5, output_tokens: 7 } } }],
      ],
    },
    "/messages": {
      call: [
        ["message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "paced", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } }],
        ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "toolu_1", name, input: {} } }],
        ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: args } }],
        ["content_block_stop", { type: "content_block_stop", index: 0 }],
        ["content_block_start", { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } }],
      ],
      answer: [
        ["message_start", { type: "message_start", message: { id: "msg_2", type: "message", role: "assistant", model: "paced", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } }],
        ["content_block_start", { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } }],
        ["content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "Sunny." } }],
      ],
      text: (i) => ["content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: `word${i} ` } }],
      end: (calls) => [
        ["content_block_stop", { type: "content_block_stop", index: 1 }],
        ["message_delta", { type: "message_delta", delta: { stop_reason: calls ? "tool_use" : "end_turn", stop_sequence: null }, usage: { output_tokens: 30 } }],
        ["message_stop", { type: "message_stop" }],
      ],
    },
  };
  const { server, port } = await listen(async (request, response) => {
    for await (const _ of request);
    const path = Object.keys(withCall).find((candidate) => request.url.endsWith(candidate));
    if (!path) {
      response.writeHead(404).end();
      return;
    }
    const script = withCall[path];
    const first = !requests.has(path);
    requests.set(path, (requests.get(path) ?? 0) + 1);
    const send = ([event, data]) => response.write(`${event ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
    response.writeHead(200, { "content-type": "text/event-stream" });
    if (!first) {
      [...script.answer, ...script.end(false)].forEach(send);
      response.end();
      return;
    }
    script.call.forEach(send);
    if (started) await within(started, 10_000, "the early call's start");
    for (let i = 0; i < after; i++) {
      await new Promise((done) => setTimeout(done, paceMs));
      send(script.text(i));
    }
    script.end(true).forEach(send);
    response.end();
    endedAt[path] = performance.now();
  });
  return { url: `http://127.0.0.1:${port}`, endedAt, close: () => server.close() };
}

// headstart/ai over the AI SDK's real provider packages, each against a paced local server speaking its wire format:
// @ai-sdk/openai (Chat Completions and Responses) and @ai-sdk/anthropic. The early call starts while the model
// streams: at least `LEAD_MS` before the response's last byte, where the plain AI SDK starts it after. Chat
// Completions' model gives its `tool-call` part only when the stream ends; the call is sealed from its input parts as
// soon as they form a complete JSON object.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { z } from "zod";
import { withHeadstart } from "headstart/ai";
import { inspect } from "headstart";
import { aiProviderServer, deferred } from "./servers.mjs";

const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });
/** The response streams 10 pieces 20 ms apart once the call has started: a lead of 200 ms, less this margin. */
const AFTER = 10;
const PACE_MS = 20;
const LEAD_MS = 150;

const PROVIDERS = {
  "@ai-sdk/openai, Chat Completions": { path: "/chat/completions", model: (url) => createOpenAI({ baseURL: `${url}/v1`, apiKey: "test" }).chat("paced") },
  "@ai-sdk/openai, Responses": { path: "/responses", model: (url) => createOpenAI({ baseURL: `${url}/v1`, apiKey: "test" }).responses("paced") },
  "@ai-sdk/anthropic": { path: "/messages", model: (url) => createAnthropic({ baseURL: `${url}/v1`, apiKey: "test" })("paced") },
};

for (const [name, provider] of Object.entries(PROVIDERS)) {
  test(`through ${name}: the early call starts while the model streams, and the transcript holds it`, async (t) => {
    const started = deferred();
    let startedAt;
    let runs = 0;
    const server = await aiProviderServer({ started: started.promise, after: AFTER, paceMs: PACE_MS });
    t.after(() => server.close());
    const tools = {
      lookup: tool({
        description: "looks the weather up",
        inputSchema: z.object({ query: z.string() }),
        execute: async ({ query }) => {
          runs++;
          startedAt = performance.now();
          started.resolve();
          return `found ${query}`;
        },
      }),
    };
    const store = join(mkdtempSync(join(root, "ai-provider-")), "chat.db");
    const wrapped = await withHeadstart({ model: provider.model(server.url), tools, store, early: ["lookup"] });
    let toolCallAt;
    const result = streamText({ model: wrapped.model, tools: wrapped.tools, prompt: "the weather?", stopWhen: stepCountIs(2) });
    for await (const part of result.fullStream) if (part.type === "tool-call") toolCallAt ??= performance.now();
    const endedAt = server.endedAt[provider.path];
    const lead = endedAt - startedAt;
    console.log(`${name}: the call started ${lead.toFixed(0)} ms before the stream ended; the AI SDK's tool-call part came ${(endedAt - toolCallAt).toFixed(0)} ms before it`);
    assert.ok(lead >= LEAD_MS, `${name}: the call started ${lead.toFixed(0)} ms before the stream ended`);
    assert.equal(runs, 1, "the body ran once");
    assert.equal(await result.text, "Sunny.");
    const steps = await result.steps;
    assert.deepEqual(steps[0].toolResults.map((toolResult) => toolResult.output), ["found weather"]);
    const report = await inspect(store, wrapped.sessionId);
    const messages = report.sessions[0].messages.map((stored) => stored.message);
    const call = messages.flatMap((message) => (message.role === "assistant" ? message.content : [])).find((block) => block.type === "tool_call");
    assert.deepEqual(call.arguments, { query: "weather" });
    const stored = messages.find((message) => message.role === "tool_result");
    assert.deepEqual(stored.content, [{ type: "text", text: "found weather" }]);
    const figure = report.sessions[0].figures.calls.find((entry) => entry.id === call.id);
    assert.ok(figure.headroom_ms >= LEAD_MS, `the stored headroom: ${figure.headroom_ms} ms`);
  });
}

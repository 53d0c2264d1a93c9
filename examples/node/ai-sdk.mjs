// The Vercel AI SDK example: `streamText`'s own loop, with headstart's early starts and durable transcript. Two
// read-only lookups start while the model still streams; a write waits for the end of the response, as the AI SDK
// runs it. Without a key, a simulated model streams (a word every 25 ms); with OPENAI_API_KEY, OpenAI's.
//
//   npm install && node ai-sdk.mjs [store.db]
import { stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { withHeadstart } from "headstart/ai";
import { inspect } from "headstart";

const store = process.argv[2] ?? "ai-sdk.db";
const t0 = performance.now();
const at = () => `${String(Math.round(performance.now() - t0)).padStart(5)} ms`;
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

/** A tool that takes `ms` to answer, and says when it starts and ends. */
const slowTool = (name, ms) =>
  tool({
    description: `looks up the ${name.split("_")[1]} of a city`,
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      console.log(`${at()}  ${name}(${city}) starts`);
      await sleep(ms);
      console.log(`${at()}  ${name}(${city}) ends`);
      return `${name} for ${city}: fine`;
    },
  });
const tools = {
  lookup_weather: slowTool("lookup_weather", 400),
  lookup_calendar: slowTool("lookup_calendar", 500),
  save_notes: tool({
    description: "saves notes",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => (console.log(`${at()}  save_notes(${city}) runs`), "saved"),
  }),
};

/** The simulated model: a sentence, two lookups, most of a second more of text, a write; then the answer. */
function simulatedModel() {
  const usage = { inputTokens: { total: 30, noCache: 30 }, outputTokens: { total: 60, text: 60 } };
  const text = (id, words) => [{ type: "text-start", id }, ...words.split(" ").map((word) => ({ type: "text-delta", id, delta: `${word} ` })), { type: "text-end", id }];
  const call = (id, name, input) => [
    { type: "tool-input-start", id, toolName: name },
    { type: "tool-input-delta", id, delta: JSON.stringify(input) },
    { type: "tool-input-end", id },
    { type: "tool-call", toolCallId: id, toolName: name, input: JSON.stringify(input) },
  ];
  const responses = [
    [
      ...text("t0", "Let me check the weather and the calendar for Lisbon."),
      ...call("call_weather", "lookup_weather", { city: "Lisbon" }),
      ...call("call_calendar", "lookup_calendar", { city: "Lisbon" }),
      ...text("t1", "While those run, here is what I know about Lisbon in spring: mild days, cool evenings, crowds at the viewpoints."),
      ...call("call_notes", "save_notes", { city: "Lisbon" }),
      { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage },
    ],
    [...text("t2", "Spring in Lisbon looks good: the weather is fine and the calendar is free."), { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage }],
  ];
  let next = 0;
  return new MockLanguageModelV4({
    provider: "simulated",
    modelId: "scripted",
    doStream: async () => {
      const parts = responses[next++];
      return {
        stream: new ReadableStream({
          async start(stream) {
            for (const part of parts) {
              await sleep(part.type === "text-delta" ? 25 : 1);
              stream.enqueue(part);
            }
            console.log(`${at()}  the model's response ends`);
            stream.close();
          },
        }),
      };
    },
  });
}

async function openaiModel() {
  const { openai } = await import("@ai-sdk/openai");
  return openai(process.env.OPENAI_MODEL ?? "gpt-4.1-mini");
}

const model = process.env.OPENAI_API_KEY ? await openaiModel() : simulatedModel();
// The three lines that change: the model and tools go through withHeadstart, and its model and tools go to streamText.
const headstarted = await withHeadstart({ model, tools, store, early: ["lookup_weather", "lookup_calendar"] });
const result = streamText({
  model: headstarted.model,
  tools: headstarted.tools,
  stopWhen: stepCountIs(2),
  prompt: "What is Lisbon like this spring? Check the weather and the calendar, and save notes.",
});
console.log(`${at()}  the model starts streaming`);
for await (const part of result.fullStream) if (part.type === "error") console.log(`${at()}  error: ${part.error}`);
console.log(`\nanswer: ${(await result.text).trim()}`);

const report = await inspect(store, headstarted.sessionId);
const [session] = report.sessions;
console.log(`transcript: ${session.messages.length} messages in ${store}, session ${session.id} (headstart inspect ${store} --session ${session.id})`);
for (const response of session.figures.responses) {
  if (response.calls === 0) continue;
  const saved = response.batching_round_ms - response.tool_round_ms;
  console.log(
    `response ${response.request}: the tools took ${response.tool_round_ms.toFixed(0)} ms after the stream ended; ` +
      `run after it, as the AI SDK runs them, ${response.batching_round_ms.toFixed(0)} ms: ${saved.toFixed(0)} ms saved`,
  );
}

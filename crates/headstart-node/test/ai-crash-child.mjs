// The process the AI SDK crash test kills: a chat whose two early tools (`charge`, and `lookup`, idempotent) record
// their effect in a file outside the process and never finish, while the model streams on forever.
import { appendFileSync } from "node:fs";
import { streamText, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { withHeadstart } from "headstart/ai";
import { partsOf } from "./ai-scripts.mjs";

const [store, effects] = process.argv.slice(2);
const effect = (name) => async () => {
  appendFileSync(effects, `${name}\n`);
  return new Promise(() => {});
};
const tools = {
  charge: tool({ inputSchema: z.object({ q: z.string() }), execute: effect("charge") }),
  lookup: tool({ inputSchema: z.object({ q: z.string() }), execute: effect("lookup") }),
};
const parts = partsOf({
  blocks: [
    { call: { id: "c_charge", name: "charge", input: JSON.stringify({ q: "10 EUR" }) } },
    { call: { id: "c_lookup", name: "lookup", input: JSON.stringify({ q: "acct" }) } },
    { text: "still thinking" },
  ],
  finish: "tool-calls",
}).slice(0, -2);
// The model never finishes: the process is killed while it streams and the tools run.
const model = new MockLanguageModelV4({
  doStream: async () => ({ stream: new ReadableStream({ start(stream) { for (const part of parts) stream.enqueue(part); } }) }),
});
const chat = await withHeadstart({ model, tools, store, early: ["charge", "lookup"], idempotent: ["lookup"] });
console.log(`session ${chat.sessionId}`);
for await (const _ of streamText({ model: chat.model, tools: chat.tools, prompt: "pay and check" }).fullStream);

// A process whose chat stops at an approval (`stop`), or goes on with the app's approval in a next call (`approve`),
// then ends by itself: it says what the AI SDK asked for, how often the tool ran, and the chat's session.
import { streamText, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { withHeadstart } from "headstart/ai";
import { partsOf } from "./ai-scripts.mjs";

const [store, mode] = process.argv.slice(2);
let ran = 0;
const tools = {
  charge: tool({ inputSchema: z.object({ q: z.string() }), needsApproval: true, execute: async () => (ran++, "charged 10") }),
};
const steps = [
  { blocks: [{ call: { id: "c1", name: "charge", input: JSON.stringify({ q: "10" }) } }], finish: "tool-calls" },
  { blocks: [{ text: "done" }], finish: "stop" },
];
let next = 0;
const model = new MockLanguageModelV4({ doStream: async () => ({ stream: ReadableStream.from(partsOf(steps[next++])) }) });
const chat = await withHeadstart({ model, tools, store });
const first = streamText({ model: chat.model, tools: chat.tools, prompt: "pay", stopWhen: stepCountIs(2) });
const requests = (await first.steps).at(-1).content.filter((part) => part.type === "tool-approval-request");
if (mode === "approve") {
  const answers = requests.map((part) => ({ type: "tool-approval-response", approvalId: part.approvalId, approved: true }));
  const messages = [{ role: "user", content: "pay" }, ...(await first.response).messages, { role: "tool", content: answers }];
  await streamText({ model: chat.model, tools: chat.tools, messages, stopWhen: stepCountIs(2) }).text;
}
console.log(JSON.stringify({ requested: requests.map((part) => part.toolCall.toolCallId), ran, sessionId: chat.sessionId }));

// A pi agent over a real provider, on headstart's drop-in: Anthropic's Messages API through pi-ai's own
// `streamSimple`. The only change from a pi-agent-core agent is the import of `Agent` (and `store`).
//
//   ANTHROPIC_API_KEY=... node pi-agent.mjs "What is the weather in Lisbon and in Porto?"
//   (ANTHROPIC_BASE_URL and HEADSTART_MODEL point it at another server and model.)
//
// Anthropic's stream closes each tool call when it is complete, and pi-ai passes that on as `toolcall_end`, so an
// early tool starts while the model writes on. (pi-ai's Chat Completions provider closes every call only when the
// response ends: through it, early tools start at the end, as pi's own do. OpenAI's Responses API closes each call.)
import { Type } from "typebox";
import { streamSimple } from "@earendil-works/pi-ai/compat";
import { Agent } from "headstart/pi"; // was: import { Agent } from "@earendil-works/pi-agent-core";

const apiKey = process.env.ANTHROPIC_API_KEY;
if (!apiKey) {
  console.error("set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another server)");
  process.exit(2);
}
const model = {
  id: process.env.HEADSTART_MODEL ?? "claude-sonnet-4-5",
  name: "chat model",
  api: "anthropic-messages",
  provider: "anthropic",
  baseUrl: process.env.ANTHROPIC_BASE_URL ?? "https://api.anthropic.com",
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 128000,
  maxTokens: 4096,
};
const started = performance.now();
const weather = {
  name: "get_weather",
  label: "weather",
  description: "The current weather of a city.",
  parameters: Type.Object({ city: Type.String() }),
  executionMode: "early", // starts at its call's toolcall_end, while the model writes on
  replay: "safe", // a read: recovery may run it again
  execute: async (_id, { city }) => {
    console.log(`${Math.round(performance.now() - started)} ms: get_weather(${city}) starts`);
    return { content: [{ type: "text", text: `${city}: 18 °C, sunny` }], details: {} };
  },
};
const agent = new Agent({
  initialState: { systemPrompt: "Answer briefly. Use the tools.", model, tools: [weather] },
  streamFn: streamSimple,
  getApiKey: () => apiKey,
  store: process.env.HEADSTART_STORE ?? "pi-agent.db",
});
agent.subscribe((event) => {
  if (event.type === "message_end" && event.message.role === "assistant") {
    const text = event.message.content.filter((block) => block.type === "text").map((block) => block.text).join("");
    console.log(`${Math.round(performance.now() - started)} ms: the response ends (${event.message.stopReason})${text ? `: ${text}` : ""}`);
    if (event.message.errorMessage) console.log(`error: ${event.message.errorMessage}`);
  }
});
await agent.prompt(process.argv[2] ?? "What is the weather in Lisbon and in Porto?");
console.log(`transcript: session ${agent.storeSessionId} in ${process.env.HEADSTART_STORE ?? "pi-agent.db"}`);

// The package's types as a TypeScript user meets them: checked by `tsc --noEmit` (types.test.mjs), never run.
import { Agent, agentLoop, agentLoopContinue, resume, type HeadstartLoopConfig, type HeadstartTool } from "headstart/pi";
import { Engine, tool, inspect, type CallFigures, type EngineEvent } from "headstart";
import { MODEL, scriptedStreamFn, sleep } from "headstart/simulated";
import type { AgentMessage } from "@earendil-works/pi-agent-core";
import { Type } from "typebox";

const lookup: HeadstartTool = {
  name: "lookup",
  label: "lookup",
  description: "reads",
  parameters: Type.Object({ q: Type.String() }),
  executionMode: "early",
  replay: "safe",
  execute: async (_id, _params) => ({ content: [{ type: "text", text: "found" }], details: {} }),
};

const streamFn = scriptedStreamFn([{ blocks: [{ text: "hi" }], stop: "stop" }], { pace: () => sleep(1) });
const agent = new Agent({ initialState: { model: MODEL, tools: [] }, streamFn, store: "agent.db", durability: "normal" });
await agent.prompt("hello");
const sessionId: string | undefined = agent.storeSessionId;

const config: HeadstartLoopConfig = {
  model: MODEL,
  convertToLlm: (messages) => messages.filter((message): message is Extract<AgentMessage, { role: "user" }> => message.role === "user"),
  store: "agent.db",
  onStoreSession: (id: string) => void id,
  earlyExecution: true,
};
const user: AgentMessage = { role: "user", content: [{ type: "text", text: "go" }], timestamp: 0 };
for await (const event of agentLoop([user], { messages: [], tools: [] }, config, undefined, streamFn)) {
  if (event.type === "tool_execution_start") console.log(event.toolCallId);
}
const { messages, recovered } = await resume({ store: "agent.db", storeSessionId: sessionId ?? "", tools: [lookup] });
const more = agentLoopContinue({ messages, tools: [] }, { ...config, storeSessionId: sessionId }, undefined, streamFn);
const newMessages: AgentMessage[] = await more.result();

const search = tool<{ query: string }>({
  name: "search",
  parameters: { type: "object", properties: { query: { type: "string" } } },
  early: true,
  execute: async ({ query }, { signal, callId, onUpdate }) => {
    onUpdate("half way");
    return signal.aborted ? `stopped ${callId}` : `found ${query}`;
  },
});
const engine = new Engine("agent.db", { tools: [search], afterToolCall: ({ result }) => ({ content: result.content }) });
const run = engine.wrap(await engine.createSession(), [], { format: "pi", signal: AbortSignal.timeout(1000) });
for await (const event of run) {
  const seen: EngineEvent = event;
  void seen;
}
const calls: CallFigures[] = await run.calls();
const report = await inspect("agent.db");
console.log(recovered.length, newMessages.length, calls.map((call) => call.headroomMs), report.sessions.length);

// headstart/ai: the AI SDK's own types go in and come out.
import { streamText, tool as aiTool, type ModelMessage } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { withHeadstart, resume as resumeChat } from "headstart/ai";

const aiTools = { search: aiTool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }: { q: string }) => `found ${q}` }) };
const chat = await withHeadstart({ model: new MockLanguageModelV4(), tools: aiTools, store: "agent.db", early: ["search"], idempotent: ["search"] });
const chatId: string = chat.sessionId;
streamText({ model: chat.model, tools: chat.tools, prompt: "hi" });
const resumedChat: { messages: ModelMessage[] } = await resumeChat({ store: "agent.db", sessionId: chatId, tools: aiTools, policy: "fail" });
void resumedChat;

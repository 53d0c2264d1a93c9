// The process the crash test kills: a pi agent loop on the drop-in, with a SQLite store, whose two early tools
// record their effect in a file outside the process and then never finish, while the model streams on forever.
import { appendFileSync } from "node:fs";
import { Type } from "typebox";
import { agentLoop } from "headstart/pi";
import { scriptedStream, MODEL } from "headstart/simulated";

const [store, effects] = process.argv.slice(2);
const effect = (name) => (id) => {
  appendFileSync(effects, `${name} ${id}\n`);
  return new Promise(() => {});
};
const parameters = Type.Object({ text: Type.String() });
const tools = [
  { name: "charge", label: "charge", description: "charges a card", parameters, executionMode: "early", execute: effect("charge") },
  { name: "lookup", label: "lookup", description: "reads", parameters, executionMode: "early", replay: "safe", execute: effect("lookup") },
];
const streamFn = () =>
  scriptedStream(
    {
      blocks: [
        { call: { id: "call_charge", name: "charge", arguments: { text: "10 EUR" } } },
        { call: { id: "call_lookup", name: "lookup", arguments: { text: "balance" } } },
        { text: "still thinking" },
      ],
      stop: "toolUse",
    },
    // The model never finishes: the process is killed while it streams and the tools run.
    { gate: (call) => (call.name === "lookup" ? new Promise(() => {}) : undefined) },
  );
const user = { role: "user", content: [{ type: "text", text: "pay and check" }], timestamp: 0 };
const config = {
  model: MODEL,
  convertToLlm: (messages) => messages,
  store,
  onStoreSession: (id) => console.log(`session ${id}`),
};
for await (const event of agentLoop([user], { systemPrompt: "", messages: [], tools }, config, undefined, streamFn)) {
  if (event.type === "tool_execution_start") console.log(`started ${event.toolCallId}`);
}

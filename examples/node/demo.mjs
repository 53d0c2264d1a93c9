// The TypeScript demo: a pi agent on headstart's drop-in, a simulated model (no key), two early tools and one that
// waits for the end of the response; the transcript in SQLite, and the time saved against pi's own loop.
//
//   npm install && node demo.mjs [store.db]
import { Type } from "typebox";
import { Agent } from "headstart/pi";
import { inspect } from "headstart";
import { MODEL, scriptedStreamFn, sleep } from "headstart/simulated";

const store = process.argv[2] ?? "demo.db";
const t0 = performance.now();
const at = () => `${String(Math.round(performance.now() - t0)).padStart(5)} ms`;
const city = Type.Object({ text: Type.String({ description: "a city" }) });

/** A tool that takes `ms` to answer, and says when it starts and ends. */
const slowTool = (name, ms, extra) => ({
  name,
  label: name,
  description: `looks up the ${name.split("_")[1]} of a city`,
  parameters: city,
  ...extra,
  execute: async (_id, { text }) => {
    console.log(`${at()}  ${name}(${text}) starts`);
    await sleep(ms);
    console.log(`${at()}  ${name}(${text}) ends`);
    return { content: [{ type: "text", text: `${name} for ${text}: fine` }], details: {} };
  },
});

// The model writes a sentence, calls two lookups early in its answer, and goes on writing for most of a second.
const words = (text) => ({ text });
const streamFn = scriptedStreamFn(
  [
    {
      blocks: [
        words("Let me check the weather and the calendar for Lisbon."),
        { call: { id: "call_weather", name: "lookup_weather", arguments: { text: "Lisbon" } } },
        { call: { id: "call_calendar", name: "lookup_calendar", arguments: { text: "Lisbon" } } },
        words("While those run, here is what I know about Lisbon in spring: mild days, cool evenings, crowds at the viewpoints."),
        { call: { id: "call_notes", name: "save_notes", arguments: { text: "Lisbon trip" } } },
      ],
      stop: "toolUse",
    },
    { blocks: [words("Spring in Lisbon looks good: the weather is fine and the calendar is free.")], stop: "stop" },
  ],
  // About a word every 25 ms, as a model streams.
  { pace: () => sleep(25) },
);

const agent = new Agent({
  initialState: {
    model: MODEL,
    tools: [
      slowTool("lookup_weather", 400, { executionMode: "early" }),
      slowTool("lookup_calendar", 500, { executionMode: "early" }),
      slowTool("save_notes", 100),
    ],
  },
  streamFn,
  store,
});
agent.subscribe((event) => {
  if (event.type === "message_start" && event.message.role === "assistant") console.log(`${at()}  the model starts streaming`);
  if (event.type === "message_end" && event.message.role === "assistant") console.log(`${at()}  the model's response ends`);
});
await agent.prompt("What is Lisbon like this spring?");

const report = await inspect(store, agent.storeSessionId);
const [session] = report.sessions;
console.log(`\ntranscript: ${session.messages.length} messages in ${store}, session ${session.id}`);
for (const response of session.figures.responses) {
  if (response.calls === 0) continue;
  const saved = response.batching_round_ms - response.tool_round_ms;
  console.log(
    `response ${response.request}: the tools took ${response.tool_round_ms.toFixed(0)} ms after the stream ended; ` +
      `run after it, as pi-agent-core runs them, ${response.batching_round_ms.toFixed(0)} ms: ${saved.toFixed(0)} ms saved`,
  );
}

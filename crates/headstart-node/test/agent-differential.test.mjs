// The differential test at the level of pi's `Agent`: generated scripts through pi-agent-core 1.6.0's `Agent` and
// the drop-in's, with what an app does around the loop: tools that send updates after they settle, parallel calls
// whose updates interleave, steering and follow-up messages queued from listeners, `prepareNextTurn`, `finishTurn`,
// and `afterToolCall` ending the run with `terminate`. Each script runs with no tool early (the events and messages
// must be the same) and with the tools early (the same messages, and each call's own events).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Type } from "typebox";
import * as pi from "@earendil-works/pi-agent-core";
import * as drop from "headstart/pi";
import { MODEL, scriptedStreamFn, ticks } from "headstart/simulated";
import { assertAgree, random } from "./compare.mjs";

const SEED = 20261204;
const SCRIPTS = 72;
const TEXT = Type.Object({ text: Type.String() });

/** The tools: an update after the result is ignored, and parallel calls' updates interleave. */
function makeTools(early) {
  const tool = (name, execute) => ({
    name,
    label: name,
    description: `the ${name} tool`,
    parameters: TEXT,
    execute,
    ...(early ? { executionMode: "early" } : {}),
  });
  return [
    tool("echo", async (_id, { text }) => {
      await ticks(2);
      return { content: [{ type: "text", text: `echo ${text}` }], details: {} };
    }),
    tool("late_update", async (_id, { text }, _signal, onUpdate) => {
      onUpdate?.({ content: [{ type: "text", text: "working" }], details: {} });
      // After the result: pi ignores it, and so must the drop-in.
      setImmediate(() => onUpdate?.({ content: [{ type: "text", text: "too late" }], details: {} }));
      return { content: [{ type: "text", text: `done ${text}` }], details: {} };
    }),
    tool("chatty", async (id, { text }, _signal, onUpdate) => {
      for (let i = 0; i < 3; i++) {
        onUpdate?.({ content: [{ type: "text", text: `${text} ${i}` }], details: { i } });
        await ticks(1);
      }
      return { content: [{ type: "text", text: `chatty ${text}` }], details: { id } };
    }),
  ];
}

/** One generated script: the turns, and what the app does around them. */
function generate(rng, index) {
  let callNo = 0;
  const call = (name) => ({ call: { id: `call_${index}_${callNo++}`, name, arguments: { text: `w${rng.int(50)}` } } });
  const calls = () => {
    const blocks = rng.chance(0.4) ? [{ text: "let me see" }] : [];
    const count = 1 + rng.int(3);
    for (let i = 0; i < count; i++) blocks.push(call(rng.pick(["echo", "late_update", "chatty"])));
    return { blocks, stop: "toolUse" };
  };
  const turns = [calls()];
  if (rng.chance(0.5)) turns.push(calls());
  turns.push({ blocks: [{ text: "all done" }], stop: "stop" });
  if (rng.chance(0.5)) turns.push({ blocks: [{ text: "answering the follow-up" }], stop: "stop" });
  return {
    turns,
    toolExecution: rng.chance(0.25) ? "sequential" : "parallel",
    // A listener queues a steering message at the first call's end, and a follow-up at the first response's end.
    steerAtToolEnd: rng.chance(0.5),
    followUpAtMessageEnd: rng.chance(0.5),
    // `prepareNextTurn` adds a note before the second request; `finishTurn` ends the run after turn `endAfter`.
    prepareNote: rng.chance(0.5),
    endAfter: rng.chance(0.3) ? 1 + rng.int(2) : undefined,
    // `afterToolCall` asks every call of the batch to terminate.
    terminate: rng.chance(0.2),
  };
}

const note = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: 0 });

/** Runs `script` on `module`'s `Agent`; its events and final messages. */
async function runAgent(module, script, early) {
  let finished = 0;
  let prepared = 0;
  const agent = new module.Agent({
    initialState: { model: MODEL, tools: makeTools(early), systemPrompt: "be brief" },
    streamFn: scriptedStreamFn(script.turns),
    toolExecution: script.toolExecution,
    afterToolCall: async () => (script.terminate ? { terminate: true } : undefined),
    prepareNextTurn: () => (script.prepareNote && prepared++ === 0 ? { messages: [note("a note between turns")] } : undefined),
    finishTurn: () => (++finished === script.endAfter ? { action: "end" } : undefined),
  });
  const events = [];
  let steered = false;
  let followed = false;
  agent.subscribe((event) => {
    events.push(event);
    if (script.steerAtToolEnd && !steered && event.type === "tool_execution_end") {
      steered = true;
      agent.steer(note("steer: look again"));
    }
    if (script.followUpAtMessageEnd && !followed && event.type === "message_end" && event.message.role === "assistant") {
      followed = true;
      agent.followUp(note("one more thing"));
    }
  });
  await agent.prompt("hello");
  await agent.waitForIdle();
  return { events, messages: agent.state.messages };
}

const scripts = [];
{
  const rng = random(SEED);
  for (let i = 0; i < SCRIPTS; i++) scripts.push(generate(rng, i));
}

for (const early of [false, true]) {
  test(`pi's Agent and the drop-in's agree on ${SCRIPTS} scripts of updates, queues and turn hooks, tools ${early ? "early" : "not early"}`, async () => {
    for (const [index, script] of scripts.entries()) {
      const expected = await runAgent(pi, script, false);
      const actual = await runAgent(drop, script, early);
      assertAgree(assert, actual, expected, `script ${index}`, { early });
    }
    const count = (key) => scripts.filter((script) => script[key]).length;
    console.log(
      `compared ${SCRIPTS} scripts: steering ${count("steerAtToolEnd")}, follow-up ${count("followUpAtMessageEnd")}, ` +
        `prepareNextTurn ${count("prepareNote")}, finishTurn end ${count("endAfter")}, terminate ${count("terminate")}`,
    );
  });
}

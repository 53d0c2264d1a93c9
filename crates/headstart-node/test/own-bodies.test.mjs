// Each loop and each `resume` runs the tool bodies its own caller gave, whatever other loops of the process run with
// the same tool specs: an engine's asks go to the loop (or the recovery) that opened it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Type } from "typebox";
import { Agent, resume } from "headstart/pi";
import { inspect } from "headstart";
import { MODEL, scriptedStreamFn } from "headstart/simulated";
import { crashedSession } from "./crashing.mjs";

const parameters = Type.Object({ text: Type.String() });

/** The crash child's two tools, with the same specs, and bodies that say whose they are. */
function tools(owner, runs) {
  const body = (name) => async (id) => {
    runs.push(`${owner} ${name} ${id}`);
    return { content: [{ type: "text", text: `${name} by ${owner}` }], details: {} };
  };
  return [
    { name: "charge", label: "charge", description: "charges a card", parameters, executionMode: "early", execute: body("charge") },
    { name: "lookup", label: "lookup", description: "reads", parameters, executionMode: "early", replay: "safe", execute: body("lookup") },
  ];
}

test("two loops and a resume in one process, the same tool specs and different bodies: each call runs its caller's body", async (t) => {
  const { store, session: crashed } = await crashedSession(t);
  const runs = [];
  const agent = (owner, id) =>
    new Agent({
      initialState: { model: MODEL, tools: tools(owner, runs) },
      streamFn: scriptedStreamFn([
        { blocks: [{ call: { id, name: "lookup", arguments: { text: owner } } }], stop: "toolUse" },
        { blocks: [{ text: "done" }], stop: "stop" },
      ]),
      store,
    });
  const first = agent("first", "call_first");
  const second = agent("second", "call_second");
  await Promise.all([first.prompt("look it up"), second.prompt("look it up too")]);
  // A recovery in the same process, with the same specs and its own bodies: the interrupted idempotent lookup of
  // the crash runs again with them.
  const { recovered } = await resume({ store, storeSessionId: crashed, tools: tools("resume", runs), policy: "rerun_idempotent" });
  assert.deepEqual(recovered.map((call) => call.call_id).sort(), ["call_charge", "call_lookup"]);
  assert.deepEqual(runs.sort(), ["first lookup call_first", "resume lookup call_lookup", "second lookup call_second"]);
  const resultOf = async (session, id) => {
    const report = await inspect(store, session);
    return report.sessions[0].messages.find((stored) => stored.message.tool_call_id === id)?.message.content[0].text;
  };
  assert.equal(await resultOf(first.storeSessionId, "call_first"), "lookup by first");
  assert.equal(await resultOf(second.storeSessionId, "call_second"), "lookup by second");
  assert.equal(await resultOf(crashed, "call_lookup"), "lookup by resume");
});

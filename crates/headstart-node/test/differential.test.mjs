// The differential test: generated scripts through pi-agent-core 1.6.0's own loop and through headstart's drop-in,
// compared message for message and event for event. Twice per script: with no tool early (everything must be the
// same), and with some tools early (the same, except that an early call's events come sooner).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Type } from "typebox";
import * as pi from "@earendil-works/pi-agent-core";
import * as drop from "headstart/pi";
import { scriptedStreamFn, ticks, MODEL } from "headstart/simulated";

/** A small seeded PRNG (mulberry32): the same seed, the same scripts. */
export function random(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (items) => items[Math.floor(next() * items.length)],
    chance: (p) => next() < p,
  };
}

const SEED = 20261203;
const SCRIPTS = 220;
const GATE_MS = 10_000;
const TEXT = Type.Object({ text: Type.String() });

/** The scripted tools; those named in `early` are marked early (ignored by pi's own loop). */
function makeTools(early) {
  const mark = (name, tool) => (early.has(name) ? { ...tool, executionMode: "early" } : tool);
  const tool = (name, execute, extra = {}) =>
    mark(name, { name, label: name, description: `the ${name} tool`, parameters: TEXT, execute, ...extra });
  return [
    tool("echo", async (_id, { text }) => {
      await ticks(2);
      return { content: [{ type: "text", text: `echo ${text}` }], details: { length: text.length } };
    }),
    tool("fail", async () => {
      await ticks(1);
      throw new Error("boom");
    }),
    tool("updater", async (_id, { text }, _signal, onUpdate) => {
      onUpdate?.({ content: [{ type: "text", text: "half" }], details: {} });
      await ticks(1);
      onUpdate?.({ content: [{ type: "text", text: "most" }], details: {} });
      return { content: [{ type: "text", text: `updated ${text}` }], details: {} };
    }),
    tool("stop", async () => ({ content: [{ type: "text", text: "stopping" }], details: {}, terminate: true })),
    tool(
      "serial",
      async (_id, { text }) => {
        await ticks(3);
        return { content: [{ type: "text", text: `serial ${text}` }], details: {} };
      },
      { executionMode: early.has("serial") ? "early" : "sequential" },
    ),
  ];
}

const NAMES = ["echo", "fail", "updater", "stop", "serial", "nope"];

/** One generated script: turns, the loop's settings, hooks, steering and follow-up messages. */
function generate(rng, index) {
  const kinds = ["text", "calls", "calls", "calls", "blocked", "override", "unknown", "invalid", "length", "abort", "error", "steer", "follow", "terminate", "sequential"];
  const kind = kinds[index % kinds.length];
  let callNo = 0;
  const call = (name, text) => ({ call: { id: `call_${index}_${callNo++}`, name, arguments: text === undefined ? {} : { text } } });
  const someCalls = (names = ["echo", "updater", "fail", "serial"]) => {
    const blocks = [];
    if (rng.chance(0.5)) blocks.push({ text: "let me look" });
    const count = 1 + rng.int(3);
    for (let i = 0; i < count; i++) blocks.push(call(rng.pick(names), `w${rng.int(100)}`));
    if (rng.chance(0.3)) blocks.push({ text: "and more" });
    return blocks;
  };
  const turns = [];
  const script = { kind, turns, toolExecution: rng.chance(0.3) ? "sequential" : "parallel", steer: 0, follow: 0 };
  switch (kind) {
    case "text":
      turns.push({ blocks: [{ text: "just words, no tools" }], stop: "stop" });
      break;
    case "blocked":
      turns.push({ blocks: [call("echo", "blocked"), call("echo", "fine")], stop: "toolUse" });
      break;
    case "override":
      turns.push({ blocks: [call("echo", "override"), call("updater", "x")], stop: "toolUse" });
      break;
    case "unknown":
      turns.push({ blocks: [call("nope", "x"), call("echo", "y")], stop: "toolUse" });
      break;
    case "invalid":
      turns.push({ blocks: [{ call: { id: `call_${index}_bad`, name: "echo", arguments: { text: 5, extra: [1] } } }, call("echo", "ok")], stop: "toolUse" });
      break;
    case "length":
      turns.push({ blocks: [call("echo", "cut"), { text: "and then" }], stop: "length" });
      break;
    case "abort":
      turns.push({ blocks: [{ text: "I will call a tool soon" }, call("echo", "never")], stop: "abort", abortAt: 2 + rng.int(3) });
      break;
    case "error":
      turns.push({ blocks: [{ text: "partial answer" }], stop: "error" });
      break;
    case "steer":
      script.steer = 1;
      turns.push({ blocks: someCalls(["echo", "updater"]), stop: "toolUse" });
      break;
    case "follow":
      script.follow = 1;
      turns.push({ blocks: [{ text: "first answer" }], stop: "stop" });
      break;
    case "terminate":
      turns.push({ blocks: [call("stop", "a"), ...(rng.chance(0.5) ? [call("stop", "b")] : [call("echo", "c")])], stop: "toolUse" });
      break;
    case "sequential":
      script.toolExecution = "parallel";
      turns.push({ blocks: [call("echo", "a"), call("serial", "b"), call("updater", "c")], stop: "toolUse" });
      break;
    default:
      turns.push({ blocks: someCalls(), stop: "toolUse" });
      if (rng.chance(0.5)) turns.push({ blocks: someCalls(), stop: "toolUse" });
  }
  turns.push({ blocks: [{ text: "all done" }], stop: "stop" });
  return script;
}

/** Runs `script` through `loop` (pi's module or the drop-in); the events and messages it produced. */
async function run(loop, script, early, extraConfig = {}) {
  const events = [];
  const controller = new AbortController();
  // With early tools, the stream waits after an early tool's seal until its call starts, where the contract says it
  // starts at once: when every call before it in the response is early too (a call that waits for the end of the
  // response holds back the early ones after it). The model then streams on while the tool runs.
  const started = new Map();
  const startOf = (id) => {
    if (!started.has(id)) {
      let resolve;
      started.set(id, { promise: new Promise((done) => (resolve = done)), resolve });
    }
    return started.get(id);
  };
  const gate = (toolCall, before) => {
    if (!early.has(toolCall.name) || !before.every((call) => early.has(call.name))) return undefined;
    gated.push(toolCall.id);
    // A bound, not a timing: a call that never starts fails the assertion below instead of hanging the suite.
    return Promise.race([startOf(toolCall.id).promise, new Promise((done) => setTimeout(done, GATE_MS).unref())]);
  };
  const gated = [];
  const streamFn = scriptedStreamFn(script.turns, { controller, gate });
  let steer = script.steer;
  let follow = script.follow;
  const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: 0 });
  const config = {
    model: MODEL,
    convertToLlm: (messages) => messages.filter((m) => ["user", "assistant", "toolResult", "system"].includes(m.role)),
    toolExecution: script.toolExecution,
    beforeToolCall: async ({ args }) => (args?.text === "blocked" ? { block: true, reason: "not this one" } : undefined),
    afterToolCall: async ({ args }) =>
      args?.text === "override" ? { content: [{ type: "text", text: "overridden" }], details: { by: "hook" } } : undefined,
    getSteeringMessages: async () => (steer-- > 0 && streamFn.requests() > 0 ? [user("steered")] : []),
    getFollowUpMessages: async () => (follow-- > 0 ? [user("and one more thing")] : []),
    ...extraConfig,
  };
  const context = { systemPrompt: "", messages: [], tools: makeTools(early) };
  const stream = loop.agentLoop([user("hello")], context, config, controller.signal, streamFn);
  for await (const event of stream) {
    events.push(event);
    if (event.type === "tool_execution_start") startOf(event.toolCallId).resolve();
  }
  const messages = await stream.result();
  return { events, messages, gated };
}

/** A value without the fields that differ from run to run (times, durations). */
function strip(value) {
  if (Array.isArray(value)) return value.map(strip);
  if (value && typeof value === "object") {
    const out = {};
    for (const [key, field] of Object.entries(value)) {
      if (key === "timestamp" || key === "durationMs") continue;
      out[key] = strip(field);
    }
    return out;
  }
  return value;
}

function normalizeEvent(event) {
  if (event.type === "message_update") {
    return { type: event.type, update: event.assistantMessageEvent.type, message: strip(event.message) };
  }
  return strip(event);
}

const TOOL_EVENTS = new Set(["tool_execution_start", "tool_execution_update", "tool_execution_end"]);

/** Runs of consecutive tool ends and updates sorted by call: parallel calls end in the order they finish. */
function settleOrder(events) {
  const out = [];
  let run = [];
  const flush = () => {
    run.sort((a, b) => (a.toolCallId < b.toolCallId ? -1 : a.toolCallId > b.toolCallId ? 1 : 0));
    out.push(...run);
    run = [];
  };
  for (const event of events) {
    if (event.type === "tool_execution_end" || event.type === "tool_execution_update") run.push(event);
    else {
      flush();
      out.push(event);
    }
  }
  flush();
  return out;
}

function perCall(events) {
  const calls = new Map();
  for (const event of events.filter((e) => TOOL_EVENTS.has(e.type))) {
    if (!calls.has(event.toolCallId)) calls.set(event.toolCallId, []);
    calls.get(event.toolCallId).push(event);
  }
  return Object.fromEntries(calls);
}

/** The calls that started before the message_end of the response that holds them. */
function startedEarly(events) {
  const ids = [];
  let streaming = false;
  for (const event of events) {
    if (event.type === "message_start" && event.message.role === "assistant") streaming = true;
    if (event.type === "message_end" && event.message.role === "assistant") streaming = false;
    if (event.type === "tool_execution_start" && streaming) ids.push(event.toolCallId);
  }
  return ids;
}

const scripts = [];
{
  const rng = random(SEED);
  for (let i = 0; i < SCRIPTS; i++) scripts.push(generate(rng, i));
}

test(`pi-agent-core 1.6.0 and the drop-in agree on ${SCRIPTS} generated scripts, no tool early`, async () => {
  const kinds = new Map();
  for (const [index, script] of scripts.entries()) {
    const expected = await run(pi, script, new Set());
    const actual = await run(drop, script, new Set());
    const where = `script ${index} (${script.kind}, ${script.toolExecution})`;
    assert.deepEqual(strip(actual.messages), strip(expected.messages), `${where}: messages`);
    assert.deepEqual(
      settleOrder(actual.events.map(normalizeEvent)),
      settleOrder(expected.events.map(normalizeEvent)),
      `${where}: events`,
    );
    kinds.set(script.kind, (kinds.get(script.kind) ?? 0) + 1);
  }
  console.log(`compared ${SCRIPTS} scripts: ${[...kinds].map(([kind, n]) => `${kind} ${n}`).join(", ")}`);
});

test(`with early tools, the same messages, and the same events but for when an early call's come`, async () => {
  let compared = 0;
  let gatedCalls = 0;
  for (const [index, script] of scripts.entries()) {
    // Where an early call ran but pi would not run it (a response cut off by length, aborted or failed after the
    // call was sealed), the difference is deliberate and has tests of its own.
    if (["length", "abort", "error"].includes(script.kind)) continue;
    const early = new Set(["echo", "updater", "fail"].filter((_, i) => (index >> i) & 1));
    if (early.size === 0) early.add("echo");
    const expected = await run(pi, script, new Set());
    const actual = await run(drop, script, early);
    const where = `script ${index} (${script.kind}, ${script.toolExecution}, early ${[...early]})`;
    assert.deepEqual(strip(actual.messages), strip(expected.messages), `${where}: messages`);
    const others = (events) => events.map(normalizeEvent).filter((event) => !TOOL_EVENTS.has(event.type));
    assert.deepEqual(others(actual.events), others(expected.events), `${where}: the events other than the tools'`);
    assert.deepEqual(perCall(actual.events.map(normalizeEvent)), perCall(expected.events.map(normalizeEvent)), `${where}: each call's events`);
    compared++;
    // Every early call that nothing holds back starts while its response streams, before the events after it.
    const sooner = startedEarly(actual.events);
    assert.deepEqual(sooner.filter((id) => actual.gated.includes(id)), actual.gated, `${where}: early calls started while streaming`);
    gatedCalls += actual.gated.length;
  }
  console.log(`compared ${compared} scripts with early tools; ${gatedCalls} early calls started while their response streamed`);
  assert.ok(compared >= 150, `compared ${compared} scripts with early tools`);
  assert.ok(gatedCalls >= 100, `only ${gatedCalls} early calls were started while streaming`);
});

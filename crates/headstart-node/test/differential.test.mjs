// The differential test: generated scripts through pi-agent-core 1.6.0's own loop and through headstart's drop-in,
// compared message for message and event for event. Twice per script: with no tool early (everything must be the
// same), and with some tools early (the same, except that an early call's events come sooner). A second set of
// scripts leaves events out of its streams, as stream functions do (`done` alone, `start` and `done`, calls without
// `toolcall_start`, text without `text_start`, blocks only the final message holds), and hands them over as users'
// mock streams do (in microtasks, in one tick, through an `EventStream` subclass of their own).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as pi from "@earendil-works/pi-agent-core";
import * as drop from "headstart/pi";
import { DELIVERIES, OMISSIONS, assertAgree, random, run, startedEarly } from "./compare.mjs";

const SEED = 20261203;
const SCRIPTS = 220;
const OMITTING = 130;
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


/** `count` scripts from `seed`; the omission and delivery of each from `variant(index)`. */
function scriptsOf(seed, count, variant = () => ({})) {
  const rng = random(seed);
  return Array.from({ length: count }, (_, index) => ({ ...generate(rng, index), ...variant(index) }));
}

const scripts = scriptsOf(SEED, SCRIPTS);
const omissions = Object.keys(OMISSIONS).filter((omission) => omission !== "none");
const deliveries = Object.keys(DELIVERIES);
// Each omission meets each delivery: the periods (5 and 4) are coprime.
const omitting = scriptsOf(SEED + 1, OMITTING, (index) => ({
  omission: omissions[index % omissions.length],
  delivery: deliveries[index % deliveries.length],
}));

/** Where a script is, for a failure's message. */
const where = (index, script, early) =>
  `script ${index} (${script.kind}, ${script.toolExecution}${script.omission ? `, ${script.omission}, ${script.delivery}` : ""}` +
  `${early ? `, early ${[...early]}` : ""})`;

/** Compares every script with no tool early; the count of each kind. */
async function compareWithoutEarly(list) {
  const kinds = new Map();
  for (const [index, script] of list.entries()) {
    const expected = await run(pi, script, new Set());
    const actual = await run(drop, script, new Set());
    assertAgree(assert, actual, expected, where(index, script), { early: false });
    const key = script.omission ?? script.kind;
    kinds.set(key, (kinds.get(key) ?? 0) + 1);
  }
  return [...kinds].map(([kind, n]) => `${kind} ${n}`).join(", ");
}

/**
 * Compares every script with some tools early (but those where an early call ran that pi would not run: a response
 * cut off by length, aborted or failed after the call was sealed; that difference is deliberate and has tests of
 * its own). Returns how many were compared, and how many early calls started while their response streamed.
 */
async function compareWithEarly(list) {
  let compared = 0;
  let gatedCalls = 0;
  for (const [index, script] of list.entries()) {
    if (["length", "abort", "error"].includes(script.kind)) continue;
    const early = new Set(["echo", "updater", "fail"].filter((_, i) => (index >> i) & 1));
    if (early.size === 0) early.add("echo");
    const expected = await run(pi, script, new Set());
    const actual = await run(drop, script, early);
    assertAgree(assert, actual, expected, where(index, script, early), { early: true });
    compared++;
    // Every early call that nothing holds back starts while its response streams, before the events after it.
    const sooner = startedEarly(actual.events);
    assert.deepEqual(sooner.filter((id) => actual.gated.includes(id)), actual.gated, `${where(index, script, early)}: early calls started while streaming`);
    gatedCalls += actual.gated.length;
  }
  return { compared, gatedCalls };
}

test(`pi-agent-core 1.6.0 and the drop-in agree on ${SCRIPTS} generated scripts, no tool early`, async () => {
  console.log(`compared ${SCRIPTS} scripts: ${await compareWithoutEarly(scripts)}`);
});

test(`with early tools, the same messages, and the same events but for when an early call's come`, async () => {
  const { compared, gatedCalls } = await compareWithEarly(scripts);
  console.log(`compared ${compared} scripts with early tools; ${gatedCalls} early calls started while their response streamed`);
  assert.ok(compared >= 150, `compared ${compared} scripts with early tools`);
  assert.ok(gatedCalls >= 100, `only ${gatedCalls} early calls were started while streaming`);
});

test(`streams that leave events out, or hand them over as mock streams do: ${OMITTING} scripts agree, no tool early`, async () => {
  console.log(`compared ${OMITTING} scripts: ${await compareWithoutEarly(omitting)}`);
});

test(`streams that leave events out, with early tools: the same messages, and each call's events`, async () => {
  const { compared, gatedCalls } = await compareWithEarly(omitting);
  console.log(`compared ${compared} scripts with early tools; ${gatedCalls} early calls started while their response streamed`);
  assert.ok(compared >= 100, `compared ${compared} scripts with early tools`);
  assert.ok(gatedCalls >= 20, `only ${gatedCalls} early calls were started while streaming`);
});

// A response's final message is authoritative, as in pi-agent-core: streams that announce less than their final
// message holds, or something else, through the drop-in and through `engine.wrap(…, { format: "pi" })`. What pi does
// is the reference; where the stored transcript cannot follow (a call's arguments changed after its seal, a call the
// events announced and the final message dropped), the tests pin what it keeps (README, "Where it differs").
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { Type } from "typebox";
import { createAssistantMessageEventStream } from "@earendil-works/pi-ai";
import * as pi from "@earendil-works/pi-agent-core";
import * as drop from "headstart/pi";
import { Engine, inspect, tool as engineTool } from "headstart";
import { MODEL } from "headstart/simulated";
import { strip } from "./compare.mjs";

const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });
const store = () => join(mkdtempSync(join(root, "final-")), "t.db");
const USAGE = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: 0 });
const message = (content, stopReason) => ({ role: "assistant", content, api: "x", provider: "x", model: "x", usage: USAGE, stopReason, timestamp: 0 });
const toolCall = (id, name, args) => ({ type: "toolCall", id, name, arguments: args });

/**
 * A stream function whose first response pushes `events(final)`, each in a microtask (a promise among them is awaited
 * instead); later ones answer "ok".
 */
function streamOf(final, events = (done) => [done]) {
  let requests = 0;
  return () => {
    const stream = createAssistantMessageEventStream();
    const response = requests++ === 0 ? final : message([{ type: "text", text: "ok" }], "stop");
    const all = requests === 1 ? events({ type: "done", reason: response.stopReason, message: response }) : [{ type: "done", reason: "stop", message: response }];
    (async () => {
      for (const event of all) {
        await new Promise((resolve) => queueMicrotask(resolve));
        if (event instanceof Promise) await event;
        else stream.push(event);
      }
    })();
    return stream;
  };
}

function echo(runs, extra = {}) {
  return {
    name: "echo",
    label: "echo",
    description: "echo",
    parameters: Type.Object({ text: Type.String() }),
    ...extra,
    execute: async (id, { text }) => {
      runs.push({ id, text });
      return { content: [{ type: "text", text: `echo ${text}` }], details: {} };
    },
  };
}

/** Runs one loop; its events, new messages and store session. */
async function loop(module, streamFn, tools, config = {}) {
  const events = [];
  let session;
  const stream = module.agentLoop(
    [user("go")],
    { systemPrompt: "", messages: [], tools },
    { model: MODEL, convertToLlm: (messages) => messages, onStoreSession: (id) => (session = id), ...config },
    undefined,
    streamFn,
  );
  for await (const event of stream) events.push(event);
  return { events, messages: await stream.result(), session };
}

/** The stored messages of `session` in `location`. */
async function stored(location, session) {
  const report = await inspect(location, session);
  return report.sessions[0].messages.map((entry) => entry.message);
}

test("the issue's stream: `done` alone, its message holding the call; the tool runs as in pi", async () => {
  const final = message([toolCall("t1", "echo", { text: "hi" })], "toolUse");
  const piRuns = [];
  const dropRuns = [];
  const expected = await loop(pi, streamOf(final), [echo(piRuns)]);
  const location = store();
  const actual = await loop(drop, streamOf(final), [echo(dropRuns)], { store: location });
  assert.deepEqual(dropRuns, piRuns);
  assert.deepEqual(strip(actual.messages), strip(expected.messages));
  assert.deepEqual(strip(actual.events), strip(expected.events));
  const end = actual.events.find((event) => event.type === "tool_execution_end");
  assert.equal(end.isError, false);
  assert.deepEqual(end.result.content, [{ type: "text", text: "echo hi" }]);
  // The transcript holds the call the events never announced, and its result.
  const log = await stored(location, actual.session);
  assert.deepEqual(log.map((entry) => entry.role), ["user", "assistant", "tool_result", "assistant"]);
  assert.deepEqual(log[1].content, [{ type: "tool_call", id: "t1", name: "echo", arguments: { text: "hi" } }]);
  assert.deepEqual(log[2].content, [{ type: "text", text: "echo hi" }]);
});

test("calls with no id, no name or a repeated id run as pi runs them, and the loop ends", async () => {
  const final = message(
    [toolCall(undefined, "echo", { text: "no id" }), toolCall("t2", undefined, { text: "no name" }), toolCall("t2", "echo", { text: "again" })],
    "toolUse",
  );
  const unhandled = [];
  const onUnhandled = (error) => unhandled.push(error);
  process.on("unhandledRejection", onUnhandled);
  try {
    const piRuns = [];
    const dropRuns = [];
    const expected = await loop(pi, streamOf(final), [echo(piRuns)]);
    const actual = await loop(drop, streamOf(final), [echo(dropRuns)], { store: store() });
    // The same bodies run; parallel calls start in no promised order (the call with no id is not the engine's).
    const inOrder = (runs) => runs.map((run) => JSON.stringify(run)).sort();
    assert.deepEqual(inOrder(dropRuns), inOrder(piRuns));
    assert.deepEqual(strip(actual.messages), strip(expected.messages));
    const results = actual.messages.filter((entry) => entry.role === "toolResult");
    assert.deepEqual(results.map((result) => result.content[0].text), ["echo no id", "Tool undefined not found", "echo again"]);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
});

test("`done` with reason stop whose message holds calls: pi runs them, and so does the drop-in", async () => {
  const final = message([{ type: "text", text: "calling" }, toolCall("t1", "echo", { text: "x" })], "stop");
  const piRuns = [];
  const dropRuns = [];
  const expected = await loop(pi, streamOf(final), [echo(piRuns)]);
  const actual = await loop(drop, streamOf(final), [echo(dropRuns)], { store: store() });
  assert.deepEqual(dropRuns, [{ id: "t1", text: "x" }]);
  assert.deepEqual(dropRuns, piRuns);
  assert.deepEqual(strip(actual.messages), strip(expected.messages));
});

/**
 * A stream announcing `t1` with `sealed` arguments, whose final message gives it `final` ones; it ends once `hold`
 * has resolved.
 */
function changedAfterSeal(sealed, finalArgs, hold = Promise.resolve()) {
  const final = message([toolCall("t1", "echo", finalArgs)], "toolUse");
  return streamOf(final, (done) => {
    const partial = message([toolCall("t1", "echo", {})], "toolUse");
    return [
      { type: "start", partial },
      { type: "toolcall_start", contentIndex: 0, partial },
      { type: "toolcall_delta", contentIndex: 0, delta: JSON.stringify(sealed), partial },
      { type: "toolcall_end", contentIndex: 0, toolCall: toolCall("t1", "echo", sealed), partial },
      hold,
      done,
    ];
  });
}

test("arguments changed after the call's seal: a batch call runs with the final ones, as in pi; the transcript keeps the sealed ones", async () => {
  const piRuns = [];
  const dropRuns = [];
  const expected = await loop(pi, changedAfterSeal({ text: "sealed" }, { text: "final" }), [echo(piRuns)]);
  const location = store();
  const actual = await loop(drop, changedAfterSeal({ text: "sealed" }, { text: "final" }), [echo(dropRuns)], { store: location });
  assert.deepEqual(piRuns, [{ id: "t1", text: "final" }]);
  assert.deepEqual(dropRuns, piRuns);
  assert.deepEqual(strip(actual.messages), strip(expected.messages));
  const log = await stored(location, actual.session);
  assert.deepEqual(log[1].content[0].arguments, { text: "sealed" }, "the stored call is the one its seal committed");
});

test("arguments changed after an early call's seal: it already ran with the sealed ones, once", async () => {
  const runs = [];
  let started;
  const early = echo(runs, { executionMode: "early" });
  const tool = { ...early, execute: (...args) => (started(), early.execute(...args)) };
  // The stream ends once the call has started: it started early.
  const hold = new Promise((resolve) => (started = resolve));
  const { messages } = await loop(drop, changedAfterSeal({ text: "sealed" }, { text: "final" }, hold), [tool], { store: store() });
  assert.deepEqual(runs, [{ id: "t1", text: "sealed" }]);
  assert.equal(messages.find((entry) => entry.role === "toolResult").content[0].text, "echo sealed");
});

test("a call only the final message holds, before one the events announced, with no partial message: sequential, in pi's order", async () => {
  const final = message([toolCall("t1", "echo", { text: "first" }), toolCall("t2", "echo", { text: "second" })], "toolUse");
  // The mock keeps no partial message: nothing says what block 0 is until the end.
  const streamFn = () =>
    streamOf(final, (done) => [
      { type: "toolcall_start", contentIndex: 1, partial: message([], "toolUse") },
      { type: "toolcall_end", contentIndex: 1, toolCall: toolCall("t2", "echo", { text: "second" }), partial: message([], "toolUse") },
      done,
    ]);
  const piRuns = [];
  const dropRuns = [];
  const expected = await loop(pi, streamFn(), [echo(piRuns)], { toolExecution: "sequential" });
  const actual = await loop(drop, streamFn(), [echo(dropRuns, { executionMode: "early" })], { toolExecution: "sequential", store: store() });
  assert.deepEqual(dropRuns.map((run) => run.id), ["t1", "t2"]);
  assert.deepEqual(dropRuns, piRuns);
  assert.deepEqual(strip(actual.messages), strip(expected.messages));
});

test("a call the events announced and the final message dropped runs nowhere; the transcript keeps it, not executed", async () => {
  const final = message([{ type: "text", text: "never mind" }, toolCall("kept", "echo", { text: "y" })], "toolUse");
  const streamFn = () =>
    streamOf(final, (done) => {
      const partial = message([toolCall("gone", "echo", {})], "toolUse");
      return [
        { type: "start", partial },
        { type: "toolcall_start", contentIndex: 0, partial },
        { type: "toolcall_end", contentIndex: 0, toolCall: toolCall("gone", "echo", { text: "x" }), partial },
        done,
      ];
    });
  const piRuns = [];
  const dropRuns = [];
  const expected = await loop(pi, streamFn(), [echo(piRuns)]);
  const location = store();
  const actual = await loop(drop, streamFn(), [echo(dropRuns)], { store: location });
  assert.deepEqual(piRuns, [{ id: "kept", text: "y" }]);
  assert.deepEqual(dropRuns, piRuns);
  assert.deepEqual(strip(actual.messages), strip(expected.messages));
  const log = await stored(location, actual.session);
  const result = log.find((entry) => entry.role === "tool_result" && entry.tool_call_id === "gone");
  assert.equal(result.is_error, true);
  assert.match(result.content[0].text, /not in the response's final message/);
});

test("engine.wrap, format pi: a stream of `start` and `done` gives the whole transcript, and its call runs", async () => {
  const runs = [];
  const location = store();
  const engine = new Engine(location, {
    tools: [engineTool({ name: "echo", execute: async ({ text }) => (runs.push(text), `echo ${text}`) })],
    durability: "normal",
  });
  const session = await engine.createSession();
  const final = message([{ type: "text", text: "let me" }, toolCall("t1", "echo", { text: "hi" })], "toolUse");
  const events = [{ type: "start", partial: message([], "toolUse") }, { type: "done", reason: "toolUse", message: final }];
  const run = engine.wrap(session, events, { format: "pi" });
  for await (const _ of run);
  assert.deepEqual(runs, ["hi"]);
  const [call] = await run.calls();
  assert.deepEqual(call.content, [{ type: "text", text: "echo hi" }]);
  const log = await stored(location, session);
  assert.deepEqual(log[0].content, [
    { type: "text", text: "let me" },
    { type: "tool_call", id: "t1", name: "echo", arguments: { text: "hi" } },
  ]);
  assert.equal(log[0].stop_reason, "tool_use");
});

for (const [what, terminal, missing] of [
  ["a done event without its message", { type: "done", reason: "toolUse" }, /done event has no final message \(its message/],
  ["an error event without its error", { type: "error", reason: "error" }, /error event has no final message \(its error/],
  ["a done event whose message has no content", { type: "done", reason: "stop", message: { role: "assistant" } }, /done event has no final message/],
]) {
  test(`engine.wrap, format pi: ${what} ends the response as an error naming what is missing, and no call gets an empty result`, async () => {
    const runs = [];
    const engine = new Engine(store(), {
      tools: [engineTool({ name: "echo", execute: async ({ text }) => (runs.push(text), `echo ${text}`) })],
      durability: "normal",
    });
    const session = await engine.createSession();
    const partial = message([toolCall("t1", "echo", {})], "toolUse");
    const events = [
      { type: "start", partial },
      { type: "toolcall_start", contentIndex: 0, partial },
      { type: "toolcall_delta", contentIndex: 0, delta: '{"text":"a"}', partial },
      terminal,
    ];
    const run = engine.wrap(session, events, { format: "pi" });
    const seen = [];
    for await (const event of run) seen.push(event);
    const end = seen.at(-1);
    assert.equal(end.type, "turn_end");
    const ending = seen.find((event) => event.type === "message_end" && event.message.role === "assistant");
    assert.equal(ending.message.stop_reason, "error");
    assert.match(ending.message.error_message, missing);
    assert.deepEqual(runs, [], "nothing ran");
    for (const call of await run.calls()) assert.ok(call.content.length > 0 && call.content[0].text !== "", `${call.callId} has a result`);
  });
}

// The differential tests' shared pieces: a seeded generator, the scripted tools, a runner that drives pi-agent-core's
// loop or the drop-in with one script, and the comparisons (what differs from run to run is left out).
import { EventStream } from "@earendil-works/pi-ai";
import { Type } from "typebox";
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

/** How long a gated stream waits for an early call to start: a bound, not a timing (a call that never starts fails). */
const GATE_MS = 10_000;
const TEXT = Type.Object({ text: Type.String() });

/** The scripted tools; those named in `early` are marked early (ignored by pi's own loop). */
export function makeTools(early) {
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

/** The events each kind of omission leaves out of a stream (the final message still holds everything). */
export const OMISSIONS = {
  none: () => false,
  "done only": (event) => event.type !== "done" && event.type !== "error",
  "start and done": (event) => !["start", "done", "error"].includes(event.type),
  "no toolcall_start": (event) => event.type === "toolcall_start",
  "no text_start": (event) => event.type === "text_start",
  // A final message with more blocks than the events announced: its first and last blocks have no events (the
  // first is made from the partial message when the next one starts, the last from the final message).
  "unannounced blocks": (event) =>
    Number.isInteger(event.contentIndex) &&
    (event.contentIndex === 0 || event.contentIndex === event.partial.content.length - 1) &&
    event.partial.content.length > 1,
};

/**
 * A stream as users of pi write in tests, an `EventStream` subclass of their own: its own end and result, and each
 * event handed over on the next turn of the event loop.
 */
class HandWrittenStream extends EventStream {
  constructor() {
    super(
      (event) => event.type === "done" || event.type === "error",
      (event) => (event.type === "done" ? event.message : event.error),
    );
  }

  push(event) {
    setImmediate(() => super.push(event));
  }
}

/** How the events of a stream are handed over: paced (a turn of the event loop each), and the kinds users write. */
export const DELIVERIES = {
  paced: {},
  "in microtasks": { pace: () => new Promise((resolve) => queueMicrotask(resolve)) },
  // Nothing can hold such a stream back: it is not gated.
  "in one tick": { pace: () => undefined, ungated: true },
  "EventStream subclass": { stream: () => new HandWrittenStream() },
};

/** Runs `script` through `loop` (pi's module or the drop-in); the events and messages it produced. */
export async function run(loop, script, early, extraConfig = {}) {
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
  const gated = [];
  const gate = (toolCall, before) => {
    if (!early.has(toolCall.name) || !before.every((call) => early.has(call.name))) return undefined;
    gated.push(toolCall.id);
    return Promise.race([startOf(toolCall.id).promise, new Promise((done) => setTimeout(done, GATE_MS).unref())]);
  };
  const { ungated, ...delivery } = DELIVERIES[script.delivery ?? "paced"];
  const streamFn = scriptedStreamFn(script.turns, {
    controller,
    gate: ungated ? undefined : gate,
    skip: OMISSIONS[script.omission ?? "none"],
    ...delivery,
  });
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
export function strip(value) {
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

export function normalizeEvent(event) {
  if (event.type === "message_update") {
    return { type: event.type, update: event.assistantMessageEvent.type, message: strip(event.message) };
  }
  return strip(event);
}

export const TOOL_EVENTS = new Set(["tool_execution_start", "tool_execution_update", "tool_execution_end"]);

/** Runs of consecutive tool ends and updates sorted by call: parallel calls end in the order they finish. */
export function settleOrder(events) {
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

/** Each call's own events, by call id. */
export function perCall(events) {
  const calls = new Map();
  for (const event of events.filter((e) => TOOL_EVENTS.has(e.type))) {
    if (!calls.has(event.toolCallId)) calls.set(event.toolCallId, []);
    calls.get(event.toolCallId).push(event);
  }
  return Object.fromEntries(calls);
}

/** The calls that started before the message_end of the response that holds them. */
export function startedEarly(events) {
  const ids = [];
  let streaming = false;
  for (const event of events) {
    if (event.type === "message_start" && event.message.role === "assistant") streaming = true;
    if (event.type === "message_end" && event.message.role === "assistant") streaming = false;
    if (event.type === "tool_execution_start" && streaming) ids.push(event.toolCallId);
  }
  return ids;
}

/** Asserts that the drop-in's run agrees with pi's: the same messages, and the same events (all, or but the tools'). */
export function assertAgree(assert, actual, expected, where, { early }) {
  assert.deepEqual(strip(actual.messages), strip(expected.messages), `${where}: messages`);
  if (!early) {
    assert.deepEqual(
      settleOrder(actual.events.map(normalizeEvent)),
      settleOrder(expected.events.map(normalizeEvent)),
      `${where}: events`,
    );
    return;
  }
  const others = (events) => events.map(normalizeEvent).filter((event) => !TOOL_EVENTS.has(event.type));
  assert.deepEqual(others(actual.events), others(expected.events), `${where}: the events other than the tools'`);
  assert.deepEqual(perCall(actual.events.map(normalizeEvent)), perCall(expected.events.map(normalizeEvent)), `${where}: each call's events`);
}

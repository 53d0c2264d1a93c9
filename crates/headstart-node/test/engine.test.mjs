// The engine's API: Engine, tool, wrap in each format, hooks, bad input, cancellation, recovery, inspect.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { Engine, tool, inspect, FORMATS } from "headstart";
import { scriptedStream } from "headstart/simulated";
import { anthropicServer, deferred, pacedChatServer, within } from "./servers.mjs";

const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });
const scratch = () => mkdtempSync(join(root, "engine-"));

async function collect(run) {
  const events = [];
  for await (const event of run) events.push(event);
  return events;
}

/** The SDKs, each with its paced server, the request it makes and the format the engine reads it in. */
const SDKS = {
  openai: {
    format: "openai-chat",
    server: pacedChatServer,
    request: (url) =>
      new OpenAI({ apiKey: "test", baseURL: url }).chat.completions.create({
        model: "paced",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      }),
    result: "weather",
  },
  anthropic: {
    format: "anthropic",
    server: anthropicServer,
    request: (url) =>
      new Anthropic({ apiKey: "test", baseURL: url }).messages.create({
        model: "paced",
        max_tokens: 100,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      }),
    result: "Lisbon",
  },
};

for (const [name, sdk] of Object.entries(SDKS)) {
  for (const how of ["the SDK's request (its HTTP body)", "the SDK's stream (its events)"]) {
    test(`through the ${name} SDK, ${how}: an early call starts while the model streams`, async (t) => {
      const started = deferred();
      let startedAt = 0;
      // The servers call `lookup` (openai) or `get_weather` (anthropic); one tool answers both.
      const early = (toolName) =>
        tool({
          name: toolName,
          early: true,
          parameters: { type: "object" },
          execute: async (args) => {
            startedAt = performance.now();
            started.resolve();
            return `found ${args.query ?? args.city}`;
          },
        });
      // Each server streams ten more chunks, 20 ms apart, once the call has started.
      const server = await sdk.server({ started: started.promise });
      t.after(() => server.close());
      const engine = new Engine(join(scratch(), "t.db"), { tools: [early("lookup"), early("get_weather")], durability: "normal" });
      const session = await engine.createSession();
      const request = sdk.request(server.url);
      const run = engine.wrap(session, how.includes("HTTP body") ? request : await request, { format: sdk.format });
      const events = await collect(run);
      const lead = performance.now() - startedAt;
      assert.ok(lead >= 180, `the call started ${lead.toFixed(0)} ms before the stream ended`);
      const [call] = await run.calls();
      assert.deepEqual(call.content, [{ type: "text", text: `found ${sdk.result}` }]);
      assert.ok(call.headroomMs >= 180, `headroom ${call.headroomMs} ms`);
      assert.ok(call.sealToStartMs !== null && call.sealToStartMs >= 0);
      assert.equal(events.at(-1).type, "turn_end");
      console.log(`${sdk.format} (${how}): lead ${lead.toFixed(0)} ms, seal to start ${call.sealToStartMs.toFixed(2)} ms`);
    });
  }
}

test("sse-anthropic: a fetch Response's body, read by the engine's own parser; the call starts while it streams", async (t) => {
  const started = deferred();
  let startedAt = 0;
  const weather = tool({
    name: "get_weather",
    early: true,
    execute: async ({ city }) => {
      startedAt = performance.now();
      started.resolve();
      return `found ${city}`;
    },
  });
  const server = await anthropicServer({ started: started.promise });
  t.after(() => server.close());
  const engine = new Engine(join(scratch(), "t.db"), { tools: [weather], durability: "normal" });
  const session = await engine.createSession();
  const response = await fetch(`${server.url}/v1/messages`, { method: "POST", body: "{}" });
  const run = engine.wrap(session, response, { format: "sse-anthropic" });
  await collect(run);
  assert.ok(performance.now() - startedAt >= 180);
  const [call] = await run.calls();
  assert.deepEqual(call.content, [{ type: "text", text: "found Lisbon" }]);
});

test("a stream that throws ends the response as an error with its message; what was committed stays", async () => {
  const engine = new Engine(join(scratch(), "t.db"), {
    durability: "normal",
    tools: [tool({ name: "fine", early: true, execute: async () => "fine" })],
  });
  const session = await engine.createSession();
  async function* failing() {
    for await (const event of piStream(["fine"])) {
      yield event;
      if (event.type === "toolcall_end") throw new Error("the connection dropped");
    }
  }
  const run = engine.wrap(session, failing(), { format: "pi" });
  const events = await collect(run);
  assert.match(JSON.stringify(events.at(-1)), /the connection dropped/);
  const calls = await run.calls();
  assert.equal(calls.length, 1, "the call sealed before the failure has its one result");
});

/** A pi stream with one call per name in `calls`, then text and `done`. */
function piStream(calls, extra = {}) {
  return scriptedStream({
    blocks: [...calls.map((name, i) => ({ call: { id: `c${i}`, name, arguments: { text: `t${i}` } } })), { text: "ok" }],
    stop: "toolUse",
    ...extra,
  });
}

const text = { type: "object", properties: { text: { type: "string" } } };

test("a tool that throws gets its message as an error result; an unknown tool an error result; the transcript is whole", async () => {
  const engine = new Engine(join(scratch(), "t.db"), {
    durability: "normal",
    tools: [
      tool({ name: "boom", parameters: text, execute: async () => { throw new Error("kaboom"); } }),
      tool({ name: "fine", parameters: text, early: true, execute: async ({ text }) => `fine ${text}` }),
    ],
  });
  const session = await engine.createSession();
  const run = engine.wrap(session, piStream(["boom", "nope", "fine"]), { format: "pi" });
  await collect(run);
  const calls = await run.calls();
  const byName = Object.fromEntries(calls.map((call) => [call.toolName, call]));
  assert.equal(byName.boom.isError, true);
  assert.match(byName.boom.content[0].text, /kaboom/);
  assert.equal(byName.nope.isError, true);
  assert.equal(byName.fine.isError, false);
  assert.deepEqual(byName.fine.content, [{ type: "text", text: "fine t2" }]);
});

test("an unknown format is a TypeError naming the formats", () => {
  const engine = new Engine(join(scratch(), "t.db"), { durability: "normal" });
  assert.throws(() => engine.wrap("s", [], { format: "pi-ai" }), (error) => {
    assert.ok(error instanceof TypeError);
    for (const name of FORMATS) assert.ok(error.message.includes(name), error.message);
    return true;
  });
});

test("a malformed event ends the response as an error, and nothing is thrown", async () => {
  const engine = new Engine(join(scratch(), "t.db"), { durability: "normal" });
  const session = await engine.createSession();
  async function* broken() {
    yield { type: "start", partial: { content: [] } };
    yield 42;
  }
  const events = await collect(engine.wrap(session, broken(), { format: "pi" }));
  const end = events.at(-1);
  assert.equal(end.type, "turn_end");
  assert.match(JSON.stringify(end.outcome), /not a pi-ai AssistantMessageEvent: 42/);
});

test("hooks: beforeToolCall blocks, afterToolCall replaces the result, a hook that throws fails the call", async () => {
  const engine = new Engine(join(scratch(), "t.db"), {
    durability: "normal",
    tools: [tool({ name: "echo", parameters: text, early: true, execute: async ({ text }) => `secret ${text}` })],
    beforeToolCall: async ({ args }) => (args.text === "t0" ? { block: true, reason: "not t0" } : undefined),
    afterToolCall: async ({ args, result }) => {
      if (args.text === "t2") throw new Error("after hook broke");
      return { content: [{ type: "text", text: result.content[0].text.replace("secret", "[redacted]") }] };
    },
  });
  const session = await engine.createSession();
  const run = engine.wrap(session, piStream(["echo", "echo", "echo"]), { format: "pi" });
  await collect(run);
  const calls = await run.calls();
  assert.equal(calls.length, 3);
  const byId = Object.fromEntries(calls.map((call) => [call.callId, call]));
  assert.equal(byId.c0.isError, true);
  assert.match(byId.c0.content[0].text, /not t0/);
  assert.deepEqual(byId.c1.content, [{ type: "text", text: "[redacted] t1" }]);
  assert.equal(byId.c2.isError, true);
  assert.match(byId.c2.content[0].text, /after hook broke/);
});

test("an AbortSignal cancels the response: the running call is aborted, and every admitted call has its stored result", async () => {
  const aborted = deferred();
  const running = deferred();
  const engine = new Engine(join(scratch(), "t.db"), {
    durability: "normal",
    tools: [
      tool({
        name: "wait",
        parameters: text,
        early: true,
        execute: (_args, { signal }) =>
          new Promise((_, reject) => {
            running.resolve();
            signal.addEventListener("abort", () => {
              aborted.resolve();
              reject(new Error("stopped by the abort"));
            });
          }),
      }),
    ],
  });
  const session = await engine.createSession();
  const controller = new AbortController();
  const stream = scriptedStream(
    { blocks: [{ call: { id: "c0", name: "wait", arguments: { text: "x" } } }, { text: "and on" }], stop: "toolUse" },
    { gate: async () => { await within(running.promise, 10_000, "the call's start"); controller.abort(); } },
  );
  const run = engine.wrap(session, stream, { format: "pi", signal: controller.signal });
  await collect(run);
  await within(aborted.promise, 10_000, "the tool's abort");
  const calls = await run.calls();
  assert.equal(calls.length, 1);
  assert.equal(calls[0].isError, true);
  assert.match(calls[0].content[0].text, /stopped by the abort/);
});

test("recover leaves a session whose calls all have results as it is; inspect shows the session", async () => {
  const dir = scratch();
  const store = join(dir, "t.db");
  const engine = new Engine(store, { durability: "normal", tools: [tool({ name: "echo", parameters: text, execute: async () => "x" })] });
  const session = await engine.createSession();
  await engine.appendUser(session, "hello");
  await collect(engine.wrap(session, piStream(["echo"]), { format: "pi" }));
  const recovered = await engine.recover(session, "fail");
  assert.deepEqual(recovered, []);
  const report = await inspect(store, session);
  assert.equal(report.sessions.length, 1);
  const roles = report.sessions[0].messages.map((stored) => stored.message.role);
  assert.deepEqual(roles, ["user", "assistant", "tool_result", "assistant"].slice(0, roles.length));
  assert.ok(roles.includes("tool_result"));
  await assert.rejects(() => engine.recover(session, "sometimes"), /policy must be/);
});

test("a store that cannot be opened is a clear error from the first call that needs it", async () => {
  const engine = new Engine("/nonexistent/folder/t.db", { durability: "normal" });
  await assert.rejects(() => engine.createSession(), /t\.db|store|open/i);
  assert.throws(() => new Engine("", {}), TypeError);
  assert.throws(() => tool({ name: "x" }), TypeError);
});


test("a session the store does not have is a clear error from the wrapped stream, which is not read on", async () => {
  const engine = new Engine(join(scratch(), "t.db"), { durability: "normal", tools: [tool({ name: "echo", parameters: text, execute: async () => "x" })] });
  await engine.createSession();
  // A model that streams for ever: the error must not wait for its end.
  let read = 0;
  async function* forever() {
    yield { type: "start" };
    while (true) {
      await new Promise((done) => setTimeout(done, 5));
      read++;
      yield { type: "text_delta", index: 0, delta: "and on" };
    }
  }
  let timer;
  const bound = new Promise((_, fail) => (timer = setTimeout(() => fail(new Error("the error waited for the stream")), 20_000)));
  try {
    await assert.rejects(() => Promise.race([collect(engine.wrap("no-such-session", forever(), { format: "headstart" })), bound]), /no session no-such-session/);
  } finally {
    clearTimeout(timer);
  }
  const after = read;
  await new Promise((done) => setTimeout(done, 50));
  assert.equal(read, after, "the stream is not read after the error");
});

// pi-agent-core 1.6.0's documented behaviour (its README, its types and its published loop), each as a test of its
// own. Every test runs on pi's own loop and on the drop-in, with and without early tools: the drop-in must behave as
// documented too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Type } from "typebox";
import * as pi from "@earendil-works/pi-agent-core";
import * as drop from "headstart/pi";
import { MODEL, scriptedStreamFn, ticks } from "headstart/simulated";

const TEXT = Type.Object({ text: Type.String() });
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: 0 });
const call = (id, name, text) => ({ call: { id, name, arguments: { text } } });

/** A tool `name` whose `execute` is `execute`; early when `early`. */
function tool(name, execute, extra = {}, early = false) {
  return { name, label: name, description: name, parameters: TEXT, execute, ...extra, ...(early ? { executionMode: "early" } : {}) };
}

/** The three ways each behaviour is checked. */
const LOOPS = [
  ["pi-agent-core", pi, false],
  ["the drop-in", drop, false],
  ["the drop-in, tools early", drop, true],
];

/** Runs one loop over `turns`; its events and new messages. */
async function runLoop(module, turns, tools, config = {}, onEvent = () => {}) {
  const events = [];
  const stream = module.agentLoop(
    [user("go")],
    { systemPrompt: "", messages: [], tools },
    { model: MODEL, convertToLlm: (messages) => messages, ...config },
    undefined,
    scriptedStreamFn(turns),
  );
  for await (const event of stream) {
    events.push(event);
    onEvent(event);
  }
  return { events, messages: await stream.result() };
}

const results = (messages) => messages.filter((message) => message.role === "toolResult");
const textOf = (message) => message.content.map((block) => block.text).join("");
const ofType = (events, type) => events.filter((event) => event.type === type);

/** Declares one behaviour, checked on each loop. */
function behaviour(name, check) {
  for (const [loopName, module, early] of LOOPS) test(`${name} (${loopName})`, () => check(module, early));
}

behaviour("beforeToolCall may change the arguments in place; they are not validated again", async (module, early) => {
  const seen = [];
  const tools = [tool("echo", async (_id, args) => (seen.push(args.text), { content: [{ type: "text", text: String(args.text) }], details: {} }), {}, early)];
  const { messages } = await runLoop(module, [{ blocks: [call("c1", "echo", "original")], stop: "toolUse" }], tools, {
    beforeToolCall: async ({ args }) => {
      // Not a string: a second validation would refuse it.
      args.text = 42;
    },
  });
  assert.deepEqual(seen, [42]);
  assert.equal(results(messages)[0].isError, false);
  assert.equal(textOf(results(messages)[0]), "42");
});

behaviour("prepareArguments rewrites the arguments before validation", async (module, early) => {
  const seen = [];
  const tools = [
    tool(
      "echo",
      async (_id, args) => (seen.push(args), { content: [{ type: "text", text: args.text }], details: {} }),
      // An old argument name, mapped to the current one.
      { prepareArguments: (args) => ("legacy" in args ? { text: args.legacy } : args) },
      early,
    ),
  ];
  const turns = [{ blocks: [{ call: { id: "c1", name: "echo", arguments: { legacy: "from an old model" } } }], stop: "toolUse" }];
  const { messages, events } = await runLoop(module, turns, tools);
  assert.deepEqual(seen, [{ text: "from an old model" }]);
  assert.equal(results(messages)[0].isError, false);
  // The events and the result message still carry the call as the model made it.
  assert.deepEqual(ofType(events, "tool_execution_start")[0].args, { legacy: "from an old model" });
});

behaviour("tool_execution_end comes in completion order, the result messages in source order", async (module, early) => {
  const completed = [];
  // The slow call ends once the fast one's end has been seen: an order of completion no timer decides.
  let fastSeen;
  const fastEnded = new Promise((resolve) => (fastSeen = resolve));
  const body = (wait) => async (id) => {
    await wait();
    completed.push(id);
    return { content: [{ type: "text", text: id }], details: {} };
  };
  const tools = [tool("slow", body(() => fastEnded), {}, early), tool("fast", body(async () => {}), {}, early)];
  const turns = [{ blocks: [call("c1", "slow", "a"), call("c2", "fast", "b")], stop: "toolUse" }];
  const onEvent = (event) => event.type === "tool_execution_end" && event.toolCallId === "c2" && fastSeen();
  const { messages, events } = await runLoop(module, turns, tools, {}, onEvent);
  assert.deepEqual(completed, ["c2", "c1"]);
  assert.deepEqual(ofType(events, "tool_execution_end").map((event) => event.toolCallId), completed);
  assert.deepEqual(results(messages).map((message) => message.toolCallId), ["c1", "c2"]);
});

behaviour("steering messages queued during the calls are injected after all of them", async (module, early) => {
  let queued = false;
  const tools = [
    tool("first", async () => ((queued = true), { content: [{ type: "text", text: "1" }], details: {} }), {}, early),
    tool("second", async () => (await ticks(3), { content: [{ type: "text", text: "2" }], details: {} }), {}, early),
  ];
  const turns = [{ blocks: [call("c1", "first", "a"), call("c2", "second", "b")], stop: "toolUse" }];
  const { messages } = await runLoop(module, turns, tools, {
    getSteeringMessages: async () => (queued ? ((queued = false), [user("steered")]) : []),
  });
  const roles = messages.map((message) => (message.role === "user" ? textOf(message) : message.role));
  // pi 1.6 declares the tools on a system message before the prompt.
  assert.deepEqual(roles, ["system", "go", "assistant", "toolResult", "toolResult", "steered", "assistant"]);
});

behaviour('executionMode "sequential" on one tool makes the whole batch sequential', async (module, early) => {
  const log = [];
  const body = (name) => async () => {
    log.push(`${name} start`);
    await ticks(2);
    log.push(`${name} end`);
    return { content: [{ type: "text", text: name }], details: {} };
  };
  // An early tool keeps its own start; the batch around the sequential one still runs one call at a time.
  const tools = [tool("a", body("a")), tool("serial", body("serial"), { executionMode: "sequential" }), tool("b", body("b"))];
  await runLoop(module, [{ blocks: [call("c1", "a", "1"), call("c2", "serial", "2"), call("c3", "b", "3")], stop: "toolUse" }], tools);
  assert.deepEqual(log, ["a start", "a end", "serial start", "serial end", "b start", "b end"]);
});

behaviour("a call blocked with terminate ends the run when the whole batch terminates", async (module, early) => {
  const runs = [];
  const tools = [tool("echo", async (id) => (runs.push(id), { content: [{ type: "text", text: "ran" }], details: {} }), {}, early)];
  const turns = [{ blocks: [call("c1", "echo", "a")], stop: "toolUse" }, { blocks: [{ text: "never asked" }], stop: "stop" }];
  const { messages } = await runLoop(module, turns, tools, {
    beforeToolCall: async () => ({ block: true, reason: "not allowed", terminate: true }),
  });
  assert.deepEqual(runs, []);
  assert.equal(results(messages)[0].isError, true);
  assert.equal(textOf(results(messages)[0]), "not allowed");
  assert.equal(messages.at(-1).role, "toolResult", "no further request");
});

behaviour("afterToolCall marking every call terminate ends the run after the batch", async (module, early) => {
  const tools = [tool("echo", async () => ({ content: [{ type: "text", text: "ran" }], details: {} }), {}, early)];
  const turns = [
    { blocks: [call("c1", "echo", "a"), call("c2", "echo", "b")], stop: "toolUse" },
    { blocks: [{ text: "never asked" }], stop: "stop" },
  ];
  const { messages } = await runLoop(module, turns, tools, { afterToolCall: async () => ({ terminate: true }) });
  assert.deepEqual(results(messages).map((message) => message.isError), [false, false]);
  assert.equal(messages.at(-1).role, "toolResult");
});

behaviour("an update sent after the tool settled is ignored", async (module, early) => {
  let late;
  const tools = [
    tool(
      "echo",
      async (_id, _args, _signal, onUpdate) => {
        onUpdate({ content: [{ type: "text", text: "in time" }], details: {} });
        late = () => onUpdate({ content: [{ type: "text", text: "too late" }], details: {} });
        return { content: [{ type: "text", text: "done" }], details: {} };
      },
      {},
      early,
    ),
  ];
  const events = [];
  const stream = module.agentLoop(
    [user("go")],
    { systemPrompt: "", messages: [], tools },
    {
      model: MODEL,
      convertToLlm: (messages) => messages,
    },
    undefined,
    scriptedStreamFn([{ blocks: [call("c1", "echo", "a")], stop: "toolUse" }]),
  );
  for await (const event of stream) {
    events.push(event);
    if (event.type === "tool_execution_end") late();
  }
  assert.deepEqual(
    ofType(events, "tool_execution_update").map((event) => event.partialResult.content[0].text),
    ["in time"],
  );
});

behaviour("parallel mode runs a batch's calls side by side, an early tool's call held back behind a sync one too", async (module, early) => {
  const order = [];
  let saveStarted;
  const saving = new Promise((resolve) => (saveStarted = resolve));
  const done = (text) => ({ content: [{ type: "text", text }], details: {} });
  const tools = [
    tool(
      "fetch",
      async (id) => {
        order.push(`start ${id}`);
        // Waits for the other call of the batch to start: they run side by side. The bound only ends a failing run.
        await Promise.race([saving, new Promise((resolve) => setTimeout(resolve, 2_000))]);
        order.push(`end ${id}`);
        return done("fetched");
      },
      {},
      early,
    ),
    tool("save", async (id) => {
      order.push(`start ${id}`);
      saveStarted();
      return done("saved");
    }),
  ];
  // `a2` follows a call of a tool that is not early, so even the drop-in's early tools run it in the batch.
  await runLoop(module, [{ blocks: [call("s1", "save", "x"), call("a2", "fetch", "y")], stop: "toolUse" }], tools);
  assert.ok(order.indexOf("start s1") < order.indexOf("end a2"), `the calls ran one after the other: ${order.join(", ")}`);
});

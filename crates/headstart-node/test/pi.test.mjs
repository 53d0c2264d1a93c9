// The drop-in beyond the differential test: its deliberate differences from pi, the Agent with a store, resume and
// continue, and a loop whose listener throws.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Type } from "typebox";
import { Agent, agentLoop, agentLoopContinue, resume } from "headstart/pi";
import { inspect } from "headstart";
import { MODEL, scriptedStream, scriptedStreamFn } from "headstart/simulated";

const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });
const parameters = Type.Object({ text: Type.String() });
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: 0 });
const convertToLlm = (messages) => messages;

function echo(name, extra = {}, runs = []) {
  return {
    name,
    label: name,
    description: name,
    parameters,
    ...extra,
    execute: async (id, { text }) => {
      runs.push(id);
      return { content: [{ type: "text", text: `${name} ${text}` }], details: {} };
    },
  };
}

async function drain(stream) {
  const events = [];
  for await (const event of stream) events.push(event);
  return { events, messages: await stream.result() };
}

function started(events) {
  return events.filter((event) => event.type === "tool_execution_start").map((event) => event.toolCallId);
}

test("a length-truncated response: an early call that already ran keeps its result; the others are not run, as in pi", async () => {
  const runs = [];
  const tools = [echo("early", { executionMode: "early" }, runs), echo("late", {}, runs)];
  const streamFn = scriptedStreamFn([
    {
      blocks: [
        { call: { id: "c_early", name: "early", arguments: { text: "a" } } },
        { call: { id: "c_late", name: "late", arguments: { text: "b" } } },
        { text: "and then the limit" },
      ],
      stop: "length",
    },
  ]);
  const { messages } = await drain(agentLoop([user("go")], { systemPrompt: "", messages: [], tools }, { model: MODEL, convertToLlm }, undefined, streamFn));
  const results = messages.filter((message) => message.role === "toolResult");
  const byId = Object.fromEntries(results.map((result) => [result.toolCallId, result]));
  assert.deepEqual(runs, ["c_early"], "only the early call ran");
  assert.equal(byId.c_early.isError, false);
  assert.deepEqual(byId.c_early.content, [{ type: "text", text: "early a" }]);
  assert.equal(byId.c_late.isError, true);
  assert.match(byId.c_late.content[0].text, /output token limit/);
});

test("an aborted response after an early call ran: its result is stored, and the messages are pi's", async () => {
  const runs = [];
  const store = join(mkdtempSync(join(root, "pi-")), "t.db");
  const controller = new AbortController();
  let session;
  let ran;
  const done = new Promise((resolve) => (ran = resolve));
  const tool = echo("early", { executionMode: "early" }, runs);
  const tools = [{ ...tool, execute: async (...args) => { const result = await tool.execute(...args); ran(); return result; } }];
  // The model goes on once the call has run, and is aborted two events later.
  const streamFn = () =>
    scriptedStream(
      { blocks: [{ call: { id: "c1", name: "early", arguments: { text: "x" } } }, { text: "more words here" }], stop: "abort", abortAt: 7 },
      { controller, gate: () => done },
    );
  const { events, messages } = await drain(
    agentLoop([user("go")], { systemPrompt: "", messages: [], tools }, { model: MODEL, convertToLlm, store, onStoreSession: (id) => (session = id) }, controller.signal, streamFn),
  );
  assert.equal(messages.at(-1).stopReason, "aborted");
  assert.equal(messages.filter((message) => message.role === "toolResult").length, 0, "pi's messages: no results after an aborted response");
  assert.deepEqual(runs, ["c1"]);
  assert.deepEqual(started(events), ["c1"], "its events came, while the response streamed");
  const report = await inspect(store, session);
  const results = report.sessions[0].messages.filter((stored) => stored.message.role === "tool_result");
  assert.deepEqual(results.map((stored) => stored.message.content), [[{ type: "text", text: "early x" }]]);
});

test("the Agent keeps its transcript in a store; resume and agentLoopContinue go on in the same session", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "agent.db");
  const tools = [echo("lookup", { executionMode: "early" })];
  const agent = new Agent({
    initialState: { model: MODEL, tools },
    streamFn: scriptedStreamFn([
      { blocks: [{ text: "looking for the answer to q" }, { call: { id: "c1", name: "lookup", arguments: { text: "q" } } }], stop: "toolUse" },
      { blocks: [{ text: "found it" }], stop: "stop" },
    ]),
    store,
  });
  await agent.prompt("find q");
  assert.ok(agent.storeSessionId);
  const { messages, recovered } = await resume({ store, storeSessionId: agent.storeSessionId, tools });
  assert.deepEqual(recovered, []);
  assert.deepEqual(messages.map((message) => message.role), ["user", "assistant", "toolResult", "assistant"]);
  // The response's usage comes back from its last fragment (the call's prefix fragment before it has none).
  assert.deepEqual([messages[1].usage.input, messages[1].usage.output], [10, 5]);
  assert.deepEqual(messages[1].content.map((block) => block.type), ["text", "toolCall"]);
  // The text streamed in four deltas, which went to the engine joined: the transcript holds it whole.
  assert.equal(messages[1].content[0].text, "looking for the answer to q");
  const stream = agentLoopContinue(
    { systemPrompt: "", messages: [...messages, user("and again")], tools },
    { model: MODEL, convertToLlm, store, storeSessionId: agent.storeSessionId },
    undefined,
    scriptedStreamFn([{ blocks: [{ text: "again: found it" }], stop: "stop" }]),
  );
  await drain(stream);
  const report = await inspect(store, agent.storeSessionId);
  const roles = report.sessions[0].messages.map((stored) => stored.message.role);
  assert.equal(roles.filter((role) => role === "assistant").length >= 3, true, roles.join(","));
});

test("a listener that throws fails the run with its error, and the loop does not hang on the call it left", async () => {
  const runs = [];
  const tools = [echo("early", { executionMode: "early" }, runs)];
  const { runAgentLoop } = await import("headstart/pi");
  await assert.rejects(
    runAgentLoop(
      [user("go")],
      { systemPrompt: "", messages: [], tools },
      { model: MODEL, convertToLlm },
      async (event) => {
        if (event.type === "tool_execution_end") throw new Error("listener broke");
      },
      undefined,
      scriptedStreamFn([{ blocks: [{ call: { id: "c2", name: "early", arguments: { text: "y" } } }], stop: "toolUse" }]),
    ),
    /listener broke/,
  );
  assert.deepEqual(runs, ["c2"]);
});

test("tools may be given as early with `early: true`; a tool marked early runs once even when the engine asks after the response", async () => {
  const runs = [];
  const tools = [echo("a", { early: true }, runs), echo("b", { executionMode: "sequential" }, runs), echo("c", { early: true }, runs)];
  const { messages } = await drain(
    agentLoop(
      [user("go")],
      { systemPrompt: "", messages: [], tools },
      { model: MODEL, convertToLlm },
      undefined,
      scriptedStreamFn([
        {
          blocks: [
            { call: { id: "c_a", name: "a", arguments: { text: "1" } } },
            { call: { id: "c_b", name: "b", arguments: { text: "2" } } },
            { call: { id: "c_c", name: "c", arguments: { text: "3" } } },
          ],
          stop: "toolUse",
        },
      ]),
    ),
  );
  assert.deepEqual([...runs].sort(), ["c_a", "c_b", "c_c"]);
  assert.deepEqual(
    messages.filter((message) => message.role === "toolResult").map((message) => message.toolCallId),
    ["c_a", "c_b", "c_c"],
  );
});

test("the prompt is in the store even when the loop fails before its first request", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "prompt.db");
  let session;
  const requests = [];
  const { runAgentLoop } = await import("headstart/pi");
  await assert.rejects(
    runAgentLoop(
      [user("remember this")],
      { systemPrompt: "", messages: [], tools: [] },
      { model: MODEL, convertToLlm, store, onStoreSession: (id) => (session = id) },
      async (event) => {
        if (event.type === "agent_start") throw new Error("listener broke");
      },
      undefined,
      (...args) => (requests.push(args), scriptedStream({ blocks: [{ text: "never asked" }], stop: "stop" })),
    ),
    /listener broke/,
  );
  assert.equal(requests.length, 0, "no request was made");
  const report = await inspect(store, session);
  const stored = report.sessions[0].messages.map((entry) => entry.message);
  assert.deepEqual(stored.map((message) => message.role), ["user"]);
  assert.match(JSON.stringify(stored[0]), /remember this/);
});

test("the prompt is written before the response that follows it, with the request not waiting for the write", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "order.db");
  let session;
  const stream = agentLoop(
    [user("first"), user("second")],
    { systemPrompt: "", messages: [], tools: [echo("early", { executionMode: "early" })] },
    { model: MODEL, convertToLlm, store, onStoreSession: (id) => (session = id) },
    undefined,
    scriptedStreamFn([
      { blocks: [{ call: { id: "c1", name: "early", arguments: { text: "x" } } }], stop: "toolUse" },
      { blocks: [{ text: "done" }], stop: "stop" },
    ]),
  );
  await drain(stream);
  const report = await inspect(store, session);
  const roles = report.sessions[0].messages.map((entry) => entry.message.role);
  assert.deepEqual(roles.slice(0, 3), ["user", "user", "assistant"], roles.join(","));
  // The call's result may come before its response's last fragment (it ran early), never after the next response.
  assert.equal(roles.at(-1), "assistant", roles.join(","));
  assert.ok(roles.indexOf("tool_result") < roles.length - 1, roles.join(","));
});

/**
 * SQLite's write lock on the file at `path`, held by another process from `take()` to `release()` (a connection of
 * this process would share its POSIX locks with the engine's): the engine's writes wait for it, up to the store's
 * busy timeout (5 s), then fail. `release` also ends the process; call it whatever the test's outcome.
 */
function writeLock(path) {
  let child;
  // The holder ends itself if this process dies first (its parent changes), so that no lock outlives the suite.
  const holder = `
    const { DatabaseSync } = require("node:sqlite");
    const db = new DatabaseSync(process.argv[1], { timeout: 5000 });
    db.exec("BEGIN IMMEDIATE");
    process.stdout.write("locked\\n");
    const parent = Number(process.argv[2]);
    setInterval(() => process.ppid !== parent && process.exit(0), 100);
  `;
  return {
    get held() {
      return child !== undefined;
    },
    async take() {
      child = spawn(process.execPath, ["--no-warnings", "-e", holder, path, String(process.pid)], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      // The lock is taken (the engine may be writing: the holder waits for it), or the holder failed.
      const exited = once(child, "exit").then(([code]) => {
        throw new Error(`the lock's holder exited (${code}) before it took the lock`);
      });
      const [chunk] = await Promise.race([once(child.stdout, "data"), exited]);
      exited.catch(() => {});
      assert.match(String(chunk), /locked/);
    },
    release() {
      if (!child) return;
      child.kill("SIGKILL");
      child = undefined;
    },
  };
}

/** An early tool that takes `lock` as it runs: from then on its result (and every later write) waits for it. */
function lockingTool(lock) {
  return {
    ...echo("early", { executionMode: "early" }),
    execute: async (id, { text }) => {
      if (!lock.held) await lock.take();
      return { content: [{ type: "text", text: `early ${text}` }], details: {} };
    },
  };
}

/** A loop of one early call that takes `lock` (`lockingTool`) on the store at `store`: its messages and session. */
async function lockedLoop(store, lock, streamFn) {
  let session;
  const { messages } = await drain(
    agentLoop(
      [user("go")],
      { systemPrompt: "", messages: [], tools: [lockingTool(lock)] },
      { model: MODEL, convertToLlm, store, onStoreSession: (id) => (session = id) },
      undefined,
      streamFn,
    ),
  );
  return { messages, session };
}

/**
 * Runs `body` while `lock` may be held, and says whether it still was when the request under test went out
 * (`requested`, called from that request's stream function, which releases it). A loop that waited for the store would
 * wait for the lock: it goes after 3 s (below the store's 5 s busy timeout), and the test fails instead of hanging.
 */
async function requestUnderLock(lock, body) {
  let heldAtRequest;
  const requested = () => {
    heldAtRequest = lock.held;
    lock.release();
  };
  const fallback = setTimeout(() => lock.release(), 3000);
  try {
    const outcome = await body(requested);
    return { ...outcome, heldAtRequest };
  } finally {
    clearTimeout(fallback);
    lock.release();
  }
}

test("the next request goes out while the last results are still being stored, and the log keeps its order", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "pipelined.db");
  const lock = writeLock(store);
  const script = scriptedStreamFn([
    { blocks: [{ call: { id: "c1", name: "early", arguments: { text: "x" } } }], stop: "toolUse" },
    { blocks: [{ text: "done" }], stop: "stop" },
  ]);
  const { messages, session, heldAtRequest } = await requestUnderLock(lock, (requested) =>
    // The second request: the first call's result cannot have been stored yet.
    lockedLoop(store, lock, (...args) => (script.requests() === 1 && requested(), script(...args))),
  );
  assert.equal(heldAtRequest, true, "the second request waited for the first call's result to be stored");
  assert.equal(messages.at(-1).stopReason, "stop", JSON.stringify(messages.at(-1)));
  const report = await inspect(store, session);
  const stored = report.sessions[0].messages.map((entry) => entry.message);
  const result = stored.findIndex((message) => message.role === "tool_result");
  const answer = stored.findIndex((message) => message.role === "assistant" && JSON.stringify(message.content).includes("done"));
  const roles = stored.map((message) => message.role).join(",");
  assert.ok(result >= 0 && answer > result, `the result is stored before the next response: ${roles}`);
  assert.equal(answer, stored.length - 1, roles);
});

test("the first request goes out while the session is still being created and its prompt written", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "first.db");
  const loop = (streamFn, onStoreSession) =>
    drain(
      agentLoop([user("go")], { systemPrompt: "", messages: [], tools: [] }, { model: MODEL, convertToLlm, store, onStoreSession }, undefined, streamFn),
    );
  // A first loop makes the store's file; the second one's session is created while another process holds its lock.
  await loop(scriptedStreamFn([]));
  const lock = writeLock(store);
  await lock.take();
  const script = scriptedStreamFn([{ blocks: [{ text: "first answer" }], stop: "stop" }]);
  let session;
  const { messages, heldAtRequest } = await requestUnderLock(lock, (requested) =>
    loop(
      (...args) => (requested(), script(...args)),
      (id) => (session = id),
    ),
  );
  assert.equal(heldAtRequest, true, "the first request waited for the session's creation");
  assert.equal(messages.at(-1).stopReason, "stop", JSON.stringify(messages.at(-1)));
  const report = await inspect(store, session);
  const roles = report.sessions[0].messages.map((entry) => entry.message.role);
  assert.deepEqual(roles, ["user", "assistant"], roles.join(","));
});

test("a loop that fails waits for the engine to store what it has before it rejects", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "failing.db");
  const lock = writeLock(store);
  const { runAgentLoop } = await import("headstart/pi");
  let session;
  let released = false;
  // The call's result waits for the lock, which goes after 1 s: the loop's rejection must come after it.
  const release = setTimeout(() => {
    released = true;
    lock.release();
  }, 1000);
  try {
    await assert.rejects(
      runAgentLoop(
        [user("go")],
        { systemPrompt: "", messages: [], tools: [lockingTool(lock)] },
        { model: MODEL, convertToLlm, store, onStoreSession: (id) => (session = id) },
        async (event) => {
          if (event.type === "tool_execution_end") throw new Error("listener broke");
        },
        undefined,
        scriptedStreamFn([{ blocks: [{ call: { id: "c1", name: "early", arguments: { text: "x" } } }], stop: "toolUse" }]),
      ),
      /listener broke/,
    );
    assert.equal(released, true, "the loop rejected before the engine could store the call's result");
  } finally {
    clearTimeout(release);
    lock.release();
  }
  const report = await inspect(store, session);
  const results = report.sessions[0].messages.filter((entry) => entry.message.role === "tool_result");
  assert.equal(results.length, 1, JSON.stringify(report.sessions[0].messages));
});

test("a result the store cannot take fails the loop, and nothing of the next response is stored after it", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "unstored.db");
  const lock = writeLock(store);
  const streamFn = scriptedStreamFn([
    { blocks: [{ call: { id: "c1", name: "early", arguments: { text: "x" } } }], stop: "toolUse" },
    { blocks: [{ text: "an answer after a result that was never stored" }], stop: "stop" },
  ]);
  let messages;
  let session;
  try {
    // The lock outlasts the store's busy timeout: the engine's writes after the call fail.
    ({ messages, session } = await lockedLoop(store, lock, streamFn));
  } finally {
    lock.release();
  }
  const last = messages.at(-1);
  assert.equal(last.stopReason, "error", JSON.stringify(last));
  assert.match(last.errorMessage, /could not be stored|no stored result|locked/, last.errorMessage);
  const report = await inspect(store, session);
  const stored = report.sessions[0].messages.map((entry) => entry.message);
  assert.ok(
    !stored.some((message) => JSON.stringify(message).includes("never stored")),
    `the next response was stored: ${JSON.stringify(stored)}`,
  );
});

test("a loop on a session the store does not have fails with the store's error", async () => {
  const store = join(mkdtempSync(join(root, "pi-")), "unknown.db");
  const streamFn = () => scriptedStream({ blocks: [{ text: "an answer that nobody could store" }], stop: "stop" });
  const stream = agentLoop([user("go")], { systemPrompt: "", messages: [], tools: [] }, { model: MODEL, convertToLlm, store, storeSessionId: "no-such-session" }, undefined, streamFn);
  const { messages } = await drain(stream);
  const last = messages.at(-1);
  assert.equal(last.stopReason, "error", JSON.stringify(last));
  assert.match(last.errorMessage, /no session no-such-session/);
});

// headstart/ai beyond the differential test: bad input, the transcript of a chat across calls, an abort, a chat
// that stops at an approval (its process ends), and a crash resumed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { dirname, join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { streamText, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { withHeadstart, resume } from "headstart/ai";
import { inspect } from "headstart";
import { partsOf } from "./ai-scripts.mjs";
import { lines, until } from "./crashing.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });
const storeIn = (name) => join(mkdtempSync(join(root, "ai-")), name);
const q = z.object({ q: z.string() });

/** A mock model answering its calls with `steps` (the differential test's scripted responses), a tick apart. */
function scripted(steps) {
  let next = 0;
  return new MockLanguageModelV4({
    doStream: async ({ abortSignal }) => {
      const parts = partsOf(steps[next++] ?? { blocks: [{ text: "nothing more" }], finish: "stop" });
      return {
        stream: new ReadableStream({
          async start(stream) {
            for (const part of parts) {
              await new Promise((resolve) => setImmediate(resolve));
              if (abortSignal?.aborted) return;
              stream.enqueue(part);
            }
            stream.close();
          },
        }),
      };
    },
  });
}

const call = (id, name, input) => ({ call: { id, name, input: JSON.stringify(input) } });
const stored = async (store, session) => (await inspect(store, session)).sessions[0].messages.map((entry) => entry.message);

test("bad input is a TypeError or Error naming the problem", async () => {
  const model = scripted([]);
  const tools = {
    read: tool({ inputSchema: q, execute: async () => "r" }),
    ask: tool({ inputSchema: q, needsApproval: true, execute: async () => "a" }),
    client: tool({ inputSchema: q }),
  };
  const rejects = (options, pattern) => assert.rejects(withHeadstart(options), pattern);
  await rejects({ model: "gpt-5", tools }, /needs the model object .* not its id "gpt-5"/);
  await rejects({ model: { doStream: () => {} }, tools }, /must be an AI SDK language model/);
  await rejects({ model, tools, early: ["nope"] }, /early names "nope", which is not one of the tools \(read, ask, client\)/);
  await rejects({ model, tools, early: ["ask"] }, /tool ask needs approval \(needsApproval\)/);
  await rejects({ model, tools, early: ["client"] }, /tool client has no execute/);
  await rejects({ model, tools, idempotent: ["gone"] }, /idempotent names "gone"/);
  await rejects({ model, tools, strore: "x.db" }, /unknown withHeadstart options: strore/);
  await rejects({ model, tools, store: join(storeIn("x"), "no", "such", "folder", "chat.db") }, /chat\.db|folder|directory|open/i);
  await assert.rejects(withHeadstart(undefined), TypeError);
});

test("one withHeadstart value serves a chat: each model call one response, each new prompt recorded once, an existing session goes on", async () => {
  const store = storeIn("chat.db");
  const runs = [];
  const tools = { read: tool({ inputSchema: q, execute: async ({ q: text }) => (runs.push(text), `read ${text}`) }) };
  const steps = [
    { blocks: [call("c1", "read", { q: "a" })], finish: "tool-calls" },
    { blocks: [{ text: "first answer" }], finish: "stop" },
    { blocks: [{ text: "second answer" }], finish: "stop" },
  ];
  const chat = await withHeadstart({ model: scripted(steps), tools, store, early: ["read"] });
  const first = streamText({ model: chat.model, tools: chat.tools, prompt: "one", stopWhen: stepCountIs(2) });
  assert.equal((await first.text).trim(), "first answer");
  const history = [{ role: "user", content: "one" }, ...(await first.response).messages];
  const second = streamText({ model: chat.model, tools: chat.tools, messages: [...history, { role: "user", content: "two" }] });
  assert.equal((await second.text).trim(), "second answer");
  assert.deepEqual(runs, ["a"]);
  // The engine stores the last response as the AI SDK reads it: wait (a bound) until all three are stored.
  let log = [];
  await until(async () => {
    log = (await inspect(store, chat.sessionId)).sessions[0].messages;
    return new Set(log.filter((entry) => entry.message.role === "assistant").map((entry) => entry.request)).size === 3;
  }, "the third response's storing");
  // One response per model call (a response may be stored in fragments, around its early call's result).
  const entries = [];
  for (const { message, request } of log) {
    const entry = message.role === "user" ? `user:${message.text}` : message.role === "assistant" ? `response ${request}` : message.role;
    if (!(message.role === "assistant" && entries.includes(entry))) entries.push(entry);
  }
  assert.deepEqual(entries, ["user:one", "response 0", "tool_result", "response 1", "user:two", "response 2"]);
  // The same chat in a later process: withHeadstart with its sessionId appends to it.
  const later = await withHeadstart({ model: scripted([{ blocks: [{ text: "third" }], finish: "stop" }]), tools, store, sessionId: chat.sessionId });
  const third = streamText({ model: later.model, tools: later.tools, messages: [...history, { role: "user", content: "two" }, { role: "assistant", content: "second answer" }, { role: "user", content: "three" }] });
  assert.equal((await third.text).trim(), "third");
  const users = async () => (await stored(store, chat.sessionId)).filter((message) => message.role === "user").map((message) => message.text);
  await until(async () => (await users()).length === 3, "the third prompt's storing");
  assert.deepEqual(await users(), ["one", "two", "three"]);
});

test("an abortSignal cancels the engine's response: the running early call is aborted, and every admitted call has its stored result", async () => {
  const store = storeIn("abort.db");
  const controller = new AbortController();
  let aborted = false;
  const tools = {
    slow: tool({
      inputSchema: q,
      // The app aborts once the call has started, while the model still streams.
      execute: (_input, { abortSignal }) => {
        const stopped = new Promise((resolve) =>
          abortSignal.addEventListener("abort", () => ((aborted = true), resolve("stopped on the abort")), { once: true }),
        );
        controller.abort();
        return stopped;
      },
    }),
  };
  const words = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ");
  const steps = [{ blocks: [call("c1", "slow", { q: "x" }), { text: words }], finish: "tool-calls" }];
  const chat = await withHeadstart({ model: scripted(steps), tools, store, early: ["slow"] });
  const result = streamText({ model: chat.model, tools: chat.tools, prompt: "go", abortSignal: controller.signal });
  for await (const _ of result.fullStream);
  await until(() => aborted, "the early call's abort");
  // The engine stores the call's result once its body has answered the abort.
  let log;
  for (let i = 0; i < 100 && !(log ?? []).some((message) => message.role === "tool_result"); i++) {
    log = await stored(store, chat.sessionId);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const results = log.filter((message) => message.role === "tool_result");
  assert.equal(results.length, 1, "the call has its one stored result");
  assert.deepEqual(results[0].content, [{ type: "text", text: "stopped on the abort" }]);
  assert.equal(log.filter((message) => message.role === "assistant").at(-1).stop_reason, "aborted");
});

/** Runs `ai-approval-child.mjs` in `mode` until it ends by itself (a bound: killed, and failed, after 30 s); what it said. */
async function approvalChild(t, store, mode) {
  const child = spawn(process.execPath, [join(here, "ai-approval-child.mjs"), store, mode], { stdio: ["ignore", "pipe", "inherit"], env: process.env });
  t.after(() => child.kill("SIGKILL"));
  let out = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const code = await new Promise((resolve) => child.once("exit", (exit, signal) => resolve(signal ?? exit)));
  clearTimeout(timer);
  assert.equal(code, 0, `the child (${mode}) ended by itself: ${out}`);
  return JSON.parse(out.trim().split("\n").at(-1));
}

test("a chat that stops at an approval lets its process end; approved in the next call, the call runs once and is stored", async (t) => {
  const stoppedStore = storeIn("approval.db");
  const stopped = await approvalChild(t, stoppedStore, "stop");
  assert.deepEqual(stopped.requested, ["c1"], "the AI SDK asked for the approval");
  assert.equal(stopped.ran, 0);
  // The process ended with the call unanswered: the chat goes on once resume has given it its result.
  const tools = { charge: tool({ inputSchema: q, needsApproval: true, execute: async () => "charged" }) };
  await assert.rejects(
    withHeadstart({ model: scripted([]), tools, store: stoppedStore, sessionId: stopped.sessionId }),
    /has calls without a result \(c1\).*resume/,
  );
  const { recovered } = await resume({ store: stoppedStore, sessionId: stopped.sessionId, tools });
  assert.deepEqual(recovered.map((entry) => entry.call_id), ["c1"]);
  await withHeadstart({ model: scripted([]), tools, store: stoppedStore, sessionId: stopped.sessionId });
  const store = storeIn("approval.db");
  const said = await approvalChild(t, store, "approve");
  assert.equal(said.ran, 1, "approved in the next call, the tool ran once");
  const log = await stored(store, said.sessionId);
  const result = log.find((message) => message.role === "tool_result" && message.tool_call_id === "c1");
  assert.deepEqual(result.content, [{ type: "text", text: "charged 10" }]);
});

test("kill -9 while an early call runs, then resume: every call has one result, the idempotent one run again with the bodies resume was given", async (t) => {
  const store = storeIn("crash.db");
  const effects = join(dirname(store), "effects.txt");
  const child = spawn(process.execPath, [join(here, "ai-crash-child.mjs"), store, effects], { stdio: ["ignore", "pipe", "inherit"], env: process.env });
  t.after(() => child.kill("SIGKILL"));
  let out = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  await until(() => lines(effects).length === 2, "both early calls' effects");
  const session = /session (\S+)/.exec(out)?.[1];
  assert.ok(session, `the child said its session: ${out}`);
  child.kill("SIGKILL");
  await new Promise((done) => (child.exitCode !== null || child.signalCode !== null ? done() : child.once("exit", done)));
  const reran = [];
  const tools = {
    charge: tool({ inputSchema: q, execute: async () => assert.fail("charge ran again after the crash") }),
    lookup: tool({ inputSchema: q, execute: async ({ q: text }) => (reran.push(text), `balance of ${text}`) }),
  };
  const { messages, recovered } = await resume({ store, sessionId: session, tools, idempotent: ["lookup"], policy: "rerun_idempotent" });
  assert.deepEqual(recovered.map((entry) => entry.call_id).sort(), ["c_charge", "c_lookup"]);
  assert.deepEqual(reran, ["acct"], "the idempotent call ran again, with resume's body");
  const results = (await stored(store, session)).filter((message) => message.role === "tool_result");
  assert.deepEqual(results.map((message) => message.tool_call_id).sort(), ["c_charge", "c_lookup"], "one result per call");
  assert.match(JSON.stringify(results.find((message) => message.tool_call_id === "c_charge").content), /interrupted/i);
  assert.deepEqual(messages.map((message) => message.role), ["user", "assistant", "tool"]);
  assert.deepEqual(messages[2].content.map((part) => part.toolCallId).sort(), ["c_charge", "c_lookup"]);
});

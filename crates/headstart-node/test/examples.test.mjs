// The examples, run as a user runs them: the demo on the simulated model, and the pi agent over a real provider's
// wire (a paced Anthropic Messages stream from a server on loopback, read by pi-ai's own provider).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { dirname, join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";
import { inspect } from "headstart";
import { aiProviderServer, anthropicServer, deferred } from "./servers.mjs";

const examples = join(dirname(dirname(fileURLToPath(import.meta.url))), "examples");
const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });

/** Runs an example to its end (killed when the test ends, pass or fail); its output. */
function runExample(t, file, args, env = {}, onOutput = () => {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(examples, file), ...args], {
      cwd: examples,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    t.after(() => child.kill("SIGKILL"));
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
      onOutput(out);
    });
    child.stderr.on("data", (chunk) => (err += chunk));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${file} exited ${code}: ${err}${out}`))));
  });
}

test("the demo runs on the simulated model: early tools start while the model streams, and the time saved is shown", async (t) => {
  const store = join(mkdtempSync(join(root, "demo-")), "demo.db");
  const out = await runExample(t, "demo.mjs", [store]);
  const at = (pattern) => {
    const line = out.split("\n").find((candidate) => pattern.test(candidate));
    assert.ok(line, `the demo printed ${pattern}: ${out}`);
    return Number(line.trim().split(/\s+/)[0]);
  };
  const ends = at(/the model's response ends/);
  assert.ok(at(/lookup_weather\(Lisbon\) starts/) < ends, out);
  assert.ok(at(/lookup_calendar\(Lisbon\) starts/) < ends, out);
  assert.ok(at(/save_notes\(Lisbon trip\) starts/) >= ends, out);
  const saved = /(\d+) ms saved/.exec(out);
  assert.ok(saved && Number(saved[1]) > 0, out);
  assert.match(out, /transcript: 8 messages/);
});

test("the pi agent example over Anthropic's wire: the early tool starts before the response ends", async (t) => {
  // The server streams on once the example says the tool started.
  const started = deferred();
  const server = await anthropicServer({ started: started.promise });
  t.after(() => server.close());
  const store = join(mkdtempSync(join(root, "pi-agent-")), "agent.db");
  const out = await runExample(
    t,
    "pi-agent.mjs",
    ["weather in Lisbon?"],
    { ANTHROPIC_API_KEY: "test", ANTHROPIC_BASE_URL: server.url, HEADSTART_STORE: store },
    (output) => output.includes("get_weather(Lisbon) starts") && started.resolve(),
  );
  const ms = (pattern) => Number(pattern.exec(out)?.[1]);
  const startedMs = ms(/(\d+) ms: get_weather\(Lisbon\) starts/);
  const endedMs = ms(/(\d+) ms: the response ends \(toolUse\)/);
  // Ten text deltas 20 ms apart followed the tool's start: a lead of at least 180 ms.
  assert.ok(endedMs - startedMs >= 180, `the tool started ${endedMs - startedMs} ms before the response ended: ${out}`);
  assert.match(out, /the response ends \(stop\): Sunny in Lisbon\./);
  assert.match(out, /transcript: session \S+ in /);
});

test("the AI SDK example on the simulated model: early lookups start while the model streams, and the time saved is shown", async (t) => {
  const store = join(mkdtempSync(join(root, "ai-sdk-")), "ai.db");
  const out = await runExample(t, "ai-sdk.mjs", [store], { OPENAI_API_KEY: "" });
  const at = (pattern) => {
    const line = out.split("\n").find((candidate) => pattern.test(candidate));
    assert.ok(line, `the example printed ${pattern}: ${out}`);
    return Number(line.trim().split(/\s+/)[0]);
  };
  const ends = at(/the model's response ends/);
  assert.ok(at(/lookup_weather\(Lisbon\) starts/) < ends - 300, out);
  assert.ok(at(/lookup_calendar\(Lisbon\) starts/) < ends - 300, out);
  assert.ok(at(/save_notes\(Lisbon\) runs/) >= ends, out);
  const saved = /(\d+) ms saved/.exec(out);
  assert.ok(saved && Number(saved[1]) >= 300, out);
  assert.match(out, /transcript: 8 messages in /);
});

test("the AI SDK example with @ai-sdk/openai (OPENAI_API_KEY set), over the Responses wire: the early lookup starts before the response ends", async (t) => {
  const started = deferred();
  const server = await aiProviderServer({ started: started.promise, call: { name: "lookup_weather", input: { city: "Lisbon" } } });
  t.after(() => server.close());
  const store = join(mkdtempSync(join(root, "ai-sdk-openai-")), "ai.db");
  const out = await runExample(t, "ai-sdk.mjs", [store], { OPENAI_API_KEY: "test", OPENAI_BASE_URL: `${server.url}/v1` }, (output) =>
    output.includes("lookup_weather(Lisbon) starts") ? started.resolve() : undefined,
  );
  const startedMs = Number(/(\d+) ms {2}lookup_weather\(Lisbon\) starts/.exec(out)?.[1]);
  assert.ok(Number.isFinite(startedMs), out);
  assert.ok(server.endedAt["/responses"] !== undefined, "the Responses endpoint was streamed");
  assert.match(out, /answer: Sunny\./);
  assert.match(out, /ms saved/);
  // Ten text pieces 20 ms apart followed the call's start: it was sealed at least 150 ms before the stream ended.
  const { sessions } = await inspect(store);
  const call = sessions[0].figures.calls.find((entry) => entry.name === "lookup_weather");
  assert.ok(call.headroom_ms >= 150, `the call was sealed ${call.headroom_ms} ms before the stream ended`);
});

// The examples, run as a user runs them: the demo on the simulated model, and the pi agent over a real provider's
// wire (a paced Anthropic Messages stream from a server on loopback, read by pi-ai's own provider).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { mkdirSync, mkdtempSync } from "node:fs";
import { dirname, join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";

const examples = join(dirname(dirname(fileURLToPath(import.meta.url))), "examples");
const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });

/** Runs an example to its end (killed when the test ends, pass or fail); its output. */
function runExample(t, file, args, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(examples, file), ...args], {
      cwd: examples,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    t.after(() => child.kill("SIGKILL"));
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
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

/** Anthropic's Messages stream: a call closed early, then `after` text deltas `paceMs` apart; then a text answer. */
async function anthropicServer({ after = 10, paceMs = 20 }) {
  let requests = 0;
  const server = createServer(async (request, response) => {
    for await (const _ of request);
    const send = (type, data) => response.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    response.writeHead(200, { "content-type": "text/event-stream" });
    send("message_start", { message: { id: `msg_${requests}`, type: "message", role: "assistant", model: "paced", content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } } });
    if (requests++ === 0) {
      send("content_block_start", { index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "get_weather", input: {} } });
      send("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: '{"city": "Lisbon"}' } });
      send("content_block_stop", { index: 0 });
      send("content_block_start", { index: 1, content_block: { type: "text", text: "" } });
      for (let i = 0; i < after; i++) {
        await new Promise((done) => setTimeout(done, paceMs));
        send("content_block_delta", { index: 1, delta: { type: "text_delta", text: `word${i} ` } });
      }
      send("content_block_stop", { index: 1 });
      send("message_delta", { delta: { stop_reason: "tool_use" }, usage: { output_tokens: 20 } });
    } else {
      send("content_block_start", { index: 0, content_block: { type: "text", text: "" } });
      send("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Sunny in Lisbon." } });
      send("content_block_stop", { index: 0 });
      send("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } });
    }
    send("message_stop", {});
    response.end();
  });
  await new Promise((done) => server.listen(0, "127.0.0.1", done));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

test("the pi agent example over Anthropic's wire: the early tool starts before the response ends", async (t) => {
  const server = await anthropicServer({});
  t.after(() => server.close());
  const store = join(mkdtempSync(join(root, "pi-agent-")), "agent.db");
  const out = await runExample(t, "pi-agent.mjs", ["weather in Lisbon?"], {
    ANTHROPIC_API_KEY: "test",
    ANTHROPIC_BASE_URL: server.url,
    HEADSTART_STORE: store,
  });
  const ms = (pattern) => Number(pattern.exec(out)?.[1]);
  const started = ms(/(\d+) ms: get_weather\(Lisbon\) starts/);
  const ended = ms(/(\d+) ms: the response ends \(toolUse\)/);
  assert.ok(started < ended, out);
  // Ten text deltas 20 ms apart followed the call's close: a lead of at least 180 ms.
  assert.ok(ended - started >= 180, `the tool started ${ended - started} ms before the response ended: ${out}`);
  assert.match(out, /the response ends \(stop\): Sunny in Lisbon\./);
  assert.match(out, /transcript: session \S+ in /);
});

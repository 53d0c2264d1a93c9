// The stream a drop-in loop returns: pi-ai's EventStream (instanceof and types), read as pi's is read.
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventStream } from "@earendil-works/pi-ai";
import { AgentEventStream } from "../node_modules/headstart/lib/pi/events.js";

const end = (messages) => ({ type: "agent_end", messages });

/** The same pushes into pi-ai's own stream and into the drop-in's; what two readers each read from both. */
async function both(script) {
  const pi = new EventStream(
    (event) => event.type === "agent_end",
    (event) => (event.type === "agent_end" ? event.messages : []),
  );
  const ours = new AgentEventStream();
  const read = async (stream) => {
    const seen = [];
    const reader = (async () => {
      for await (const event of stream) seen.push(event.type);
    })();
    await script(stream);
    await reader;
    return { seen, result: await stream.result() };
  };
  return { pi: await read(pi), ours: await read(ours) };
}

test("an EventStream that reads as pi-ai's: queued and awaited events, the end, the result", async () => {
  assert.ok(new AgentEventStream() instanceof EventStream);
  const script = async (stream) => {
    stream.push({ type: "agent_start" });
    stream.push({ type: "turn_start" });
    await new Promise((done) => setImmediate(done));
    stream.push({ type: "turn_end" });
    stream.push(end(["m"]));
    stream.push({ type: "after the end" });
  };
  const { pi, ours } = await both(script);
  assert.deepEqual(ours, pi);
  assert.deepEqual(ours.seen, ["agent_start", "turn_start", "turn_end", "agent_end"]);
  assert.deepEqual(ours.result, ["m"]);
});

test("end() without agent_end ends every waiting reader, and gives its result", async () => {
  const { pi, ours } = await both(async (stream) => {
    stream.push({ type: "agent_start" });
    await new Promise((done) => setImmediate(done));
    stream.end(["failed"]);
  });
  assert.deepEqual(ours, pi);
  assert.deepEqual(ours.result, ["failed"]);
});

test("a reader that breaks out stops reading; the stream goes on for another", async () => {
  const stream = new AgentEventStream();
  stream.push({ type: "a" });
  stream.push({ type: "b" });
  for await (const event of stream) {
    assert.equal(event.type, "a");
    break;
  }
  const rest = [];
  stream.push(end([]));
  for await (const event of stream) rest.push(event.type);
  assert.deepEqual(rest, ["b", "agent_end"]);
});

// `resume` rebuilds the messages the live loop had, from the stored transcript: the prompts' text, the assistant's
// content and stop reason, and each call's result, a length-truncated response's included (pi's text for the calls
// it did not run, the early call's real result). What the store does not keep (timings, usage, the provider's
// names, system messages) is left out of the comparison; the README says so.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { Type } from "typebox";
import { agentLoop, resume } from "headstart/pi";
import { MODEL, scriptedStreamFn } from "headstart/simulated";

const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });
const parameters = Type.Object({ text: Type.String() });
const tool = (name, extra = {}) => ({
  name,
  label: name,
  description: name,
  parameters,
  ...extra,
  execute: async (_id, { text }) => ({ content: [{ type: "text", text: `${name} ${text}` }], details: { text } }),
});
/** What the store keeps of a message. */
const KEPT = new Set(["role", "content", "stopReason", "toolCallId", "toolName", "details", "isError", "type", "text", "id", "name", "arguments"]);
const kept = (value) =>
  Array.isArray(value)
    ? value.map(kept)
    : value && typeof value === "object"
      ? Object.fromEntries(Object.entries(value).filter(([key]) => KEPT.has(key)).map(([key, field]) => [key, kept(field)]))
      : value;

test("resume rebuilds the live loop's messages, a length-truncated response's calls included", async () => {
  const store = join(mkdtempSync(join(root, "resume-")), "t.db");
  let session;
  const tools = [tool("late"), tool("early", { executionMode: "early" })];
  const stream = agentLoop(
    [{ role: "user", content: [{ type: "text", text: "look it up" }], timestamp: 0 }],
    { systemPrompt: "", messages: [], tools },
    { model: MODEL, convertToLlm: (messages) => messages, store, onStoreSession: (id) => (session = id) },
    undefined,
    scriptedStreamFn([
      { blocks: [{ call: { id: "c1", name: "early", arguments: { text: "a" } } }, { text: "calling" }], stop: "toolUse" },
      {
        blocks: [{ text: "more" }, { call: { id: "c2", name: "late", arguments: { text: "b" } } }, { call: { id: "c3", name: "early", arguments: { text: "c" } } }],
        stop: "length",
      },
      { blocks: [{ text: "all done" }], stop: "stop" },
    ]),
  );
  for await (const _ of stream);
  const live = (await stream.result()).filter((message) => message.role !== "system");
  const { messages, recovered } = await resume({ store, storeSessionId: session, tools });
  assert.deepEqual(recovered, [], "nothing to recover: the loop ended");
  assert.deepEqual(kept(messages), kept(live));
  const truncated = messages.find((message) => message.toolCallId === "c2");
  assert.match(truncated.content[0].text, /^Tool call "late" was not executed: the response hit the output token limit/);
  assert.equal(messages[0].content[0].text, "look it up", "the prompt's text");
});

// Crash: a Node process killed with SIGKILL while its early tools run; a new process resumes the session. Every
// call has exactly one result, the non-idempotent one the interrupted result, and nothing ran twice. Four resumers
// started at once on a copy of the crash run the idempotent call again once between them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, existsSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Type } from "typebox";
import { resume } from "headstart/pi";
import { inspect } from "headstart";
import { crashedSession, lines } from "./crashing.mjs";

const here = dirname(fileURLToPath(import.meta.url));

test("kill -9 while early tools run, then resume: one result per call, interrupted where not idempotent, nothing run twice", async (t) => {
  const { dir, store, effects, session } = await crashedSession(t);

  // Four resumers at once on a copy of the crash (property 5, docs/reliability.md): one takes the session's lock
  // and runs the idempotent lookup again, once; the others are refused with the holder's name, and write nothing.
  const copy = join(dir, "copy");
  mkdirSync(copy);
  for (const suffix of ["", "-wal"]) if (existsSync(store + suffix)) copyFileSync(store + suffix, join(copy, "agent.db" + suffix));
  const copyEffects = join(copy, "effects.txt");
  const answers = await Promise.all(
    [1, 2, 3, 4].map(
      () =>
        new Promise((done, fail) => {
          const resumer = spawn(process.execPath, [join(here, "resume-child.mjs"), join(copy, "agent.db"), session, copyEffects], {
            stdio: ["ignore", "pipe", "inherit"],
            env: process.env,
          });
          t.after(() => resumer.kill("SIGKILL"));
          let said = "";
          resumer.stdout.on("data", (chunk) => (said += chunk));
          resumer.once("exit", (code) => (code === 0 ? done(JSON.parse(said.trim())) : fail(new Error(`a resumer exited ${code}: ${said}`))));
        }),
    ),
  );
  assert.equal(answers.filter((answer) => answer.recovered?.length > 0).length, 1, JSON.stringify(answers));
  for (const answer of answers.filter((answer) => answer.refused)) assert.match(answer.refused, new RegExp(session), "a refusal names the session");
  assert.deepEqual(lines(copyEffects), ["lookup recovery"], "the idempotent lookup ran again once, not once per resumer");

  const parameters = Type.Object({ text: Type.String() });
  const never = () => {
    throw new Error("a tool ran again after the crash");
  };
  const tools = [
    { name: "charge", label: "charge", description: "", parameters, executionMode: "early", execute: never },
    { name: "lookup", label: "lookup", description: "", parameters, executionMode: "early", replay: "safe", execute: never },
  ];
  const { messages, recovered } = await resume({ store, storeSessionId: session, tools, policy: "fail" });
  assert.deepEqual(recovered.map((call) => call.call_id).sort(), ["call_charge", "call_lookup"]);

  const report = await inspect(store, session);
  const results = report.sessions[0].messages.map((stored) => stored.message).filter((message) => message.role === "tool_result");
  assert.deepEqual(results.map((result) => result.tool_call_id).sort(), ["call_charge", "call_lookup"], "one result per call");
  const charge = results.find((result) => result.tool_call_id === "call_charge");
  assert.equal(charge.is_error, true);
  assert.match(JSON.stringify(charge.content), /interrupted/i);
  assert.deepEqual(lines(effects).map((line) => line.split(" ")[0]).sort(), ["charge", "lookup"], "each effect once");

  // The rebuilt messages: the prompt, the assistant's two calls, their two results, ready for agentLoopContinue.
  assert.deepEqual(messages.map((message) => message.role), ["user", "assistant", "toolResult", "toolResult"]);
  assert.deepEqual(messages[1].content.filter((block) => block.type === "toolCall").map((call) => call.id), ["call_charge", "call_lookup"]);

  // Recovering the same crash again changes nothing.
  const again = await resume({ store, storeSessionId: session, tools, policy: "fail" });
  assert.deepEqual(again.recovered, []);
  assert.deepEqual(again.messages.map((message) => message.role), messages.map((message) => message.role));
});

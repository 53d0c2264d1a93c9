// The differential test of `headstart/ai`: generated scripts through the real `ai` 7.0.173, with and without
// `withHeadstart`, on tick-paced mock models: the same text, steps (content, calls, results, finish reasons, usage),
// response messages, callback arguments and UI message stream parts, ids and times aside; each body run as often,
// but where the README says an early call ran that the plain AI SDK did not run (a response cut by `length`, a stream
// error, an abort, a retried attempt).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { random } from "./compare.mjs";
import { generate, runScript } from "./ai-scripts.mjs";

const SEED = 20261205;
const SCRIPTS = 300;
const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });

/** The kinds where an early call may run that the plain AI SDK does not run (README, "Vercel AI SDK"). */
const EARLY_MAY_RUN_MORE = new Set(["length", "stream error", "abort", "retry"]);

test(`ai 7.0.173 with and without withHeadstart agree on ${SCRIPTS} generated scripts`, async () => {
  const store = join(mkdtempSync(join(root, "ai-")), "chats.db");
  const rng = random(SEED);
  const kinds = new Map();
  let startedEarly = 0;
  let gated = 0;
  for (let index = 0; index < SCRIPTS; index++) {
    const script = generate(rng, index);
    const where = `script ${index} (${script.kind}, ${script.mode}, early ${[...script.early]})`;
    const plain = await runScript(script, { wrapped: false });
    const wrapped = await runScript(script, { wrapped: true, store });
    assert.deepEqual(wrapped.outputs, plain.outputs, `${where}: what the app sees`);
    assert.deepEqual(wrapped.seen, plain.seen, `${where}: the callbacks' arguments`);
    if (EARLY_MAY_RUN_MORE.has(script.kind)) {
      for (const [name, count] of Object.entries(wrapped.runs)) {
        assert.ok(count >= (plain.runs[name] ?? 0), `${where}: ${name} ran ${count} times, fewer than plain`);
        if (count !== (plain.runs[name] ?? 0)) assert.ok(script.early.has(name), `${where}: ${name}, not early, ran more`);
      }
    } else {
      assert.deepEqual(wrapped.runs, plain.runs, `${where}: each body's runs`);
    }
    startedEarly += wrapped.startedEarly.length;
    gated += wrapped.gated.length;
    kinds.set(script.kind, (kinds.get(script.kind) ?? 0) + 1);
  }
  console.log(`compared ${SCRIPTS} scripts: ${[...kinds].map(([kind, n]) => `${kind} ${n}`).join(", ")}`);
  console.log(`${startedEarly} of ${gated} early calls held for started while their response streamed`);
  assert.ok(startedEarly >= 120, `only ${startedEarly} early calls started while their response streamed`);
});

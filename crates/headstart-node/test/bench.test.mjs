// The benchmarks still run (bench/*.mjs, figures in docs/performance.md): each, shortened, to its end, printing every
// section. Their figures are not checked: timing belongs to the benchmarks, not to a test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const bench = join(dirname(fileURLToPath(import.meta.url)), "../bench");
/** The corpus: named by the suite's runner (tests/node.rs), or where it lies in a checkout's target folder. */
const scenarios = process.env.HEADSTART_SCENARIOS ?? join(dirname(fileURLToPath(import.meta.url)), "../../../../../tests/scenarios");

/** Runs benchmark `file` with `args`; its output. */
async function run(file, args) {
  const { stdout } = await promisify(execFile)(process.execPath, [join(bench, file), ...args, "--scenarios", scenarios], {
    timeout: 120_000,
  });
  return stdout;
}

test("bench/drop-in.mjs runs to its end", async () => {
  const out = await run("drop-in.mjs", ["--runs", "1", "--deltas", "200", "--calls", "5"]);
  for (const section of ["per streamed event", "scenarios on real timers", "05-sequential-mode", "seal to start"]) {
    assert.ok(out.includes(section), `no "${section}" in:\n${out}`);
  }
});

test("bench/ai-sdk.mjs runs to its end", async () => {
  const out = await run("ai-sdk.mjs", ["--runs", "1", "--deltas", "200", "--calls", "5", "--tail-ms", "60"]);
  for (const section of ["lead:", "@ai-sdk/anthropic", "seal to start", "per streamed part", "06-per-tool-sequential"]) {
    assert.ok(out.includes(section), `no "${section}" in:\n${out}`);
  }
});

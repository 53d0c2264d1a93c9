// The drop-in against pi-agent-core 1.6.0, side by side in one run (docs/performance.md, "The Node package"):
//
// 1. per event: one response of many text deltas through each loop, consumed with `for await`;
// 2. four scenarios of the corpus (tests/scenarios: 01, 03, 05, 06) on real timers (kept on time: `sleepUntil`), pi's loop against the drop-in
//    with the scenario's early tools early, each beside its own ideal: the engine's replay on the virtual clock (its
//    report's `end_ms`, from `headstart replay` when HEADSTART_CLI names the binary, or given as `--ideal 01=450,...`),
//    of the scenario as it is for the drop-in, and with every call in the batch after its response for pi's loop
//    (`--batch-ideal 01=750,...`). pi's loop over its own ideal is what its JavaScript costs: the drop-in runs the same
//    steps;
// 3. seal to start, the prefix commit included, through the addon: p50 and p95 over many early calls.
//
//   node bench/drop-in.mjs [--deltas 50000] [--runs 5] [--calls 300] [--scenarios DIR]
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import * as pi from "@earendil-works/pi-agent-core";
import { createAssistantMessageEventStream } from "@earendil-works/pi-ai";
import * as drop from "headstart/pi";
import { Engine, tool } from "headstart";
import { MODEL, scriptedStream } from "headstart/simulated";
import { SCENARIO_FILES, allBatch, args, behaviorOf, idealOf, median, overIdeal, percentile, scenarioTurns, sleepUntil } from "./scenarios.mjs";

const DELTAS = Number(args.deltas ?? 50_000);
const RUNS = Number(args.runs ?? 5);
const CALLS = Number(args.calls ?? 300);
const convertToLlm = (messages) => messages;
const user = { role: "user", content: [{ type: "text", text: "go" }], timestamp: 0 };
const store = join(mkdtempSync(join(tmpdir(), "headstart-bench-")), "bench.db");

// 1. Per event.
function manyDeltas() {
  const stream = createAssistantMessageEventStream();
  const partial = { role: "assistant", content: [{ type: "text", text: "" }], api: "b", provider: "b", model: "b", usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop", timestamp: 0 };
  stream.push({ type: "start", partial });
  stream.push({ type: "text_start", contentIndex: 0, partial });
  for (let i = 0; i < DELTAS; i++) stream.push({ type: "text_delta", contentIndex: 0, delta: "tok ", partial });
  stream.push({ type: "text_end", contentIndex: 0, content: "", partial });
  stream.push({ type: "done", reason: "stop", message: { ...partial } });
  return stream;
}

async function perEvent(loop, config) {
  const stream = loop.agentLoop([user], { systemPrompt: "", messages: [], tools: [] }, { model: MODEL, convertToLlm, ...config }, undefined, manyDeltas);
  const started = performance.now();
  let events = 0;
  for await (const _ of stream) events++;
  return ((performance.now() - started) * 1e6) / events;
}

const perEventRuns = { pi: [], drop: [], dropStore: [] };
for (let run = 0; run < RUNS; run++) {
  perEventRuns.pi.push(await perEvent(pi, {}));
  perEventRuns.drop.push(await perEvent(drop, {}));
  perEventRuns.dropStore.push(await perEvent(drop, { store, durability: "normal" }));
}
console.log(`per streamed event, ${DELTAS} text deltas in one response, median of ${RUNS} runs (Node ${process.versions.node}):`);
console.log(`  pi-agent-core 1.6.0 agentLoop   ${median(perEventRuns.pi).toFixed(0)} ns`);
console.log(`  headstart/pi agentLoop          ${median(perEventRuns.drop).toFixed(0)} ns  (${(median(perEventRuns.drop) / median(perEventRuns.pi)).toFixed(2)}x; the in-memory store)`);
console.log(`  headstart/pi, a SQLite file     ${median(perEventRuns.dropStore).toFixed(0)} ns  (${(median(perEventRuns.dropStore) / median(perEventRuns.pi)).toFixed(2)}x)`);

// 2. Scenarios.
/** A pi stream replaying a delta log on real timers (`at_ms` from the stream's start). */
function replayStream(events) {
  const stream = createAssistantMessageEventStream();
  const partial = { role: "assistant", content: [], api: "r", provider: "r", model: "r", usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } }, stopReason: "stop", timestamp: Date.now() };
  const args = new Map();
  const started = performance.now();
  (async () => {
    for (const event of events) {
      if (performance.now() < started + event.at_ms) await sleepUntil(started + event.at_ms);
      const i = event.index;
      switch (event.type) {
        case "start":
          stream.push({ type: "start", partial });
          break;
        case "text_start":
          partial.content[i] = { type: "text", text: "" };
          stream.push({ type: "text_start", contentIndex: i, partial });
          break;
        case "text_delta":
          partial.content[i].text += event.delta;
          stream.push({ type: "text_delta", contentIndex: i, delta: event.delta, partial });
          break;
        case "text_end":
          stream.push({ type: "text_end", contentIndex: i, content: partial.content[i].text, partial });
          break;
        case "toolcall_start":
          partial.content[i] = { type: "toolCall", id: event.id, name: event.name, arguments: {} };
          args.set(i, "");
          stream.push({ type: "toolcall_start", contentIndex: i, partial });
          break;
        case "toolcall_delta":
          args.set(i, args.get(i) + event.delta);
          stream.push({ type: "toolcall_delta", contentIndex: i, delta: event.delta, partial });
          break;
        case "toolcall_end": {
          partial.content[i] = { ...partial.content[i], arguments: event.arguments ?? JSON.parse(args.get(i) || "{}") };
          stream.push({ type: "toolcall_end", contentIndex: i, toolCall: partial.content[i], partial });
          break;
        }
        case "done": {
          const reason = { stop: "stop", tool_use: "toolUse", length: "length" }[event.stop_reason] ?? "stop";
          stream.push({ type: "done", reason, message: { ...partial, content: [...partial.content], stopReason: reason } });
          return;
        }
        case "error":
          stream.push({ type: "error", reason: event.stop_reason, error: { ...partial, stopReason: event.stop_reason, errorMessage: event.message } });
          return;
      }
    }
  })();
  return stream;
}

function scenarioTools(scenario) {
  return (scenario.tools ?? []).map((spec) => ({
    name: spec.name,
    label: spec.name,
    description: spec.description ?? "",
    parameters: { type: "object" },
    ...(spec.execution_mode === "sequential" ? { executionMode: "sequential" } : spec.async ? { executionMode: "early" } : {}),
    execute: async (id) => {
      const behavior = behaviorOf(spec, id);
      if (behavior.delay_ms) await sleepUntil(performance.now() + behavior.delay_ms);
      if (behavior.error) throw new Error(behavior.error);
      return { content: [{ type: "text", text: behavior.result?.text ?? "" }], details: {}, terminate: behavior.result?.terminate === true };
    },
  }));
}

async function runScenario(loop, file) {
  const { scenario, turns } = scenarioTurns(file);
  let next = 0;
  const streamFn = () => replayStream(turns[next++] ?? [{ at_ms: 0, type: "start" }, { at_ms: 0, type: "done", stop_reason: "stop" }]);
  const started = performance.now();
  const stream = loop.agentLoop(
    [{ role: "user", content: [{ type: "text", text: scenario.prompt ?? "go" }], timestamp: 0 }],
    { systemPrompt: "", messages: [], tools: scenarioTools(scenario) },
    { model: MODEL, convertToLlm, toolExecution: scenario.config?.tool_execution ?? "parallel", store, durability: "normal" },
    undefined,
    streamFn,
  );
  for await (const _ of stream);
  return performance.now() - started;
}

console.log(
  `\nscenarios on real timers, median of ${RUNS} runs (ms), each loop over its own ideal: pi-agent-core 1.6.0 (every call in` +
    ` the batch), headstart/pi with early tools`,
);
for (const file of SCENARIO_FILES) {
  const piTimes = [];
  const dropTimes = [];
  for (let run = 0; run < RUNS; run++) {
    piTimes.push(await runScenario(pi, file));
    dropTimes.push(await runScenario(drop, file));
  }
  console.log(
    `  ${file.replace(".json", "").padEnd(28)} pi ${overIdeal(median(piTimes), idealOf(file, { option: "batch-ideal", adjust: allBatch }))}` +
      `   headstart ${overIdeal(median(dropTimes), idealOf(file))}`,
  );
}

// 3. Seal to start through the addon.
const engine = new Engine(store, { durability: "normal", tools: [tool({ name: "t", early: true, execute: async () => "ok" })] });
const session = await engine.createSession();
const sealToStart = [];
for (let i = 0; i < CALLS; i++) {
  const run = engine.wrap(session, scriptedStream({ blocks: [{ call: { id: `c${i}`, name: "t", arguments: { text: "x" } } }, { text: "and on" }], stop: "toolUse" }), { format: "pi" });
  for await (const _ of run);
  for (const call of await run.calls()) if (call.sealToStartMs !== null) sealToStart.push(call.sealToStartMs);
}
console.log(
  `\nseal to start through the addon, the prefix commit included (SQLite, durability normal), ${sealToStart.length} calls:` +
    ` p50 ${percentile(sealToStart, 50).toFixed(3)} ms, p95 ${percentile(sealToStart, 95).toFixed(3)} ms`,
);

// headstart/ai against the plain Vercel AI SDK (`ai` 7), side by side in one run (docs/performance.md, "The AI SDK"):
//
// 1. lead: through each real provider package (@ai-sdk/openai's Chat Completions and Responses, @ai-sdk/anthropic)
//    against a paced local server whose response seals its call, then streams `--tail-ms` (600) more: when the tool's
//    body starts, against the response's last byte, plain and wrapped;
// 2. seal to start: a scripted model's call part passed on → the early tool's first line, over many calls, and the
//    engine's own stored figure (its seal → its start: the prefix commit included);
// 3. per streamed part: `streamText` over `--deltas` (50,000) text deltas ready at once, `fullStream` read to its
//    end, plain and wrapped alternating (wrapped: in memory, and a SQLite file);
// 4. scenarios 01, 03, 05 and 06 of the corpus as AI SDK scripts on real timers (kept on time: `sleepUntil`), each
//    loop beside its own ideal: the engine's replay on the virtual clock (`HEADSTART_CLI`, or `--ideal 01=450,...` and
//    `--plain-ideal 01=750,...`) of the scenario as that loop runs it. The plain AI SDK runs every call after its
//    response (05: one at a time, `toolCallConcurrency: 1`; it has no tool that runs alone, so 06's `write` runs with
//    the others); headstart/ai starts the early calls at their seal, and has no sequential mode (README: the AI SDK
//    bounds its own runs, not early ones), so its 05 and 06 run their early calls side by side.
//
//   node bench/ai-sdk.mjs [--deltas 50000] [--runs 5] [--calls 200] [--tail-ms 600]
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { jsonSchema, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { withHeadstart } from "headstart/ai";
import { inspect } from "headstart";
import { aiProviderServer } from "../test/servers.mjs";
import { SCENARIO_FILES, allBatch, args, behaviorOf, idealOf, median, overIdeal, percentile, scenarioTurns, sleepUntil } from "./scenarios.mjs";

const DELTAS = Number(args.deltas ?? 50_000);
const RUNS = Number(args.runs ?? 5);
const CALLS = Number(args.calls ?? 200);
const TAIL_MS = Number(args["tail-ms"] ?? 600);
const PACE_MS = 20;
const dir = mkdtempSync(join(tmpdir(), "headstart-ai-bench-"));
let stores = 0;
const freshStore = () => join(dir, `chat-${stores++}.db`);
const USAGE = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
const finish = (unified) => ({ type: "finish", finishReason: { unified, raw: unified }, usage: USAGE });
const drain = async (result) => {
  for await (const _ of result.fullStream);
};
console.log(`headstart/ai against ai 7 (Node ${process.versions.node}), median of ${RUNS} runs`);

// 1. Lead, through the provider packages.
const PROVIDERS = {
  "@ai-sdk/openai, Chat Completions": { path: "/chat/completions", model: (url) => createOpenAI({ baseURL: `${url}/v1`, apiKey: "bench" }).chat("paced") },
  "@ai-sdk/openai, Responses": { path: "/responses", model: (url) => createOpenAI({ baseURL: `${url}/v1`, apiKey: "bench" }).responses("paced") },
  "@ai-sdk/anthropic": { path: "/messages", model: (url) => createAnthropic({ baseURL: `${url}/v1`, apiKey: "bench" })("paced") },
};

/** Milliseconds from the body's start to the response's last byte (negative: the body started after it). */
async function lead(provider, wrapped) {
  const server = await aiProviderServer({ after: Math.round(TAIL_MS / PACE_MS), paceMs: PACE_MS });
  try {
    let startedAt;
    const tools = {
      lookup: tool({
        inputSchema: jsonSchema({ type: "object", properties: { query: { type: "string" } } }),
        execute: async ({ query }) => {
          startedAt ??= performance.now();
          return `found ${query}`;
        },
      }),
    };
    const model = provider.model(server.url);
    const run = wrapped ? await withHeadstart({ model, tools, store: freshStore(), durability: "normal", early: ["lookup"] }) : { model, tools };
    await drain(streamText({ model: run.model, tools: run.tools, prompt: "the weather?", maxOutputTokens: 100, stopWhen: stepCountIs(2) }));
    return server.endedAt[provider.path] - startedAt;
  } finally {
    server.close();
  }
}

console.log(`\nlead: the body's start before the response's last byte (ms; negative: after it), the call sealed ${TAIL_MS} ms before it:`);
for (const [name, provider] of Object.entries(PROVIDERS)) {
  const plain = [];
  const wrapped = [];
  for (let run = 0; run < RUNS; run++) {
    plain.push(await lead(provider, false));
    wrapped.push(await lead(provider, true));
  }
  console.log(`  ${name.padEnd(34)} ai ${median(plain).toFixed(1).padStart(7)}   headstart/ai ${median(wrapped).toFixed(1).padStart(7)}`);
}

// 2. Seal to start.
/** A model whose every call answers with one call of `tool` (then, the next step, text); `passed` marks each call's part. */
function oneCallModel(passed) {
  let step = 0;
  return new MockLanguageModelV4({
    doStream: async () => {
      const call = step++ % 2 === 0;
      const id = `c${step}`;
      const parts = call
        ? [{ type: "stream-start", warnings: [] }, { type: "tool-input-start", id, toolName: "t" }, { type: "tool-input-delta", id, delta: '{"n":1}' }, { type: "tool-input-end", id }, { type: "tool-call", toolCallId: id, toolName: "t", input: '{"n":1}' }, { type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "and on" }, { type: "text-end", id: "t" }, finish("tool-calls")]
        : [{ type: "stream-start", warnings: [] }, { type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: "done" }, { type: "text-end", id: "t" }, finish("stop")];
      return {
        stream: new ReadableStream({
          async start(controller) {
            for (const part of parts) {
              if (part.type === "tool-input-end") passed.set(id, performance.now());
              controller.enqueue(part);
              await new Promise((resolve) => setImmediate(resolve));
            }
            controller.close();
          },
        }),
      };
    },
  });
}

{
  const passed = new Map();
  const firstLine = [];
  const store = freshStore();
  const tools = {
    t: tool({
      inputSchema: jsonSchema({ type: "object" }),
      execute: async (_, { toolCallId }) => {
        firstLine.push(performance.now() - passed.get(toolCallId));
        return "ok";
      },
    }),
  };
  const wrapped = await withHeadstart({ model: oneCallModel(passed), tools, store, durability: "normal", early: ["t"] });
  for (let i = 0; i < CALLS; i++) await drain(streamText({ model: wrapped.model, tools: wrapped.tools, prompt: `go ${i}`, stopWhen: stepCountIs(2) }));
  const stored = (await inspect(store, wrapped.sessionId)).sessions[0].figures.calls.map((call) => call.seal_to_start_ms).filter((ms) => typeof ms === "number");
  console.log(
    `\nseal to start, ${firstLine.length} early calls (SQLite, durability normal): the input's end passed on → the body's first line` +
      ` p50 ${percentile(firstLine, 50).toFixed(3)} ms, p95 ${percentile(firstLine, 95).toFixed(3)} ms;` +
      ` the engine's stored figure (its seal → its start) p50 ${percentile(stored, 50).toFixed(3)} ms, p95 ${percentile(stored, 95).toFixed(3)} ms`,
  );
}

// 3. Per streamed part.
function manyDeltas() {
  return new MockLanguageModelV4({
    doStream: async () => ({
      stream: new ReadableStream({
        start(controller) {
          controller.enqueue({ type: "stream-start", warnings: [] });
          controller.enqueue({ type: "text-start", id: "t" });
          for (let i = 0; i < DELTAS; i++) controller.enqueue({ type: "text-delta", id: "t", delta: "tok " });
          controller.enqueue({ type: "text-end", id: "t" });
          controller.enqueue(finish("stop"));
          controller.close();
        },
      }),
    }),
  });
}

/** Nanoseconds per part of one `streamText` over many deltas, read to its end; `wrap` makes the model (or not). */
async function perPart(wrap) {
  const model = await wrap(manyDeltas());
  const started = performance.now();
  await drain(streamText({ model, prompt: "go" }));
  return ((performance.now() - started) * 1e6) / (DELTAS + 4);
}

const parts = { plain: [], memory: [], file: [] };
// One run of each first, unmeasured: the JIT warms to each path.
for (let run = -1; run < RUNS; run++) {
  const plain = await perPart(async (model) => model);
  const memory = await perPart(async (model) => (await withHeadstart({ model })).model);
  const file = await perPart(async (model) => (await withHeadstart({ model, store: freshStore(), durability: "normal" })).model);
  if (run < 0) continue;
  parts.plain.push(plain);
  parts.memory.push(memory);
  parts.file.push(file);
}
console.log(`\nper streamed part, streamText over ${DELTAS} text deltas ready at once, fullStream read to its end:`);
console.log(`  ai 7                           ${median(parts.plain).toFixed(0)} ns`);
console.log(`  headstart/ai, in memory        ${median(parts.memory).toFixed(0)} ns  (${(median(parts.memory) / median(parts.plain)).toFixed(3)}x)`);
console.log(`  headstart/ai, a SQLite file    ${median(parts.file).toFixed(0)} ns  (${(median(parts.file) / median(parts.plain)).toFixed(3)}x)`);

// 4. Scenarios.
const FINISH = { tool_use: "tool-calls", stop: "stop", length: "length" };

/** A model replaying the scenario's turns on real timers (`at_ms` from each stream's start), as the AI SDK's parts. */
function replayModel(turns) {
  let next = 0;
  return new MockLanguageModelV4({
    doStream: async () => {
      const events = turns[next++] ?? [{ at_ms: 0, type: "start" }, { at_ms: 0, type: "done", stop_reason: "stop" }];
      const ids = new Map();
      const inputs = new Map();
      return {
        stream: new ReadableStream({
          async start(controller) {
            const started = performance.now();
            for (const event of events) {
              if (performance.now() < started + event.at_ms) await sleepUntil(started + event.at_ms);
              for (const part of partsOf(event, ids, inputs)) controller.enqueue(part);
            }
            controller.close();
          },
        }),
      };
    },
  });
}

/** The AI SDK's parts of one delta-log event. */
function partsOf(event, ids, inputs) {
  const block = `b${event.index}`;
  switch (event.type) {
    case "start":
      return [{ type: "stream-start", warnings: [] }];
    case "text_start":
      return [{ type: "text-start", id: block }];
    case "text_delta":
      return [{ type: "text-delta", id: block, delta: event.delta }];
    case "text_end":
      return [{ type: "text-end", id: block }];
    case "toolcall_start":
      ids.set(event.index, { id: event.id, name: event.name });
      inputs.set(event.index, "");
      return [{ type: "tool-input-start", id: event.id, toolName: event.name }];
    case "toolcall_delta":
      inputs.set(event.index, inputs.get(event.index) + event.delta);
      return [{ type: "tool-input-delta", id: ids.get(event.index).id, delta: event.delta }];
    case "toolcall_end": {
      const { id, name } = ids.get(event.index);
      const input = event.arguments ? JSON.stringify(event.arguments) : inputs.get(event.index) || "{}";
      return [{ type: "tool-input-end", id }, { type: "tool-call", toolCallId: id, toolName: name, input }];
    }
    case "done":
      return [finish(FINISH[event.stop_reason] ?? "stop")];
    default:
      return [];
  }
}

function scenarioTools(scenario) {
  return Object.fromEntries(
    (scenario.tools ?? []).map((spec) => [
      spec.name,
      tool({
        description: spec.description ?? "",
        inputSchema: jsonSchema({ type: "object" }),
        execute: async (_, { toolCallId }) => {
          const behavior = behaviorOf(spec, toolCallId);
          if (behavior.delay_ms) await sleepUntil(performance.now() + behavior.delay_ms);
          if (behavior.error) throw new Error(behavior.error);
          return behavior.result?.text ?? "";
        },
      }),
    ]),
  );
}

async function runScenario(file, wrapped) {
  const { scenario, turns } = scenarioTurns(file);
  const tools = scenarioTools(scenario);
  const early = (scenario.tools ?? []).filter((spec) => spec.async).map((spec) => spec.name);
  const model = replayModel(turns);
  const run = wrapped ? await withHeadstart({ model, tools, store: freshStore(), durability: "normal", early }) : { model, tools };
  const sequential = scenario.config?.tool_execution === "sequential";
  const started = performance.now();
  await drain(
    streamText({ model: run.model, tools: run.tools, prompt: scenario.prompt ?? "go", stopWhen: stepCountIs(turns.length + 1), ...(sequential ? { toolCallConcurrency: 1 } : {}) }),
  );
  return performance.now() - started;
}

/** The scenario as the plain AI SDK runs it: every call after its response; no tool runs alone. */
function asPlain(scenario) {
  allBatch(scenario);
  for (const spec of scenario.tools ?? []) delete spec.execution_mode;
}

/** The scenario as headstart/ai runs it: the early calls at their seal, side by side. */
function asWrapped(scenario) {
  delete scenario.config;
  for (const spec of scenario.tools ?? []) delete spec.execution_mode;
}

console.log(`\nscenarios on real timers (ms), each loop over its own ideal (the scenario as it runs it):`);
for (const file of SCENARIO_FILES) {
  const plain = [];
  const wrapped = [];
  for (let run = 0; run < RUNS; run++) {
    plain.push(await runScenario(file, false));
    wrapped.push(await runScenario(file, true));
  }
  const plainIdeal = idealOf(file, { option: "plain-ideal", adjust: asPlain });
  const wrappedIdeal = idealOf(file, { adjust: asWrapped });
  console.log(`  ${file.replace(".json", "").padEnd(28)} ai ${overIdeal(median(plain), plainIdeal)}   headstart/ai ${overIdeal(median(wrapped), wrappedIdeal)}`);
}

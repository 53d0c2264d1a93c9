// The AI SDK differential test's pieces: a seeded generator of scripts (model responses as stream parts, and what
// the app does around them), tick-paced mock models (`ai/test`'s MockLanguageModelV4), the tools, and a runner that
// drives `streamText`, `generateText` or a `ToolLoopAgent` with one script, plain or through `withHeadstart`, and
// gathers what the app sees (ids, times and durations aside) and how often each body ran.
import { generateText, streamText, stepCountIs, tool, ToolLoopAgent } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { withHeadstart } from "headstart/ai";

/** How long a gated stream waits for an early call to start: a bound, not a timing (a call that never starts fails). */
const GATE_MS = 10_000;
const USAGE = { inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 5, text: 5, reasoning: undefined } };

/** One turn of the event loop. */
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** The scripted tools; `runs` counts each body's runs, `started` is told of each call that starts. */
export function makeTools(runs, started) {
  const body = (name, make) => async (input, options) => {
    runs[name] = (runs[name] ?? 0) + 1;
    started(options?.toolCallId);
    return make(input, options);
  };
  const q = z.object({ q: z.string() });
  return {
    lookup: tool({ description: "reads", inputSchema: q, execute: body("lookup", async ({ q }) => (await tick(), await tick(), { found: q })) }),
    note: tool({ description: "reads text", inputSchema: q, execute: body("note", async ({ q }) => (await tick(), `note ${q}`)) }),
    fail: tool({ description: "throws", inputSchema: q, execute: body("fail", async () => (await tick(), Promise.reject(new Error("boom")))) }),
    write: tool({ description: "writes", inputSchema: q, execute: body("write", async ({ q }) => (await tick(), `written ${q}`)) }),
    approve: tool({ description: "needs approval", inputSchema: q, needsApproval: true, execute: body("approve", async ({ q }) => `approved ${q}`) }),
    client: tool({ description: "answered by the app", inputSchema: q }),
  };
}

/** The tools an early start may run (read-only, no approval). */
export const EARLY_ABLE = ["lookup", "note", "fail"];

/** One generated script. */
export function generate(rng, index) {
  const kinds = [
    "text", "reasoning", "one call", "calls", "calls", "mixed", "throws", "unknown", "invalid", "repair", "approval",
    "active tools", "prepare step", "length", "stream error", "abort", "steps", "tool choice", "generate", "agent",
    "client tool", "retry", "ui",
  ];
  const kind = kinds[index % kinds.length];
  let callNo = 0;
  const call = (name, input) => ({ call: { id: `call_${index}_${callNo++}`, name, input: JSON.stringify(input) } });
  const text = (words) => ({ text: Array.from({ length: words }, (_, i) => `w${i}`).join(" ") });
  const someCalls = (names = ["lookup", "note", "write", "fail"]) => {
    const blocks = rng.chance(0.5) ? [text(1 + rng.int(3))] : [];
    const count = 1 + rng.int(3);
    for (let i = 0; i < count; i++) blocks.push(call(rng.pick(names), { q: `v${rng.int(100)}` }));
    if (rng.chance(0.5)) blocks.push(text(2 + rng.int(5)));
    return blocks;
  };
  const steps = [];
  const script = { kind, steps, stopAt: 2, mode: "stream", options: {} };
  const answer = { blocks: [text(2)], finish: "stop" };
  switch (kind) {
    case "text":
      steps.push({ blocks: [text(3 + rng.int(8))], finish: "stop" });
      script.stopAt = 1;
      break;
    case "reasoning":
      steps.push({ blocks: [{ reasoning: "thinking it over" }, call("lookup", { q: "r" })], finish: "tool-calls" }, answer);
      break;
    case "one call":
      steps.push({ blocks: [call(rng.pick(["lookup", "note", "write"]), { q: "one" })], finish: "tool-calls" }, answer);
      break;
    case "mixed":
      steps.push({ blocks: [call("lookup", { q: "a" }), call("write", { q: "b" }), call("note", { q: "c" })], finish: "tool-calls" }, answer);
      break;
    case "throws":
      steps.push({ blocks: [call("fail", { q: "x" }), call("lookup", { q: "y" })], finish: "tool-calls" }, answer);
      break;
    case "unknown":
      steps.push({ blocks: [call("nope", { q: "x" }), call("lookup", { q: "y" })], finish: "tool-calls" }, answer);
      break;
    case "invalid":
      steps.push({ blocks: [call("lookup", { q: 5 }), call("note", { q: "ok" })], finish: "tool-calls" }, answer);
      break;
    case "repair":
      // The model names a tool that does not exist; the app's repair maps it to `lookup`.
      steps.push({ blocks: [call("look_up", { q: "fixed" })], finish: "tool-calls" }, answer);
      script.options.repair = true;
      break;
    case "approval":
      steps.push({ blocks: [call("approve", { q: "go" }), call("lookup", { q: "meanwhile" })], finish: "tool-calls" }, answer, answer);
      script.approval = rng.chance(0.5);
      break;
    case "active tools":
      steps.push({ blocks: [call("lookup", { q: "inactive" }), call("note", { q: "active" })], finish: "tool-calls" }, answer);
      script.options.activeTools = ["note", "write"];
      break;
    case "prepare step":
      steps.push({ blocks: [call("note", { q: "s0" })], finish: "tool-calls" }, { blocks: [call("lookup", { q: "s1" })], finish: "tool-calls" }, answer);
      script.stopAt = 3;
      script.options.prepareStep = true;
      break;
    case "length":
      steps.push({ blocks: [call("lookup", { q: "cut" }), text(4)], finish: "length" });
      break;
    case "stream error":
      steps.push({ blocks: [text(2), call("lookup", { q: "before the error" }), text(3)], finish: "error" });
      break;
    case "abort":
      steps.push({ blocks: [text(2), call("lookup", { q: "before the abort" }), text(6)], finish: "tool-calls", abortAfter: 6 + rng.int(4) }, answer);
      break;
    case "steps":
      steps.push({ blocks: someCalls(), finish: "tool-calls" }, { blocks: someCalls(), finish: "tool-calls" }, answer);
      script.stopAt = 3;
      break;
    case "tool choice":
      steps.push({ blocks: [call("note", { q: "chosen" })], finish: "tool-calls" }, answer);
      script.options.toolChoice = rng.pick(["required", "none", { type: "tool", toolName: "note" }]);
      break;
    case "generate":
      steps.push({ blocks: someCalls(["lookup", "note", "write"]), finish: "tool-calls" }, answer);
      script.mode = "generate";
      break;
    case "agent":
      steps.push({ blocks: someCalls(["lookup", "note", "write"]), finish: "tool-calls" }, answer);
      script.mode = rng.chance(0.5) ? "agent stream" : "agent generate";
      break;
    case "client tool":
      steps.push({ blocks: [call("client", { q: "ask the user" }), call("lookup", { q: "also" })], finish: "tool-calls" }, answer, answer);
      script.clientAnswer = true;
      break;
    case "retry":
      steps.push({ blocks: [call("lookup", { q: "first attempt" }), text(3)], finish: "error" });
      steps.push({ blocks: [call("lookup", { q: "second attempt" })], finish: "tool-calls" }, answer);
      script.options.streamRetries = 1;
      break;
    default:
      steps.push({ blocks: someCalls(), finish: "tool-calls" }, answer);
  }
  script.early = new Set(EARLY_ABLE.filter((_, i) => (index >> i) & 1));
  if (script.early.size === 0) script.early.add("lookup");
  return script;
}

/** The stream parts of one scripted response. */
export function partsOf(step) {
  const parts = [{ type: "stream-start", warnings: [] }, { type: "response-metadata", id: "resp", modelId: "scripted", timestamp: new Date(0) }];
  step.blocks.forEach((block, index) => {
    const id = `b${index}`;
    if (block.text !== undefined || block.reasoning !== undefined) {
      const kind = block.text !== undefined ? "text" : "reasoning";
      parts.push({ type: `${kind}-start`, id });
      for (const word of (block.text ?? block.reasoning).split(" ")) parts.push({ type: `${kind}-delta`, id, delta: `${word} ` });
      parts.push({ type: `${kind}-end`, id });
    } else {
      const { id: callId, name, input } = block.call;
      parts.push({ type: "tool-input-start", id: callId, toolName: name });
      for (let at = 0; at < input.length; at += 6) parts.push({ type: "tool-input-delta", id: callId, delta: input.slice(at, at + 6) });
      parts.push({ type: "tool-input-end", id: callId }, { type: "tool-call", toolCallId: callId, toolName: name, input });
    }
  });
  if (step.finish === "error") parts.push({ type: "error", error: new Error("the provider failed") });
  else parts.push({ type: "finish", finishReason: { unified: step.finish, raw: step.finish }, usage: USAGE });
  return parts;
}

/** The content of one scripted response, as `doGenerate` gives it. */
function contentOf(step) {
  return step.blocks.map((block) =>
    block.call
      ? { type: "tool-call", toolCallId: block.call.id, toolName: block.call.name, input: block.call.input }
      : { type: block.text !== undefined ? "text" : "reasoning", text: block.text ?? block.reasoning },
  );
}

/**
 * A mock model answering each call with the script's next step; `gate(part, earlierCalls)` holds the stream after a
 * call's part.
 */
function mockModel(script, { gate, controller }) {
  let next = 0;
  const nextStep = () => script.steps[next++] ?? { blocks: [{ text: "nothing more" }], finish: "stop" };
  return new MockLanguageModelV4({
    doStream: async () => {
      const step = nextStep();
      let cancelled = false;
      return {
        stream: new ReadableStream({
          async start(stream) {
            const calls = [];
            for (const [at, part] of partsOf(step).entries()) {
              await tick();
              if (cancelled) return;
              // The app aborts while the response streams.
              if (step.abortAfter === at) controller.abort();
              try {
                stream.enqueue(part);
              } catch {
                return;
              }
              if (part.type === "tool-call") {
                await gate?.(part, calls);
                calls.push(part);
              }
            }
            try {
              stream.close();
            } catch {
              // cancelled meanwhile
            }
          },
          cancel() {
            cancelled = true;
          },
        }),
      };
    },
    doGenerate: async () => {
      const step = nextStep();
      return { content: contentOf(step), finishReason: { unified: step.finish, raw: step.finish }, usage: USAGE, warnings: [] };
    },
  });
}

/** Fields that differ from run to run (ids the AI SDK makes, times, durations), left out of every comparison. */
const VARYING = new Set(["callId", "performance", "timestamp", "request", "messageId", "responseId"]);
const MADE_ID = /^(aitxt|aires|msg|call|aiobj|aitool|aireasoning)-[A-Za-z0-9]{8,}$/;

/** `value` without what varies from run to run; errors as their messages. */
export function normalize(value) {
  if (value instanceof Error) return { error: value.message };
  if (Array.isArray(value)) return completionOrder(value.map(normalize));
  if (typeof value === "string") return MADE_ID.test(value) ? "<id>" : value;
  if (!value || typeof value !== "object" || value instanceof Date) return value instanceof Date ? "<date>" : value;
  const out = {};
  for (const [key, field] of Object.entries(value)) {
    if (VARYING.has(key) || typeof field === "function") continue;
    out[key] = normalize(field);
  }
  return out;
}

/** The parts that arrive as calls complete (the AI SDK keeps them in completion order, which early calls change). */
const COMPLETIONS = new Set(["tool-result", "tool-error", "tool-output-available", "tool-output-error"]);

/**
 * `parts` (a step's content, or UI message stream parts) with each run of results sorted by call: the AI SDK keeps
 * them in the order calls complete, and an early call completes sooner.
 */
export function completionOrder(parts) {
  if (!Array.isArray(parts)) return parts;
  const out = [];
  let run = [];
  const flush = () => {
    run.sort((a, b) => (a.toolCallId < b.toolCallId ? -1 : a.toolCallId > b.toolCallId ? 1 : 0));
    out.push(...run);
    run = [];
  };
  for (const part of parts) {
    if (COMPLETIONS.has(part?.type)) run.push(part);
    else {
      flush();
      out.push(part);
    }
  }
  flush();
  return out;
}

/** What a promise resolves to, or its rejection's message. */
async function settled(promise) {
  try {
    return await promise;
  } catch (error) {
    return { rejected: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * Runs one streamText (or generateText, or an agent) call of `mode`: what the app sees of it (`view`, ids and times
 * aside), and its last step's content and response messages as they are (`last`, `messages`).
 */
async function runOnce(mode, settings) {
  const { prompt, messages: history, ...agentSettings } = settings;
  const input = history ? { messages: history } : { prompt };
  if (mode === "generate" || mode === "agent generate") {
    const run = mode === "generate" ? generateText(settings) : new ToolLoopAgent(agentSettings).generate(input);
    const result = await settled(run);
    if (result.rejected) return { view: { outcome: result } };
    const view = { text: result.text, steps: normalize(result.steps), messages: normalize(result.response.messages), finishReason: result.finishReason };
    return { view, last: result.steps.at(-1)?.content ?? [], messages: result.response.messages };
  }
  const result = mode === "stream" ? streamText(settings) : await new ToolLoopAgent(agentSettings).stream(input);
  const ui = [];
  for await (const part of result.toUIMessageStream({ onError: (error) => (error instanceof Error ? error.message : String(error)) })) ui.push(part);
  const response = await settled(result.response);
  const steps = await settled(result.steps);
  const view = {
    ui: normalize(ui),
    text: await settled(result.text),
    steps: normalize(steps),
    messages: normalize(response.messages ?? response),
    finishReason: await settled(result.finishReason),
  };
  return { view, last: Array.isArray(steps) ? (steps.at(-1)?.content ?? []) : [], messages: response.messages ?? [] };
}

/**
 * Runs `script`, plain or through `withHeadstart` (`wrapped`, with `store`): what the app saw (each call of the app's:
 * the first, and the one that answers an approval or a client tool), the callbacks' arguments, each body's runs, and
 * the early calls that started before their response's stream had gone on.
 */
export async function runScript(script, { wrapped, store }) {
  const runs = {};
  const starts = new Map();
  const startOf = (id) => {
    if (!starts.has(id)) {
      let resolve;
      starts.set(id, { promise: new Promise((done) => (resolve = done)), resolve, started: false });
    }
    return starts.get(id);
  };
  const tools = makeTools(runs, (id) => {
    const start = startOf(id);
    start.started = true;
    start.resolve();
  });
  const controller = new AbortController();
  const gated = [];
  // An early call starts at once when every call before it in the response is early too (a call that waits for the
  // response's end holds back the early ones after it): the stream then waits for it to start.
  const gate = wrapped
    ? (part, earlier) => {
        if (!script.early.has(part.toolName) || !earlier.every((call) => script.early.has(call.toolName))) return undefined;
        // A call whose input the AI SDK refuses never starts, nor one of a tool the step does not offer.
        if (typeof JSON.parse(part.input).q !== "string") return undefined;
        const { activeTools, toolChoice } = script.options;
        if ((activeTools && !activeTools.includes(part.toolName)) || toolChoice === "none") return undefined;
        gated.push(part.toolCallId);
        return Promise.race([startOf(part.toolCallId).promise, new Promise((done) => setTimeout(done, GATE_MS).unref())]);
      }
    : undefined;
  let model = mockModel(script, { gate, controller });
  let appTools = tools;
  let sessionId;
  if (wrapped) {
    ({ model, tools: appTools, sessionId } = await withHeadstart({ model, tools, store, early: [...script.early] }));
  }
  const seen = { steps: [], finish: [] };
  const { activeTools, toolChoice, repair, prepareStep, streamRetries } = script.options;
  const settings = {
    model,
    tools: appTools,
    prompt: "hello",
    stopWhen: stepCountIs(script.stopAt),
    abortSignal: controller.signal,
    onStepFinish: (step) => void seen.steps.push(normalize(step)),
    onFinish: (event) => void seen.finish.push(normalize(event)),
    ...(activeTools ? { activeTools } : {}),
    ...(toolChoice ? { toolChoice } : {}),
    ...(streamRetries ? { streamRetries } : {}),
    ...(repair ? { experimental_repairToolCall: async ({ toolCall }) => (toolCall.toolName === "look_up" ? { ...toolCall, toolName: "lookup" } : null) } : {}),
    ...(prepareStep ? { prepareStep: ({ stepNumber }) => (stepNumber === 1 ? { activeTools: ["lookup"] } : undefined) } : {}),
  };
  const first = await runOnce(script.mode, settings);
  const outputs = [first.view];
  // The app's next call: the answer to an approval request, or the client tool's result.
  const asked = first.last.filter((part) => part.type === "tool-approval-request" || (part.type === "tool-call" && part.toolName === "client"));
  if (asked.length > 0 && (script.approval !== undefined || script.clientAnswer)) {
    const { prompt: _prompt, ...rest } = settings;
    const answers = asked.map((part) =>
      part.type === "tool-approval-request"
        ? { type: "tool-approval-response", approvalId: part.approvalId, approved: script.approval }
        : { type: "tool-result", toolCallId: part.toolCallId, toolName: "client", output: { type: "text", value: "the user says yes" } },
    );
    const messages = [{ role: "user", content: "hello" }, ...first.messages, { role: "tool", content: answers }];
    outputs.push((await runOnce(script.mode, { ...rest, messages })).view);
  }
  const startedEarly = gated.filter((id) => startOf(id).started);
  return { outputs, seen, runs, gated, startedEarly, sessionId };
}

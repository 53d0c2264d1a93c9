// headstart/ai: early execution inside the Vercel AI SDK's own loop (`streamText`, `generateText`, `ToolLoopAgent`),
// with a durable transcript. `withHeadstart` wraps the model (`wrapLanguageModel`'s middleware: each model call is one
// response of the chat's session, its stream fed to the engine as it passes, unchanged and undelayed) and the tools
// (`execute` hands over an early call's run, or runs a call once the engine has made it durable). The AI SDK keeps
// running its loop; the deliberate differences are listed in README.md.

import { wrapLanguageModel } from "ai";

import { Engine } from "./lib/engine.js";
import { errorResult } from "./lib/results.js";
import { Chat, specOf } from "./lib/ai/chat.js";
import { modelMessages } from "./lib/ai/convert.js";
import { headstartMiddleware } from "./lib/ai/middleware.js";
import { engineAnswer, messageOf } from "./lib/ai/response.js";
import { wrapTools } from "./lib/ai/tools.js";

const OPTIONS = new Set(["model", "tools", "store", "early", "idempotent", "sessionId", "durability"]);

/** A `TypeError` when `model` is not a language model `streamText` takes (LanguageModelV4 or V3). */
function checkModel(model) {
  if (typeof model === "string") {
    throw new TypeError(
      `withHeadstart needs the model object (openai("gpt-5"), anthropic(...)), not its id ${JSON.stringify(model)}: it wraps the model itself`,
    );
  }
  const version = model?.specificationVersion;
  if (!model || typeof model !== "object" || typeof model.doStream !== "function" || !["v3", "v4"].includes(version)) {
    throw new TypeError(
      "withHeadstart's model must be an AI SDK language model (LanguageModelV4 or V3, with doStream and doGenerate), " +
        `not ${describe(model)}`,
    );
  }
}

function describe(value) {
  if (value === null || value === undefined) return String(value);
  if (typeof value !== "object") return `a ${typeof value}`;
  return `an object with ${Object.keys(value).slice(0, 6).join(", ") || "no fields"}${value.specificationVersion ? ` (specificationVersion ${value.specificationVersion})` : ""}`;
}

/** The names of `list` (an array of tool names), each one of `tools`; a `TypeError` naming one that is not. */
function namesOf(list, tools, option) {
  if (!Array.isArray(list)) throw new TypeError(`${option} must be an array of tool names`);
  for (const name of list) {
    if (!Object.hasOwn(tools, name)) {
      throw new TypeError(`${option} names ${JSON.stringify(name)}, which is not one of the tools (${Object.keys(tools).join(", ")})`);
    }
  }
  return new Set(list);
}

/** The early tools: those `early` names and those marked `early: true`, each one an early start may run. */
function earlyTools(tools, early) {
  const names = namesOf(early, tools, "early");
  for (const [name, tool] of Object.entries(tools)) if (tool?.early === true) names.add(name);
  for (const name of names) {
    const tool = tools[name];
    if (tool?.needsApproval) {
      throw new TypeError(`tool ${name} needs approval (needsApproval): the user decides whether it runs, so it is never early`);
    }
    if (typeof tool?.execute !== "function") {
      throw new TypeError(`tool ${name} has no execute (its results are the app's to give), so it cannot start early`);
    }
    if (tool.contextSchema) {
      throw new TypeError(`tool ${name} takes the step's context (contextSchema), which a call started early does not have`);
    }
  }
  return names;
}

/**
 * Wraps an AI SDK model and tools for headstart: resolves to `{ model, tools, sessionId }`, for `streamText`,
 * `generateText` or a `ToolLoopAgent`.
 * @param {import("./ai.js").WithHeadstartOptions} options
 * @returns {Promise<import("./ai.js").Headstarted>}
 */
export async function withHeadstart(options) {
  if (!options || typeof options !== "object") throw new TypeError("withHeadstart takes { model, tools, store, early, ... }");
  const unknown = Object.keys(options).filter((key) => !OPTIONS.has(key));
  if (unknown.length > 0) throw new TypeError(`unknown withHeadstart options: ${unknown.join(", ")} (expected ${[...OPTIONS].join(", ")})`);
  const { model, tools = {}, store, early = [], idempotent = [], sessionId, durability } = options;
  checkModel(model);
  if (!tools || typeof tools !== "object" || Array.isArray(tools)) {
    throw new TypeError("tools must be the AI SDK's tool set: an object of tools by name");
  }
  if (sessionId !== undefined && (typeof sessionId !== "string" || sessionId === "")) {
    throw new TypeError("sessionId must be a non-empty string (your chat's id)");
  }
  const earlyNames = earlyTools(tools, early);
  const chat = await Chat.open({ store, durability, tools, early: earlyNames, idempotent: namesOf(idempotent, tools, "idempotent"), sessionId });
  return {
    model: wrapLanguageModel({ model, middleware: /** @type {any} */ (headstartMiddleware(chat)) }),
    tools: wrapTools(tools, chat),
    sessionId: chat.id,
  };
}

/**
 * Resumes a chat after a crash: every call the transcript admitted without a result gets one (`policy` `fail`: the
 * interrupted result; `rerun_idempotent`: the tools named in `idempotent` run again), and the chat comes back as the
 * AI SDK's `ModelMessage`s, to go on with.
 * @param {import("./ai.js").ResumeOptions} options
 */
export async function resume({ store, sessionId, tools = {}, idempotent = [], policy = "fail", durability } = /** @type {any} */ ({})) {
  if (typeof store !== "string" || store === "") throw new TypeError("resume needs the store the chat is in");
  if (typeof sessionId !== "string" || sessionId === "") throw new TypeError("resume needs the chat's sessionId");
  const rerun = namesOf(idempotent, tools, "idempotent");
  const engine = await Engine.open(store, {
    tools: Object.entries(tools).map(([name, tool]) => specOf(name, tool, new Set(), rerun)),
    onCall: async (letter, { signal }) => {
      const tool = /** @type {any} */ (tools[letter.tool]);
      if (typeof tool?.execute !== "function") return errorResult(`tool ${letter.tool} has no execute`);
      try {
        return engineAnswer(await tool.execute(letter.arguments, { toolCallId: letter.callId, messages: [], abortSignal: signal }));
      } catch (error) {
        return errorResult(messageOf(error));
      }
    },
    durability: durability ?? "full",
  });
  const recovered = await engine.recover(sessionId, policy);
  return { messages: modelMessages(await engine.log(sessionId)), recovered };
}

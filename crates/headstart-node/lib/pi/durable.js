// The drop-in's durable side: the store a loop writes, and the session of a loop, with its engines (one per tool set
// the loop runs with), whose asks go to the loop's turn.

import { messageOf } from "../bridge.js";
import { Engine } from "../engine.js";
import { ephemeralStore } from "../store.js";
import { engineResult, errorResult, toResult } from "../results.js";
import { textOf } from "./convert.js";

/** Whether a pi tool starts early. */
export function isEarly(tool) {
  return tool?.executionMode === "early" || tool?.early === true;
}

/** The engine's spec of a pi tool: scheduling only (pi validates the arguments itself, with its own schema). */
function specOfPiTool(tool) {
  return {
    name: tool.name,
    description: tool.description ?? "",
    parameters: { type: "object" },
    early: isEarly(tool),
    sequential: tool.executionMode === "sequential",
    idempotent: tool.replay === "safe",
  };
}

/**
 * An engine over `store` for pi's `tools`, whose calls `onCall` runs (pi runs them through its steps, the engine only
 * decides when they may start).
 * @param {string} store
 * @param {{ durability?: "full" | "normal", tools: any[], toolExecution?: string, earlyExecution?: boolean, onCall: NonNullable<import("../../index.js").EngineOptions["onCall"]> }} options
 */
export function openEngine(store, { durability, tools, toolExecution, earlyExecution, onCall }) {
  return Engine.open(store, {
    tools: tools.map(specOfPiTool),
    onCall,
    durability,
    toolExecution: toolExecution === "sequential" ? "sequential" : "parallel",
    earlyExecution,
  });
}

/** Runs a call of one of pi's `tools` as recovery asks for it (an idempotent call run again): its result, never a throw. */
export async function runRecovered(tools, letter, { signal, onUpdate }) {
  const tool = tools.find((candidate) => candidate.name === letter.tool);
  if (!tool) return errorResult(`Tool ${letter.tool} not found`);
  try {
    return engineResult(toResult(await tool.execute(letter.callId, letter.arguments, signal, onUpdate)), false);
  } catch (error) {
    return errorResult(messageOf(error));
  }
}

/** A session of a loop: where its transcript goes, and the engines its responses are wrapped by. */
export class Session {
  /** User messages recorded and not written yet. */
  #users = [];
  /** The loop's engines by tool set (`prepareNextTurn` may change the tools): promises of them. */
  #engines = new Map();
  /** The engine of the session's last response or record: what `flush` writes with. */
  #engine;
  /** The session has its id and is not created yet: the first response's opening creates it. */
  #uncreated = false;
  /** The response being run (a `Turn`): where the engines' asks for calls go. */
  turn;

  constructor(config) {
    this.location = config.store ?? ephemeralStore();
    this.durability = config.durability ?? (config.store ? "full" : "normal");
    this.id = config.storeSessionId;
    this.onSession = config.onStoreSession;
    this.earlyExecution = config.earlyExecution !== false;
  }

  /** The engine for `context`'s tools and `config`'s tool execution, opened once per loop. */
  async engine(context, config) {
    const tools = context.tools ?? [];
    const key = JSON.stringify([tools.map(specOfPiTool), config.toolExecution]);
    let opening = this.#engines.get(key);
    if (!opening) {
      opening = openEngine(this.location, {
        durability: this.durability,
        tools,
        toolExecution: config.toolExecution,
        earlyExecution: this.earlyExecution,
        onCall: (letter, context) => this.#onCall(letter, context),
      });
      this.#engines.set(key, opening);
      opening.catch(() => this.#engines.delete(key));
    }
    const engine = await opening;
    this.#engine = engine;
    if (!this.id) {
      // Named now, created with the first response (`takeCreation`), so the first request does not wait for it.
      this.id = engine.newSessionId();
      this.#uncreated = true;
      this.onSession?.(this.id);
    }
    return engine;
  }

  /** The engine asks for a call of the loop: the turn running the response answers. */
  #onCall(letter, context) {
    if (this.turn) return this.turn.onCall(letter, context);
    return errorResult("no loop runs the session's response (it ended)");
  }

  /** Whether the response opened now creates the session (the first one does); it is taken once. */
  takeCreation() {
    const create = this.#uncreated;
    this.#uncreated = false;
    return create;
  }

  /**
   * Keeps the user messages among `messages` (their text) for the transcript: they are written with the next
   * response's open, before anything of it, so the request need not wait for the store (`flush` writes what no
   * response took).
   */
  async record(messages, context, config) {
    const users = messages.filter((message) => message?.role === "user");
    if (users.length === 0) return;
    await this.engine(context, config);
    for (const message of users) this.#users.push(textOf(message.content));
  }

  /** The user messages kept and not written yet, taken by the response that writes them. */
  takeUsers() {
    return this.#users.splice(0);
  }

  /**
   * Writes what no response took (a loop that failed before its next request): the session's creation, whose id
   * was already given, and the user messages.
   */
  async flush() {
    const users = this.takeUsers();
    if (!this.#engine) return;
    if (this.takeCreation()) await this.#engine.createSession(this.id);
    for (const text of users) await this.#engine.appendUser(this.id, text);
  }
}

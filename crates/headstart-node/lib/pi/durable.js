// The drop-in's durable side: the store a loop writes, an engine per tool set, and the session of a loop.

import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { native } from "../native.js";
import { createDispatcher, messageOf } from "../bridge.js";
import { openStore } from "../engine.js";
import { engineResult, errorResult, toResult } from "../results.js";
import { textOf } from "./convert.js";

/**
 * The store of loops given none: one SQLite file for the process, in memory where the machine has a memory file
 * system (`/dev/shm`), removed when the process exits. (SQLite's own `:memory:` cannot hold the store: it needs a
 * write-ahead log.)
 */
let ephemeral;
function ephemeralStore() {
  if (!ephemeral) {
    const folder = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
    ephemeral = join(folder, `headstart-${process.pid}-${randomUUID()}.db`);
    process.once("exit", () => {
      for (const suffix of ["", "-wal", "-shm"]) rmSync(ephemeral + suffix, { force: true });
    });
  }
  return ephemeral;
}

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

/** Loops in progress, by session: where the engine's letters for a session's calls go. */
export const active = new Map();
/** Engines by store and tool set. */
const engines = new Map();

export async function engineFor(storeLocation, durability, tools, toolExecution, earlyExecution) {
  const specs = tools.map(specOfPiTool);
  const options = { toolExecution: toolExecution === "sequential" ? "sequential" : "parallel", earlyExecution };
  const key = JSON.stringify([storeLocation, durability, specs, options]);
  let engine = engines.get(key);
  if (!engine) {
    engine = openStore(storeLocation, { durability }).then((store) => {
      let built;
      const dispatch = createDispatcher(() => built, {
        call: (letter, context) => {
          const loop = active.get(letter.sessionId);
          if (loop) return loop.onCall(letter, context);
          // No loop of this process holds the session: a recovery running an idempotent call again.
          return recoveryCall(tools, letter, context);
        },
      });
      built = new native.NativeEngine(store, JSON.stringify(specs), JSON.stringify(options), dispatch);
      return { engine: built, store };
    });
    engines.set(key, engine);
    engine.catch(() => engines.delete(key));
  }
  return engine;
}

async function recoveryCall(tools, letter, { signal, onUpdate }) {
  const tool = tools.find((candidate) => candidate.name === letter.tool);
  if (!tool) return errorResult(`Tool ${letter.tool} not found`);
  try {
    return engineResult(toResult(await tool.execute(letter.callId, letter.arguments, signal, onUpdate)), false);
  } catch (error) {
    return errorResult(messageOf(error));
  }
}

/** A session of a loop: where its transcript goes. */
export class Session {
  /** User messages recorded and not written yet. */
  #users = [];
  /** The engine of the session's last response or record: what `flush` writes with. */
  #engine;
  /** The session has its id and is not created yet: the first response's opening creates it. */
  #uncreated = false;

  constructor(config) {
    this.location = config.store ?? ephemeralStore();
    this.durability = config.durability ?? (config.store ? "full" : "normal");
    this.id = config.storeSessionId;
    this.onSession = config.onStoreSession;
    this.earlyExecution = config.earlyExecution !== false;
  }

  async engine(context, config) {
    const { engine } = await engineFor(
      this.location,
      this.durability,
      context.tools ?? [],
      config.toolExecution,
      this.earlyExecution,
    );
    this.#engine = engine;
    if (!this.id) {
      // Named now, created with the first response (`takeCreation`), so the first request does not wait for it.
      this.id = engine.newSessionId();
      this.#uncreated = true;
      this.onSession?.(this.id);
    }
    return engine;
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


// One chat of the AI SDK on the engine: its store session, its engine (whose asks for calls go to the chat's
// responses), each model call as one response of the session, and the prompt's new user messages recorded before it.

import { Engine } from "../engine.js";
import { errorResult } from "../results.js";
import { ephemeralStore } from "../store.js";
import { promptOutcomes, userTexts } from "./convert.js";
import { Response } from "./response.js";

/** The engine's spec of an AI SDK tool: scheduling only (the AI SDK checks the input itself, with its own schema). */
export function specOf(name, tool, early, idempotent) {
  return {
    name,
    description: typeof tool?.description === "string" ? tool.description : "",
    parameters: { type: "object" },
    early: early.has(name),
    idempotent: idempotent.has(name),
  };
}

/** The calls of a stored log without a result, by id (a call is its response's request number and its id). */
function unanswered(log) {
  const calls = new Map();
  for (const { message, request } of log) {
    if (message.role === "assistant") {
      for (const block of message.content ?? []) if (block.type === "tool_call") calls.set(`${request}:${block.id}`, block.id);
    } else if (message.role === "tool_result") {
      calls.delete(`${request}:${message.tool_call_id}`);
    }
  }
  return [...calls.values()];
}

/** A chat: one store session, answered by the AI SDK's own loop, one model call after another. */
export class Chat {
  /** @type {Engine} */
  #engine;
  /** The AI SDK's tools by name, as the app gave them. */
  #tools;
  #early;
  /** Responses whose calls may still be answered, oldest first. */
  #responses = [];
  /** The session's last response (the next one opens once its results are stored). */
  #previous;
  /** The store holds the session (else the next response creates it). */
  #exists;
  /** How many user messages of the prompts the store holds. */
  #recordedUsers;
  /** The response being streamed, while it is. */
  #streaming;

  constructor(engine, id, exists, recordedUsers, tools, early) {
    this.#engine = engine;
    /** The store's session of the chat. */
    this.id = id;
    this.#exists = exists;
    this.#recordedUsers = recordedUsers;
    this.#tools = tools;
    this.#early = early;
  }

  /**
   * A chat over `store` (none: in memory) with the AI SDK's `tools`, those named in `early` starting at their seal
   * and those in `idempotent` run again by recovery; `sessionId` its store session (an existing one goes on).
   */
  static async open({ store, durability, tools, early, idempotent, sessionId }) {
    /** @type {Chat | undefined} */
    let chat;
    const engine = await Engine.open(store ?? ephemeralStore(), {
      tools: Object.entries(tools).map(([name, tool]) => specOf(name, tool, early, idempotent)),
      onCall: (letter, context) => chat?.onCall(letter, context) ?? errorResult("the chat is not open"),
      durability: durability ?? (store ? "full" : "normal"),
    });
    const id = sessionId ?? engine.newSessionId();
    const log = sessionId ? await engine.log(sessionId).catch(() => undefined) : undefined;
    const waiting = unanswered(log ?? []);
    if (waiting.length > 0) {
      throw new Error(
        `session ${id} has calls without a result (${waiting.join(", ")}): the process that ran them ended first ` +
          "(a crash, or a call left to the app, such as an approval). resume({ store, sessionId, tools }) from " +
          "headstart/ai gives each its result; then the chat goes on",
      );
    }
    const users = (log ?? []).filter((entry) => entry.message.role === "user").length;
    chat = new Chat(engine, id, log !== undefined, users, tools, early);
    return chat;
  }

  /** The AI SDK's tool `name`, as the app gave it. */
  tool(name) {
    return this.#tools[name];
  }

  /** Whether calls of tool `name` start at their seal. */
  isEarly(name) {
    return this.#early.has(name);
  }

  /**
   * Opens the response of one model call with `params` (the AI SDK's call options). Before it, what the AI SDK did not
   * run of earlier responses is answered from this prompt, and the prompt's new user messages are recorded. At once:
   * the model's request does not wait for the store.
   */
  respond(params) {
    if (this.#streaming && !this.#streaming.feed.closed) {
      throw new Error(
        "a withHeadstart value serves one chat, one model call at a time: another model call of it is still streaming " +
          "(give each chat, and each concurrent call, a withHeadstart of its own)",
      );
    }
    const outcomes = promptOutcomes(params.prompt);
    for (const response of this.#responses) response.reconcile(outcomes);
    const users = userTexts(params.prompt);
    const fresh = users.slice(this.#recordedUsers);
    this.#recordedUsers = Math.max(this.#recordedUsers, users.length);
    const native = this.#engine.openResponse(this.id, { users: fresh, create: !this.#exists, after: this.#previous });
    this.#exists = true;
    this.#previous = native;
    const response = new Response(this, native, params);
    this.#responses = [...this.#responses.filter((earlier) => !earlier.settled), response];
    response.drained.then(() => (response.settled = true));
    this.#streaming = response;
    return response;
  }

  /** The engine asks for a call: the newest response that holds it (ids may repeat across responses) answers. */
  onCall(letter, context) {
    const response = this.#responses.findLast((candidate) => candidate.holds(letter.callId)) ?? this.#streaming;
    if (!response) return errorResult("no model call of the chat holds the call");
    return response.onCall(letter, context);
  }

  /**
   * The record of the call the AI SDK now runs (`execute` with this `toolCallId`): the newest response's that holds
   * it and that nothing claimed yet; `undefined` when the engine never saw it.
   */
  claim(toolCallId) {
    for (const response of [...this.#responses].reverse()) {
      if (!response.holds(toolCallId)) continue;
      const call = response.call(toolCallId);
      if (call.claimed) continue;
      call.claimed = true;
      return { call, response };
    }
    return undefined;
  }
}

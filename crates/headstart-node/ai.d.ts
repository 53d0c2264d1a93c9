// headstart/ai: early execution inside the Vercel AI SDK's own loop, with a durable transcript.
import type { LanguageModel, ModelMessage, ToolSet } from "ai";

/** What `withHeadstart` takes. */
export interface WithHeadstartOptions<TOOLS extends ToolSet = ToolSet> {
  /** The model `streamText` would take (a LanguageModelV4 or V3 object, such as `openai("gpt-5")`). */
  model: Exclude<LanguageModel, string>;
  /** The AI SDK's tools. */
  tools?: TOOLS;
  /** Where the transcript is kept: a SQLite file path or a `postgresql://` URL; in memory without one. */
  store?: string;
  /** The tools whose calls start at their seal, while the model streams (`early: true` on a tool marks it too). */
  early?: Array<keyof TOOLS & string>;
  /** The tools recovery may run again after a crash. */
  idempotent?: Array<keyof TOOLS & string>;
  /** Your chat's id: the store's session (an existing one goes on). A new one when absent. */
  sessionId?: string;
  /** SQLite: `full` (each commit synced; the default with a store) or `normal` (survives a crash of the process). */
  durability?: "full" | "normal";
}

/** What `withHeadstart` gives, for `streamText`, `generateText` or a `ToolLoopAgent`. */
export interface Headstarted<TOOLS extends ToolSet = ToolSet> {
  /** The wrapped model. */
  model: Exclude<LanguageModel, string>;
  /** The wrapped tools (the same tools, whose `execute` goes through the engine). */
  tools: TOOLS;
  /** The store's session of the chat. */
  sessionId: string;
}

/**
 * Wraps a model and tools for headstart: one value serves every step of a `streamText` call and every later call of
 * the same chat. Rejects with a `TypeError` naming the problem (a model that is not one, an `early` name that is not
 * a tool or needs approval), or with the store's error.
 */
export declare function withHeadstart<TOOLS extends ToolSet = ToolSet>(options: WithHeadstartOptions<TOOLS>): Promise<Headstarted<TOOLS>>;

/** What `resume` takes. */
export interface ResumeOptions {
  store: string;
  sessionId: string;
  tools?: ToolSet;
  /** The tools `rerun_idempotent` runs again. */
  idempotent?: string[];
  /** `fail` (the default): every interrupted call gets the interrupted result; `rerun_idempotent`: idempotent ones run again. */
  policy?: "fail" | "rerun_idempotent";
  durability?: "full" | "normal";
}

/** What recovery did with one call. */
export interface RecoveredCall {
  session: string;
  request: number;
  call_id: string;
  tool_name: string;
  [field: string]: unknown;
}

/**
 * Resumes a chat after a crash: every call admitted without a result gets one, and the chat's messages come back as
 * the AI SDK's `ModelMessage`s, to go on with (`streamText({ model, tools, messages })`).
 */
export declare function resume(options: ResumeOptions): Promise<{ messages: ModelMessage[]; recovered: RecoveredCall[] }>;

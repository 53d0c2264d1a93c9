// headstart for Node.js: streaming early execution for LLM agents.

/** A JSON Schema (a TypeBox schema is one). */
export type JsonSchema = Record<string, unknown>;

/** A tool's result: its content blocks (text), details, whether it is an error, and whether it ends the loop. */
export interface ToolResult {
  content: Array<{ type: "text"; text: string } | Record<string, unknown>>;
  details?: unknown;
  isError?: boolean;
  terminate?: boolean;
}

/** What a tool's `execute` is given beside its arguments. */
export interface ToolContext {
  /** Aborted when the call is cancelled (the response was cancelled, or the tool's timeout passed). */
  signal: AbortSignal;
  /** The call's id, as the model gave it. */
  callId: string;
  /** The session the call belongs to. */
  sessionId: string | null;
  /** A key stable across re-runs of this call (recovery), for the tool's own deduplication. */
  idempotencyKey: string;
  /** Sends a partial result (`tool_execution_update`). */
  onUpdate(partial: string | ToolResult): void;
}

/** What the engine schedules a tool's calls by: a tool without its body. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonSchema;
  readonly early: boolean;
  readonly idempotent: boolean;
  readonly providerAsync: boolean;
  readonly sequential: boolean;
  readonly timeoutMs?: number;
  /** Calls with equal keys run in source order: the name of an argument (its value is the key), or a fixed key. */
  readonly conflictKey?: string;
}

/** A tool declaration, from `tool(...)`. */
export interface Tool<Args = Record<string, unknown>> extends ToolSpec {
  execute(args: Args, context: ToolContext): Promise<string | ToolResult> | string | ToolResult;
}

/** The fields of a tool's declaration (all but `name` optional). */
export interface ToolDeclaration {
  name: string;
  description?: string;
  parameters?: JsonSchema;
  early?: boolean;
  idempotent?: boolean;
  providerAsync?: boolean;
  sequential?: boolean;
  timeoutMs?: number;
  conflictKey?: string;
}

/**
 * Declares a tool. `early`: its calls start at their `toolcall_end`, once the prefix holding them is durable.
 * `idempotent`: recovery may run it again. `providerAsync`: OpenAI's provider-async tool (early too).
 * `sequential`: its calls run one at a time. `timeoutMs`: a call running longer is cancelled. `conflictKey`: calls
 * with equal keys run in source order (the name of an argument, or a fixed key).
 */
export declare function tool<Args = Record<string, unknown>>(
  declaration: ToolDeclaration & { execute: Tool<Args>["execute"] },
): Tool<Args>;

/** A call the engine asks `onCall` to run. */
export interface CallLetter {
  tool: string;
  callId: string;
  arguments: Record<string, unknown>;
  sessionId: string | null;
  idempotencyKey: string;
}

/** What `onCall` is given beside the call. */
export interface CallContext {
  /** Aborted when the call is cancelled. */
  signal: AbortSignal;
  /** Sends a partial result. */
  onUpdate(partial: ToolResult): void;
  /** Gives the call's result at once (the first answer counts; the returned promise is then ignored). */
  answer(result: ToolResult): void;
}

/** A tool call as the engine stores it. */
export interface ToolCall {
  type: "tool_call";
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  [field: string]: unknown;
}

/** The engine's options; any other is a `TypeError` naming it. */
export interface EngineOptions {
  /** The tools, from `tool(...)`; with `onCall`, their specs (no `execute`). */
  tools?: Array<Tool<any> | ToolDeclaration>;
  /** Runs every call instead of the tools' `execute`: resolves to its result (or gives it sooner with `answer`). */
  onCall?(call: CallLetter, context: CallContext): Promise<ToolResult> | ToolResult | void;
  /** Return `{ block: true, reason }` to block a call. */
  beforeToolCall?(call: { toolCall: ToolCall; args: Record<string, unknown> }): unknown;
  /** Return the fields of the result to replace (`content`, `details`, `isError`, `terminate`). */
  afterToolCall?(call: { toolCall: ToolCall; args: Record<string, unknown>; result: ToolResult; isError: boolean }): unknown;
  /** SQLite: `full` (each commit synced, the default) or `normal` (survives a crash of the process). */
  durability?: "full" | "normal";
  /** `parallel` (the default) or `sequential`. */
  toolExecution?: "parallel" | "sequential";
  /** `false` runs every call after its response. Default `true`. */
  earlyExecution?: boolean;
  /** How many calls run at once (`null`: no bound). */
  maxInFlight?: number | null;
  /** How many model requests one agent run may make. */
  maxRequests?: number;
}

/** How one response is opened with `openResponse`. */
export interface OpenResponseOptions {
  /** The format the caller feeds (`headstart`, the default: delta events as JSON lines). */
  format?: string;
  seal?: "complete" | "next-index" | "finish";
  record?: string;
  /** User messages appended to the session first. */
  users?: string[];
  /** Create the session first (under an id from `newSessionId`). */
  create?: boolean;
  /** The session's previous response: this one opens once its results are stored. */
  after?: NativeResponse;
}

/** One response opened with `openResponse`, fed by the caller. */
export interface NativeResponse {
  /** Delta events as JSON lines, one event a line. */
  pushDeltas(lines: string): void;
  /** The stream ended. */
  end(): void;
  /** The stream failed with `message`. */
  fail(message: string): void;
  /**
   * The engine's next events, as the JSON of an array (a trailing `null` once the run has ended); `callsOnly`: the
   * calls' events, their results and the end only. Empty when `wake` ended the wait.
   */
  nextBatch(callsOnly?: boolean): Promise<string>;
  /** Ends a waiting `nextBatch` with an empty batch: nothing comes until JavaScript acts. */
  wake(): void;
  /** Cancels the response: every admitted call still gets its stored result. */
  cancel(): void;
  /** Waits for the run's end. */
  close(): Promise<void>;
}

/** The stream formats `wrap` reads. */
export type Format =
  | "pi"
  | "headstart"
  | "openai-chat"
  | "openai-responses"
  | "anthropic"
  | "gemini"
  | "sse-openai-chat"
  | "sse-openai-responses"
  | "sse-anthropic"
  | "sse-gemini";

/** The formats `wrap` reads (the `sse-` forms aside). */
export declare const FORMATS: readonly string[];

/** One event of the engine (`turn_start`, `message_update`, `tool_execution_start`, …, `turn_end`). */
export interface EngineEvent {
  type: string;
  [field: string]: unknown;
}

/** A call's stored result, with its figures. */
export interface CallFigures {
  callId: string;
  toolName: string;
  content: Array<{ type: "text"; text: string }>;
  isError: boolean;
  /** How long before the stream's end the call was sealed (ms). */
  headroomMs: number | null;
  /** From its seal to its start, the prefix commit included (ms). */
  sealToStartMs: number | null;
  /** How long it ran (ms). */
  runMs: number | null;
  /** How much of its run overlapped the stream (ms). */
  overlapMs: number | null;
}

/** One wrapped response: the engine's events, then its calls. */
export interface Wrapped extends AsyncIterable<EngineEvent> {
  /** Each call's stored result with its figures; read after the events are consumed. */
  calls(): Promise<CallFigures[]>;
}

/** The engine over a store (a SQLite path or a `postgresql://` URL). */
export declare class Engine {
  /** An engine whose store is open: rejects with the store's error when it cannot be opened. */
  static open(store: string, options?: EngineOptions): Promise<Engine>;
  constructor(store: string, options?: EngineOptions);
  /** Creates a session (under `id`, one `newSessionId` gave, when given); its id. */
  createSession(id?: string): Promise<string>;
  /** A fresh session id, at once (the session is created by the first response opened with `create`). */
  newSessionId(): string;
  /**
   * Opens one response of `session`, fed by the caller (what `wrap` builds on). The engine must be open
   * (`Engine.open`).
   */
  openResponse(session: string, options?: OpenResponseOptions): NativeResponse;
  /** Appends a user message to a session. */
  appendUser(session: string, text: string): Promise<void>;
  /**
   * Wraps one response of `session`. `stream` is read in `format`: pi-ai events, delta events, an SDK's stream or
   * request promise (openai, anthropic), or (`sse-…`) an HTTP body. `signal` cancels the response; every admitted
   * call still gets its stored result.
   */
  wrap(
    session: string,
    stream: unknown,
    options?: { format?: Format; seal?: "complete" | "next-index" | "finish"; record?: string; signal?: AbortSignal },
  ): Wrapped;
  /**
   * Recovers a session after a crash; what was done with each call. The recovery holds the session's lock (beside a
   * SQLite file, as `headstart recover` does; an advisory lock of a PostgreSQL database): while another process, or
   * a fleet's worker under its lease, holds the session, it rejects naming the holder, and writes nothing.
   */
  recover(session: string, policy?: "fail" | "rerun_idempotent"): Promise<Array<Record<string, unknown>>>;
  /** The figures of a session from its stored times. */
  figures(session: string): Promise<{ calls: Array<Record<string, unknown>>; responses: Array<Record<string, unknown>> }>;
  /** The stored messages of a session, in order. */
  log(session: string): Promise<Array<{ seq: number; at_us: number; message: Record<string, unknown> }>>;
}

/** What a store holds: its sessions, with their messages, tool runs and figures (`headstart inspect --json`). */
export declare function inspect(store: string, session?: string): Promise<{ sessions: Array<Record<string, unknown>> }>;

/** The open store at a location (opened once per location in a process). */
export declare function openStore(location: string, options?: { durability?: "full" | "normal"; write?: boolean }): Promise<unknown>;

// headstart/pi: pi-agent-core 1.6's agent loop on headstart's engine. Types are pi-agent-core's own; headstart adds
// the fields of `HeadstartLoopOptions` to a loop's config and an `Agent`'s options, and `early` to a tool.
import type {
  AgentContext,
  AgentEvent,
  AgentEventSink,
  AgentLoopConfig,
  AgentMessage,
  AgentOptions,
  AgentTool,
  StreamFn,
} from "@earendil-works/pi-agent-core";
import { Agent as PiAgent } from "@earendil-works/pi-agent-core";
import type { EventStream } from "@earendil-works/pi-ai";

export * from "@earendil-works/pi-agent-core";

/** What headstart adds to a loop's config. */
export interface HeadstartLoopOptions {
  /**
   * Where the transcript is kept: a SQLite file path or a `postgresql://` URL. Without one, a SQLite file in memory
   * (`/dev/shm`), removed when the process exits.
   */
  store?: string;
  /** The store's session to append to; a new one when absent (reported to `onStoreSession`). */
  storeSessionId?: string;
  /** Called once with the id of the session a loop created. */
  onStoreSession?: (sessionId: string) => void;
  /** SQLite: `full` (each commit synced; the default with a store) or `normal` (survives a crash of the process). */
  durability?: "full" | "normal";
  /** `false` runs every call after its response, as pi does (the transcript is still kept). Default `true`. */
  earlyExecution?: boolean;
}

/** A loop's config: pi's, with headstart's options. */
export type HeadstartLoopConfig = AgentLoopConfig & HeadstartLoopOptions;

/**
 * A tool: pi's `AgentTool`, which headstart starts at its call's `toolcall_end` (once the prefix holding the call is
 * durable) when `executionMode` is `"early"` or `early` is true. `replay: "safe"` marks it idempotent: recovery may
 * run it again.
 */
export type HeadstartTool = Omit<AgentTool, "executionMode"> & {
  executionMode?: "sequential" | "parallel" | "early";
  early?: boolean;
};

/** pi-agent-core's `agentLoop`, on headstart. */
export declare function agentLoop(
  prompts: AgentMessage[],
  context: AgentContext,
  config: HeadstartLoopConfig,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): EventStream<AgentEvent, AgentMessage[]>;

/** pi-agent-core's `agentLoopContinue`, on headstart. */
export declare function agentLoopContinue(
  context: AgentContext,
  config: HeadstartLoopConfig,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): EventStream<AgentEvent, AgentMessage[]>;

/** pi-agent-core's `runAgentLoop`, on headstart. */
export declare function runAgentLoop(
  prompts: AgentMessage[],
  context: AgentContext,
  config: HeadstartLoopConfig,
  emit: AgentEventSink,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): Promise<AgentMessage[]>;

/** pi-agent-core's `runAgentLoopContinue`, on headstart. */
export declare function runAgentLoopContinue(
  context: AgentContext,
  config: HeadstartLoopConfig,
  emit: AgentEventSink,
  signal?: AbortSignal,
  streamFn?: StreamFn,
): Promise<AgentMessage[]>;

/** Sets the stream function used when a loop is given none (pi-agent-core's default is set too). */
export declare function setDefaultStreamFn(streamFn: StreamFn | undefined): void;

/** pi-agent-core's `Agent`, running headstart's loop. */
export declare class Agent extends PiAgent {
  constructor(options: AgentOptions & { store?: string; storeSessionId?: string; durability?: "full" | "normal" });
  /** Where the transcript is kept; in memory without one. */
  store: string | undefined;
  /** SQLite's durability. */
  durability: "full" | "normal" | undefined;
  /** The store's session this agent writes; set by its first run when not given. */
  storeSessionId: string | undefined;
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
 * Resumes a session after a crash: every call admitted without a result gets one (`fail`: interrupted;
 * `rerun_idempotent`: tools with `replay: "safe"` run again), and the session's messages come back as pi messages,
 * to go on with `agentLoopContinue({ messages, tools }, { ...config, store, storeSessionId })`.
 */
export declare function resume(options: {
  store: string;
  storeSessionId: string;
  tools?: HeadstartTool[];
  policy?: "fail" | "rerun_idempotent";
  durability?: "full" | "normal";
}): Promise<{ messages: AgentMessage[]; recovered: RecoveredCall[] }>;

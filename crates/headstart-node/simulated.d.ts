// headstart/simulated: a simulated streaming model, as pi-ai streams that follow a script.
import type { AssistantMessageEvent, AssistantMessageEventStream, Model, ToolCall } from "@earendil-works/pi-ai";

/** One block of a scripted response: text, or a tool call with its arguments. */
export type ScriptedBlock = { text: string } | { call: { id: string; name: string; arguments: Record<string, unknown> } };

/** One scripted response. */
export interface ScriptedTurn {
  blocks: ScriptedBlock[];
  /** How it ends; `abort` aborts `controller` after `abortAt` events and ends as `aborted`. */
  stop: "stop" | "toolUse" | "length" | "error" | "abort";
  abortAt?: number;
}

/** How a scripted stream is paced and observed. */
export interface ScriptedOptions {
  /** Aborted by an `abort` turn. */
  controller?: AbortController;
  /** Sees each event before it is pushed. */
  onEvent?(index: number, event: unknown): void;
  /**
   * Awaited before each event (one event-loop turn by default); `() => sleep(25)` streams as a model does. When it
   * returns nothing, the event is pushed in the same tick as the one before.
   */
  pace?(index: number): Promise<void> | void;
  /** Awaited after each call's `toolcall_end`, with the calls before it: holds the stream until it resolves. */
  gate?(toolCall: ToolCall, earlierCalls: ToolCall[]): Promise<unknown> | undefined;
  /** Leaves out the events it returns true for (the final message still holds everything). */
  skip?(event: AssistantMessageEvent): boolean;
  /** Makes the stream the events go into (pi-ai's `createAssistantMessageEventStream()` by default). */
  stream?(): AssistantMessageEventStream;
}

/** The model the simulated streams say they come from. */
export declare const MODEL: Model<any>;

/** Waits `ms` milliseconds. */
export declare function sleep(ms: number): Promise<void>;

/** Waits for `rounds` turns of the event loop. */
export declare function ticks(rounds: number): Promise<void>;

/** A pi-ai stream of one scripted response. */
export declare function scriptedStream(turn: ScriptedTurn, options?: ScriptedOptions): AssistantMessageEventStream;

/** A stream function answering each request with the next scripted turn (text `done` once they run out). */
export declare function scriptedStreamFn(
  turns: ScriptedTurn[],
  options?: ScriptedOptions,
): ((...args: unknown[]) => AssistantMessageEventStream) & { requests(): number };

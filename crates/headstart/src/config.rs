//! Engine configuration.

use serde::{Deserialize, Serialize};

/// How calls execute relative to each other (SPEC §4.2–§4.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// Prepared calls start at once; bodies overlap freely, across batches too.
    #[default]
    Parallel,
    /// One call at a time, in source order.
    Sequential,
}

/// Engine-wide settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// Parallel (default) or sequential tool execution (SPEC §4).
    pub tool_execution: ExecutionMode,
    /// At most this many tool bodies execute at once (SPEC §4.6); `None` is unbounded.
    pub max_in_flight: Option<usize>,
    /// The agent loop stops quietly after this many model requests (SPEC §5.7).
    pub max_turns: u32,
    /// Commit prefixes and start async calls mid-stream (SPEC §3). `false` turns headstart into an end-of-stream
    /// batching loop (every call waits for the end of the response), which is what benchmarks compare against.
    pub early_execution: bool,
    /// Continuing after a failed stream (SPEC §3.6.4): when a response ends in `error` after at least one of its
    /// prefixes was committed, make another request from the canonical context (its calls' results kept) instead
    /// of stopping, at most this many times per run. `None` (the default) stops the run as §3.6.1 says.
    pub continue_after_failed_stream: Option<u32>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            tool_execution: ExecutionMode::Parallel,
            max_in_flight: None,
            max_turns: 32,
            early_execution: true,
            continue_after_failed_stream: None,
        }
    }
}

//! Engine configuration.

use serde::{Deserialize, Serialize};

/// How calls execute relative to each other (contract §4.2–§4.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// Prepared calls start at once; bodies overlap freely, across batches too.
    #[default]
    Parallel,
    /// One call at a time, in source order.
    Sequential,
}

impl ExecutionMode {
    /// `Sequential` when `sequential` holds, else `Parallel`: the mode of a tool that carries a `sequential` flag.
    pub fn sequential_if(sequential: bool) -> Self {
        if sequential {
            ExecutionMode::Sequential
        } else {
            ExecutionMode::Parallel
        }
    }
}

/// When the agent loop makes a request only to hand the model provider-async results (contract §3.7.6): a response
/// ended with such calls still running and nothing else to send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AsyncDelivery {
    /// Wait until every pending call has its result, then send them in one request: fewer requests.
    #[default]
    AllPending,
    /// Send each result in a request of its own as soon as it is ready (results ready together go together): the
    /// model learns sooner, at the price of a request per result.
    AsReady,
}

/// The default of [`EngineConfig::max_pending_calls`].
pub const DEFAULT_MAX_PENDING_CALLS: usize = 16;

fn default_max_pending_calls() -> usize {
    DEFAULT_MAX_PENDING_CALLS
}

/// The default of [`EngineConfig::max_in_flight`].
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;

/// The default of [`EngineConfig::max_calls_per_response`].
pub const DEFAULT_MAX_CALLS_PER_RESPONSE: usize = 128;

fn default_max_calls_per_response() -> Option<usize> {
    Some(DEFAULT_MAX_CALLS_PER_RESPONSE)
}

/// The default of [`EngineConfig::cached_contexts`].
pub const DEFAULT_CACHED_CONTEXTS: usize = 64;

fn default_cached_contexts() -> usize {
    DEFAULT_CACHED_CONTEXTS
}

/// Engine-wide settings. Non-exhaustive: start from `EngineConfig::default()` and use the setters
/// (`EngineConfig::default().max_requests(8).early_execution(false)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Parallel (default) or sequential tool execution (contract §4).
    pub tool_execution: ExecutionMode,
    /// At most this many tool bodies execute at once (contract §4.6), across the batches of a response; `None` is
    /// unbounded. Default [`DEFAULT_MAX_IN_FLIGHT`] (16): a model that calls a tool thousands of times must not open
    /// thousands of connections or files at once.
    pub max_in_flight: Option<usize>,
    /// At most this many calls of one response are prepared and run (contract §4.6.4); the calls beyond get the
    /// error result `too many tool calls in one response (the limit is <N>)` (outcome `blocked`) and never run.
    /// Default [`DEFAULT_MAX_CALLS_PER_RESPONSE`] (128); `None` is unbounded.
    #[serde(default = "default_max_calls_per_response")]
    pub max_calls_per_response: Option<usize>,
    /// The agent loop stops quietly after this many model requests of one run (contract §5.7); `max_turns` in the
    /// contract, scenarios and serialized configurations, its name before issue 20.
    #[serde(alias = "max_turns")]
    pub max_requests: u32,
    /// Commit prefixes and start early calls mid-stream (contract §3). `false` turns headstart into an end-of-stream
    /// batching loop (every call waits for the end of the response), which is what benchmarks compare against.
    pub early_execution: bool,
    /// Continuing after a failed stream (contract §3.6.4): when a response ends in `error` after at least one of its
    /// prefixes was committed, make another request from the canonical context (its calls' results kept) instead
    /// of stopping, at most this many times per run. `None` (the default) stops the run as §3.6.1 says.
    pub continue_after_failed_stream: Option<u32>,
    /// Record tool arguments and results on `execute_tool` spans (`gen_ai.tool.call.arguments`/`.result`). Off by
    /// default: they may hold personal or secret data (OpenTelemetry GenAI semantic conventions, "content").
    #[serde(default)]
    pub capture_content: bool,
    /// The model contexts of at most this many sessions stay in memory between requests (least recently used
    /// first out), so a request reads only what was written since the last one instead of the whole history.
    /// Default [`DEFAULT_CACHED_CONTEXTS`] (64); each holds about its session's history. 0 reads each run's
    /// session whole once, and keeps nothing after the run.
    #[serde(default = "default_cached_contexts")]
    pub cached_contexts: usize,
    /// When the loop asks the model again only to deliver provider-async results (contract §3.7.6). Default
    /// [`AsyncDelivery::AllPending`].
    #[serde(default)]
    pub async_delivery: AsyncDelivery,
    /// At most this many provider-async calls of a run are left running past their responses (contract §3.7.5): a
    /// response that would leave more waits for the excess as for any call, so a model that keeps calling async
    /// tools response after response cannot pile up work without bound. Default [`DEFAULT_MAX_PENDING_CALLS`] (16);
    /// 0 delivers no result later.
    #[serde(default = "default_max_pending_calls")]
    pub max_pending_calls: usize,
}

impl EngineConfig {
    /// Sets [`EngineConfig::tool_execution`].
    pub fn tool_execution(mut self, mode: ExecutionMode) -> Self {
        self.tool_execution = mode;
        self
    }

    /// Sets [`EngineConfig::max_in_flight`].
    pub fn max_in_flight(mut self, limit: Option<usize>) -> Self {
        self.max_in_flight = limit;
        self
    }

    /// Sets [`EngineConfig::max_calls_per_response`].
    pub fn max_calls_per_response(mut self, limit: Option<usize>) -> Self {
        self.max_calls_per_response = limit;
        self
    }

    /// Sets [`EngineConfig::max_requests`].
    pub fn max_requests(mut self, max_requests: u32) -> Self {
        self.max_requests = max_requests;
        self
    }

    /// The name [`EngineConfig::max_requests`] had before issue 20.
    #[deprecated(note = "renamed to `max_requests`: the limit counts model requests")]
    pub fn max_turns(self, max_turns: u32) -> Self {
        self.max_requests(max_turns)
    }

    /// Sets [`EngineConfig::early_execution`].
    pub fn early_execution(mut self, early: bool) -> Self {
        self.early_execution = early;
        self
    }

    /// Sets [`EngineConfig::continue_after_failed_stream`].
    pub fn continue_after_failed_stream(mut self, budget: Option<u32>) -> Self {
        self.continue_after_failed_stream = budget;
        self
    }

    /// Sets [`EngineConfig::capture_content`].
    pub fn capture_content(mut self, capture: bool) -> Self {
        self.capture_content = capture;
        self
    }

    /// Sets [`EngineConfig::async_delivery`].
    pub fn async_delivery(mut self, delivery: AsyncDelivery) -> Self {
        self.async_delivery = delivery;
        self
    }

    /// Sets [`EngineConfig::max_pending_calls`].
    pub fn max_pending_calls(mut self, calls: usize) -> Self {
        self.max_pending_calls = calls;
        self
    }

    /// Sets [`EngineConfig::cached_contexts`].
    pub fn cached_contexts(mut self, sessions: usize) -> Self {
        self.cached_contexts = sessions;
        self
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            tool_execution: ExecutionMode::Parallel,
            max_in_flight: Some(DEFAULT_MAX_IN_FLIGHT),
            max_calls_per_response: default_max_calls_per_response(),
            max_requests: 32,
            early_execution: true,
            continue_after_failed_stream: None,
            capture_content: false,
            cached_contexts: DEFAULT_CACHED_CONTEXTS,
            async_delivery: AsyncDelivery::AllPending,
            max_pending_calls: DEFAULT_MAX_PENDING_CALLS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EngineConfig;

    #[test]
    #[allow(deprecated)]
    fn max_requests_keeps_its_old_name_in_code_and_in_serialized_configurations() {
        assert_eq!(EngineConfig::default().max_turns(3).max_requests, 3);
        let mut json = serde_json::to_value(EngineConfig::default().max_requests(5)).expect("serializes");
        let fields = json.as_object_mut().expect("an object");
        let limit = fields.remove("max_requests").expect("serialized under its name");
        fields.insert("max_turns".to_owned(), limit);
        let config: EngineConfig = serde_json::from_value(json).expect("the old name deserializes");
        assert_eq!(config.max_requests, 5);
    }
}

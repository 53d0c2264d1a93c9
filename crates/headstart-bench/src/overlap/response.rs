//! The simulated response of the overlap benchmark: its blocks, and the timed delta events they stream as.

use std::time::Duration;

use headstart::core::{DoneReason, Usage};
use headstart::DeltaEvent;

/// The name of the early tool of the response.
pub(super) const ASYNC_TOOL: &str = "fetch";
/// The name of the sync tool of the response.
pub(super) const SYNC_TOOL: &str = "apply";

/// One content block of a simulated response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockSpec {
    /// A text block of `tokens` deltas.
    Text {
        /// Number of text deltas.
        tokens: usize,
    },
    /// A tool call whose arguments stream as `arg_tokens` deltas; its body takes `tool_ms`.
    Call {
        /// How long the tool's body sleeps.
        tool_ms: u64,
        /// An early tool, or a sync one.
        early: bool,
        /// Number of argument deltas (at least 1).
        arg_tokens: usize,
    },
}

/// A simulated response: its blocks, streamed one delta per `token_interval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseSpec {
    /// Time between two deltas (the token rate).
    pub token_interval: Duration,
    /// The content blocks, in order. The response ends with `done(tool_use)` right after the last block.
    pub blocks: Vec<BlockSpec>,
}

impl Default for ResponseSpec {
    fn default() -> Self {
        Self::realistic()
    }
}

impl ResponseSpec {
    /// The default response: 96 text tokens and 56 argument tokens at 16 ms per token (≈ 60 tokens/s, 2.4 s of
    /// streaming); six early calls (800, 500, 650, 300, 150, 100 ms), each after some text; then one sync call
    /// (200 ms) that ends the response.
    pub fn realistic() -> Self {
        let mut blocks = vec![BlockSpec::Text { tokens: 24 }];
        for tool_ms in [800, 500, 650, 300, 150, 100] {
            blocks.push(BlockSpec::Call {
                tool_ms,
                early: true,
                arg_tokens: 8,
            });
            blocks.push(BlockSpec::Text { tokens: 12 });
        }
        blocks.push(BlockSpec::Call {
            tool_ms: 200,
            early: false,
            arg_tokens: 8,
        });
        ResponseSpec {
            token_interval: Duration::from_millis(16),
            blocks,
        }
    }

    /// A response that takes a few milliseconds (for tests): a little text, an early call and a sync call.
    pub fn tiny() -> Self {
        ResponseSpec {
            token_interval: Duration::from_millis(1),
            blocks: vec![
                BlockSpec::Text { tokens: 2 },
                BlockSpec::Call {
                    tool_ms: 3,
                    early: true,
                    arg_tokens: 2,
                },
                BlockSpec::Call {
                    tool_ms: 1,
                    early: false,
                    arg_tokens: 2,
                },
            ],
        }
    }

    /// The longest body among the sync calls (none: one token interval): how long the runtime sits idle before
    /// the sync calls' result writes.
    pub fn sync_body(&self) -> Duration {
        self.blocks
            .iter()
            .filter_map(|block| match block {
                BlockSpec::Call {
                    tool_ms, early: false, ..
                } => Some(Duration::from_millis(*tool_ms)),
                _ => None,
            })
            .max()
            .unwrap_or(self.token_interval)
    }

    /// Number of tool calls.
    pub fn calls(&self) -> usize {
        self.blocks
            .iter()
            .filter(|block| matches!(block, BlockSpec::Call { .. }))
            .count()
    }

    /// Number of early calls.
    pub fn async_calls(&self) -> usize {
        self.blocks
            .iter()
            .filter(|block| matches!(block, BlockSpec::Call { early: true, .. }))
            .count()
    }

    /// The delta events with their send offsets, and where the calls and the end are.
    pub(super) fn script(&self, tag: &str) -> Script {
        let mut events = Vec::new();
        let mut calls = Vec::new();
        let mut at = Duration::ZERO;
        events.push((
            at,
            DeltaEvent::Start {
                model: Some("bench".to_owned()),
                response_id: Some(format!("{tag}-response")),
            },
        ));
        for (index, block) in self.blocks.iter().enumerate() {
            match block {
                BlockSpec::Text { tokens } => {
                    events.push((at, DeltaEvent::TextStart { index }));
                    for token in 0..*tokens {
                        at += self.token_interval;
                        let delta = WORDS[token % WORDS.len()].to_owned();
                        events.push((at, DeltaEvent::TextDelta { index, delta }));
                    }
                    events.push((at, DeltaEvent::TextEnd { index }));
                }
                BlockSpec::Call {
                    tool_ms,
                    early,
                    arg_tokens,
                } => {
                    let id = format!("{tag}-call-{index}");
                    let name = if *early { ASYNC_TOOL } else { SYNC_TOOL };
                    events.push((
                        at,
                        DeltaEvent::ToolcallStart {
                            index,
                            id: id.clone(),
                            name: name.to_owned(),
                            early: false,
                            provider_async: false,
                        },
                    ));
                    let arguments = format!(r#"{{"ms": {tool_ms}, "path": "src/module_{index}/file.rs"}}"#);
                    for delta in split_even(&arguments, *arg_tokens) {
                        at += self.token_interval;
                        events.push((at, DeltaEvent::ToolcallDelta { index, delta }));
                    }
                    events.push((at, DeltaEvent::ToolcallEnd { index, arguments: None }));
                    calls.push(ScriptedCall {
                        id,
                        early: *early,
                        sealed_at: events.len() - 1,
                    });
                }
            }
        }
        events.push((
            at,
            DeltaEvent::Done {
                stop_reason: DoneReason::ToolUse,
                usage: Usage::default(),
            },
        ));
        let done_at = events.len() - 1;
        Script { events, calls, done_at }
    }
}

/// A few words for text deltas.
pub(crate) const WORDS: [&str; 8] = ["The ", "file ", "shows ", "that ", "the ", "tests ", "pass, ", "so "];

/// Splits ASCII `text` into `parts` pieces of nearly equal length (at least one piece).
fn split_even(text: &str, parts: usize) -> Vec<String> {
    let parts = parts.clamp(1, text.len().max(1));
    let bytes = text.as_bytes();
    (0..parts)
        .map(|part| {
            let from = part * bytes.len() / parts;
            let to = (part + 1) * bytes.len() / parts;
            String::from_utf8_lossy(&bytes[from..to]).into_owned()
        })
        .collect()
}

/// One call of a [`Script`].
pub(super) struct ScriptedCall {
    pub id: String,
    pub early: bool,
    /// Position of its `toolcall_end` in the script.
    pub sealed_at: usize,
}

/// A response as timed delta events, with where its calls are sealed and where it ends.
pub(super) struct Script {
    pub events: Vec<(Duration, DeltaEvent)>,
    pub calls: Vec<ScriptedCall>,
    /// Position of `done`.
    pub done_at: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_even_keeps_every_byte() {
        let text = r#"{"ms": 300, "path": "x"}"#;
        let parts = split_even(text, 8);
        assert_eq!(parts.len(), 8);
        assert_eq!(parts.concat(), text);
        assert_eq!(split_even("ab", 5).concat(), "ab");
    }

    #[test]
    fn the_realistic_response_has_the_shape_issue_6_asks_for() {
        let spec = ResponseSpec::realistic();
        assert!((4..=8).contains(&spec.async_calls()));
        assert_eq!(spec.calls() - spec.async_calls(), 1);
        let script = spec.script("t");
        assert_eq!(script.calls.len(), spec.calls());
        assert_eq!(script.done_at, script.events.len() - 1);
    }
}

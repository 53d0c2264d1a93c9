//! [`BodyEnd`]: how a call's body ended where a host ran it, outside the engine's own execution, as a value that
//! crosses a journal (Restate's `Tools` service returns it, and a replay reads it back).

use headstart_core::model::ContentBlock;
use headstart_store::RunOutcome;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::error::ToolError;
use crate::tools::output::ToolOutput;
use crate::tools::tool::ToolResult;

/// How a call's body ended where a host ran it: what a crash kept that the store did not get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "Wire", into = "Wire")]
pub enum BodyEnd {
    /// The body returned this.
    Returned(ToolResult),
    /// The body may have begun, and how it ended is unknown: the call is recovered as any other (contract §7.4).
    Interrupted,
}

impl From<ToolResult> for BodyEnd {
    fn from(result: ToolResult) -> Self {
        BodyEnd::Returned(result)
    }
}

/// The wire form of a [`BodyEnd`] (`{"outcome": "output" | "failed" | "interrupted", …}`), as journals hold it.
#[derive(Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Wire {
    Output {
        content: Vec<ContentBlock>,
        #[serde(default)]
        details: Value,
        #[serde(default)]
        terminate: bool,
    },
    Failed {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped: Option<RunOutcome>,
    },
    Interrupted,
}

impl From<BodyEnd> for Wire {
    fn from(end: BodyEnd) -> Self {
        match end {
            BodyEnd::Returned(Ok(output)) => Wire::Output {
                content: output.content,
                details: output.details,
                terminate: output.terminate,
            },
            BodyEnd::Returned(Err(error)) => Wire::Failed {
                message: error.message,
                stopped: error.stopped,
            },
            BodyEnd::Interrupted => Wire::Interrupted,
        }
    }
}

impl From<Wire> for BodyEnd {
    fn from(wire: Wire) -> Self {
        match wire {
            Wire::Output {
                content,
                details,
                terminate,
            } => BodyEnd::Returned(Ok(ToolOutput {
                content,
                details,
                terminate,
            })),
            Wire::Failed { message, stopped } => BodyEnd::Returned(Err(ToolError { message, stopped })),
            Wire::Interrupted => BodyEnd::Interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_end_reads_back_from_its_wire_form_as_journals_hold_it() {
        let ends = [
            BodyEnd::Returned(Ok(ToolOutput::text("hi")
                .with_details(json!({"n": 1}))
                .with_terminate(true))),
            BodyEnd::Returned(Err(ToolError::new("boom"))),
            BodyEnd::Interrupted,
        ];
        // How a body was stopped crosses the journal whole, so the engine stores it as it would a live call's.
        let stopped = [RunOutcome::Cancelled, RunOutcome::TimedOut, RunOutcome::Panicked]
            .map(|how| BodyEnd::Returned(Err(ToolError::stopped(how, format!("{how:?}")))));
        let ends = ends.into_iter().chain(stopped);
        for end in ends {
            let wire = serde_json::to_value(&end).unwrap();
            assert_eq!(serde_json::from_value::<BodyEnd>(wire).unwrap(), end);
        }
        assert_eq!(
            serde_json::to_value(BodyEnd::Interrupted).unwrap(),
            json!({"outcome": "interrupted"})
        );
        let failed = serde_json::to_value(BodyEnd::Returned(Err(ToolError::new("boom")))).unwrap();
        assert_eq!(failed, json!({"outcome": "failed", "message": "boom"}));
        let output: BodyEnd =
            serde_json::from_value(json!({"outcome": "output", "content": [{"type": "text", "text": "x"}]})).unwrap();
        assert_eq!(output, BodyEnd::Returned(Ok(ToolOutput::text("x"))));
        assert_eq!(
            BodyEnd::Interrupted.into_result().unwrap_err().message,
            crate::recovery::INTERRUPTED
        );
    }
}

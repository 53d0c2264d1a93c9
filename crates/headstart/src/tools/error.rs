//! The errors of the tool path, one type per role (the [`tools`](crate::tools) module docs say which to use when).

use std::fmt;

use headstart_store::RunOutcome;

/// A call failed: its message becomes the call's error result, the text the model reads (contract §5.4). What
/// [`Tool::execute`](crate::Tool::execute), a [layer](crate::layer) and a [hook](crate::ToolHook) return when they
/// fail. A typed tool's [`ToolFailure`] becomes one with the error's text and its sources.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What went wrong.
    pub message: String,
    /// How the body was stopped, when it did not fail on its own: timed out, panicked or cancelled, as
    /// [`run_body`](crate::run_body) says, so that a host that ran the body elsewhere (Restate's `Tools`) hands the
    /// engine the outcome it would have given in process. `None` for an ordinary failure.
    pub stopped: Option<RunOutcome>,
}

impl ToolError {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            stopped: None,
        }
    }

    /// A body stopped from outside (`outcome`: timed out, panicked, cancelled), with the text the model reads.
    pub fn stopped(outcome: RunOutcome, message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            stopped: Some(outcome),
        }
    }
}

/// The name hooks' errors had before they became [`ToolError`]s (a hook's failure and a body's play the same role).
#[deprecated(note = "use `ToolError`: hooks fail with the same error as tool bodies")]
pub type HookError = ToolError;

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::new(message)
    }
}

/// A typed tool body's failure: any `std::error::Error` converts into it, so `?` works on `io::Error`,
/// `serde_json::Error`, `reqwest::Error`, a [`ToolError`]… Its text (the error and its sources) becomes the call's
/// error result.
///
/// It deliberately does not implement `std::error::Error` itself (like `anyhow::Error`): that is what makes the
/// blanket `From<E: Error>` coherent. Build one from a message with [`ToolFailure::msg`].
pub struct ToolFailure(Box<dyn std::error::Error + Send + Sync + 'static>);

impl ToolFailure {
    /// A failure with this message.
    pub fn msg(message: impl Into<String>) -> Self {
        ToolFailure(Box::new(ToolError::new(message)))
    }

    /// The underlying error.
    pub fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.0.as_ref()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolFailure {
    fn from(error: E) -> Self {
        ToolFailure(Box::new(error))
    }
}

impl fmt::Display for ToolFailure {
    /// The error, then each source, joined by `": "` (what the model reads).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            write!(f, ": {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolFailure").field(&self.0).finish()
    }
}

impl From<ToolFailure> for ToolError {
    fn from(failure: ToolFailure) -> Self {
        ToolError::new(failure.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_shows_its_sources() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let failure = ToolFailure::from(Outer(std::io::Error::other("inner")));
        assert_eq!(failure.to_string(), "outer: inner");
        assert_eq!(ToolError::from(ToolFailure::msg("plain")).message, "plain");
    }
}

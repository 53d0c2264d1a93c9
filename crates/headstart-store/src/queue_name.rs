//! [`QueueName`]: which workers of a fleet may take a session (`headstart submit --queue`, `worker --queue`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The name of a fleet's queue: a session waits in one, and a worker claims only from the queues it serves (contract
/// §7.5). Sessions submitted without one wait in [`QueueName::DEFAULT`].
///
/// A name is 1 to [`QueueName::MAX_BYTES`] bytes of printable characters without whitespace: it is a label on
/// metrics and a word in logs and notifications, so nothing in it may break a line or a label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct QueueName(String);

/// Why a string is not a [`QueueName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueNameError {
    /// The name is empty.
    #[error("a queue name must not be empty")]
    Empty,
    /// The name is longer than [`QueueName::MAX_BYTES`].
    #[error("the queue name {0:?} is {1} bytes long; a queue name is at most 64 bytes")]
    TooLong(String, usize),
    /// The name holds whitespace or a character that does not print.
    #[error(
        "the queue name {0:?} holds whitespace or a control character; use printable characters, e.g. `gpu-batch`"
    )]
    NotPrintable(String),
}

impl QueueName {
    /// The queue of every session submitted without one, and of every worker given none.
    pub const DEFAULT: &'static str = "default";

    /// The longest name, in bytes.
    pub const MAX_BYTES: usize = 64;

    /// `name`, checked.
    pub fn new(name: impl Into<String>) -> Result<Self, QueueNameError> {
        let name = name.into();
        if name.is_empty() {
            return Err(QueueNameError::Empty);
        }
        if name.len() > Self::MAX_BYTES {
            let len = name.len();
            return Err(QueueNameError::TooLong(name, len));
        }
        if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(QueueNameError::NotPrintable(name));
        }
        Ok(QueueName(name))
    }

    /// The default queue ([`QueueName::DEFAULT`]).
    pub fn default_queue() -> Self {
        QueueName(Self::DEFAULT.to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the default queue.
    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT
    }
}

impl Default for QueueName {
    fn default() -> Self {
        Self::default_queue()
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for QueueName {
    type Error = QueueNameError;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        QueueName::new(name)
    }
}

impl std::str::FromStr for QueueName {
    type Err = QueueNameError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        QueueName::new(name)
    }
}

impl From<QueueName> for String {
    fn from(name: QueueName) -> Self {
        name.0
    }
}

impl AsRef<str> for QueueName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(
            QueueName::new("gpu-batch").map(String::from),
            Ok("gpu-batch".to_owned())
        );
        assert_eq!(QueueName::new("é/ü:1").map(String::from), Ok("é/ü:1".to_owned()));
        assert_eq!(QueueName::new(""), Err(QueueNameError::Empty));
        assert!(matches!(
            QueueName::new("a".repeat(65)),
            Err(QueueNameError::TooLong(_, 65))
        ));
        assert!(QueueName::new("a".repeat(64)).is_ok());
        // Multi-byte characters count in bytes: 33 two-byte characters are 66 bytes.
        assert!(matches!(
            QueueName::new("é".repeat(33)),
            Err(QueueNameError::TooLong(_, 66))
        ));
        for bad in ["a b", "tab\there", "new\nline", "bell\u{7}", " lead", "nbsp\u{a0}"] {
            assert!(
                matches!(QueueName::new(bad), Err(QueueNameError::NotPrintable(_))),
                "{bad:?}"
            );
        }
        assert!(QueueName::default().is_default());
        let parsed: Result<QueueName, _> = serde_json::from_str("\"a b\"");
        assert!(parsed.is_err(), "deserializing checks too");
        let error = QueueName::new("x\ny").unwrap_err().to_string();
        assert!(error.contains("printable"), "{error}");
    }
}

//! Why `run`, `resume` or `worker` could not do its work, and the exit status that says so.

use headstart_timeline::visible::{visible, Lines};

/// Exit status of a usage problem (a missing key, a bad flag combination), as clap uses.
const USAGE: u8 = 2;

/// Why a command could not do its work, and its exit status.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad usage or a missing key: exit 2.
    Usage(String),
    /// Anything else: exit 1.
    Failed(String),
}

impl Failure {
    /// Prints the failure as `headstart COMMAND: …` and returns its exit status.
    pub(crate) fn report(&self, command: &str) -> u8 {
        match self {
            // A message may quote a provider's or a server's words: made visible, never printed raw.
            Failure::Usage(message) => {
                eprintln!("headstart {command}: {}", visible(message, Lines::Keep));
                USAGE
            }
            Failure::Failed(message) => {
                eprintln!("headstart {command}: {}", visible(message, Lines::Keep));
                1
            }
        }
    }
}

/// Any error as a [`Failure::Failed`].
pub(crate) fn failed(error: impl std::fmt::Display) -> Failure {
    Failure::Failed(error.to_string())
}

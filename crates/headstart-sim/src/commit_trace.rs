//! An opt-in trace of durable fragment commits (`headstart replay` with `HEADSTART_TRACE_COMMITS=1`).
//!
//! [`CommitTrace`] is a write layer: each time `commit_fragment` returns `Ok`, it writes one line to standard error:
//!
//! ```text
//! headstart-commit <session> <seq> <call id>,<call id>,…   (or "-" when the fragment admitted no call)
//! ```
//!
//! The line is written with a single `write` after the commit returned, so a line that reached the file or pipe
//! names a commit the engine was told is durable. The crash test (`crates/headstart-cli/tests/crash.rs`) kills a
//! replay with SIGKILL and checks that every traced commit is in the database the killed process left.

use std::io::Write as _;

use headstart::store::{AdmittedCall, SessionId, Write, WriteFuture, WriteLayer, Written};

/// The prefix of every trace line.
pub const COMMIT_TRACE_PREFIX: &str = "headstart-commit";

/// A [`WriteLayer`] that traces each durable fragment commit to standard error; apply it with
/// [`Layered`](headstart::store::Layered).
#[derive(Debug, Clone, Copy, Default)]
pub struct CommitTrace;

/// One trace line, newline included.
fn trace_line(session: &SessionId, seq: u64, admitted: &[AdmittedCall]) -> String {
    let calls = if admitted.is_empty() {
        "-".to_owned()
    } else {
        admitted
            .iter()
            .map(|call| call.call_id.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("{COMMIT_TRACE_PREFIX} {session} {seq} {calls}\n")
}

impl WriteLayer for CommitTrace {
    fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        let Write::CommitFragment { session, admitted, .. } = write else {
            return next;
        };
        Box::pin(async move {
            let written = next.await?;
            let Some(seq) = written.seq() else {
                return Ok(written);
            };
            // One write of the whole line (standard error is unbuffered), so a kill never leaves half a line that
            // looks whole. A failed trace write is not a store failure.
            let _ = std::io::stderr()
                .lock()
                .write_all(trace_line(session, seq, admitted).as_bytes());
            Ok(written)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_line_names_the_session_seq_and_calls() {
        let session = SessionId("s1".to_owned());
        let calls = [
            AdmittedCall {
                call_id: "a".to_owned(),
                tool_name: "t".to_owned(),
                sealed_at_us: None,
            },
            AdmittedCall {
                call_id: "b".to_owned(),
                tool_name: "t".to_owned(),
                sealed_at_us: None,
            },
        ];
        assert_eq!(trace_line(&session, 3, &calls), "headstart-commit s1 3 a,b\n");
        assert_eq!(trace_line(&session, 4, &[]), "headstart-commit s1 4 -\n");
    }
}

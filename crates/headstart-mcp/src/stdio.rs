//! A stdio MCP server's process: started with a clean environment, its stdout read with a bound on each message,
//! its stderr copied (a bounded amount) to headstart's.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::limits::{bytes_text, McpLimits};

/// The variables a stdio server gets from headstart's environment without being named: what a program needs to
/// run, as the official MCP TypeScript SDK's `getDefaultEnvironment` passes. Nothing else of headstart's
/// environment (API keys above all) reaches the server unless set on its command ([`crate::McpServer::stdio`]).
#[cfg(not(windows))]
pub const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The variables a stdio server gets from headstart's environment without being named: what a program needs to
/// run, as the official MCP TypeScript SDK's `getDefaultEnvironment` passes. Nothing else of headstart's
/// environment (API keys above all) reaches the server unless set on its command ([`crate::McpServer::stdio`]).
#[cfg(windows)]
pub const INHERITED_ENV: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
    "PROGRAMFILES",
];

/// The child's environment: the [`INHERITED_ENV`] variables `parent` has (skipping exported shell functions, whose
/// values start with `()`, as the TypeScript SDK does), then every variable set on the command itself (`explicit`;
/// `None` is a removal).
fn child_environment(
    parent: impl Fn(&str) -> Option<OsString>,
    explicit: Vec<(OsString, Option<OsString>)>,
) -> Vec<(OsString, OsString)> {
    let mut environment: Vec<(OsString, OsString)> = INHERITED_ENV
        .iter()
        .filter_map(|name| {
            let value = parent(name)?;
            (!value.as_encoded_bytes().starts_with(b"()")).then(|| (OsString::from(name), value))
        })
        .collect();
    for (name, value) in explicit {
        environment.retain(|(known, _)| *known != name);
        if let Some(value) = value {
            environment.push((name, value));
        }
    }
    environment
}

/// A started server: its process (killed when dropped), its stdout bounded per message, its stdin.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) stdout: BoundedLines<ChildStdout>,
    pub(crate) stdin: ChildStdin,
}

/// Starts `command` with a clean environment ([`child_environment`]), piped stdio, killed on drop; its stderr is
/// copied by a task of its own ([`copy_stderr`]). `overflow` is set when stdout sends a message over the limit.
pub(crate) fn spawn(
    server: &str,
    mut command: Command,
    limits: &McpLimits,
    overflow: Arc<OnceLock<usize>>,
) -> std::io::Result<Spawned> {
    let explicit = command
        .as_std()
        .get_envs()
        .map(|(name, value)| (name.to_owned(), value.map(OsStr::to_owned)))
        .collect();
    command
        .env_clear()
        .envs(child_environment(|name| std::env::var_os(name), explicit))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("the child's stdin or stdout was not piped"));
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(copy_stderr(server.to_owned(), stderr, limits.max_stderr_bytes));
    }
    Ok(Spawned {
        child,
        stdout: BoundedLines {
            inner: stdout,
            line: 0,
            max: limits.max_message_bytes,
            overflow,
        },
        stdin,
    })
}

/// A reader of newline-delimited messages that fails, and records it in `overflow`, once a line passes `max`
/// bytes: rmcp's own cap drops such a line and waits for the next, which leaves the request it answered waiting
/// for its timeout; failing closes the connection at once, with the reason at hand for the error.
pub(crate) struct BoundedLines<R> {
    inner: R,
    /// Bytes of the current line read so far.
    line: usize,
    max: usize,
    overflow: Arc<OnceLock<usize>>,
}

/// The length of the current line after `chunk`, or `None` once it passes `max` (the newline is not counted).
fn line_after(mut line: usize, chunk: &[u8], max: usize) -> Option<usize> {
    for segment in chunk.split_inclusive(|&byte| byte == b'\n') {
        let ends = segment.last() == Some(&b'\n');
        line += segment.len() - usize::from(ends);
        if line > max {
            return None;
        }
        if ends {
            line = 0;
        }
    }
    Some(line)
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => match line_after(this.line, &buf.filled()[before..], this.max) {
                Some(line) => {
                    this.line = line;
                    Poll::Ready(Ok(()))
                }
                None => {
                    buf.set_filled(before);
                    let _ = this.overflow.set(this.max);
                    Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("a message over {} (the limit)", bytes_text(this.max)),
                    )))
                }
            },
            other => other,
        }
    }
}

/// Copies the first `budget` bytes of the server's stderr to headstart's ([`render_stderr`]), then reads and drops
/// the rest until the server closes it.
async fn copy_stderr(server: String, mut stderr: ChildStderr, budget: usize) {
    let mut chunk = vec![0; 8192];
    let mut left = budget;
    let mut at_line_start = true;
    loop {
        let read = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        if left == 0 {
            continue;
        }
        let shown = read.min(left);
        left -= shown;
        let mut text = render_stderr(&server, &chunk[..shown], &mut at_line_start);
        if left == 0 {
            text.push_str(&format!(
                "\n[mcp {server}] (stderr past {} dropped)\n",
                bytes_text(budget)
            ));
        }
        // A closed or full stderr of headstart's own is no reason to stop draining the server's.
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

/// A piece of a server's stderr as headstart prints it: `[mcp NAME] ` at the start of each line, and every
/// control character other than newline and tab replaced, so the server cannot move the cursor or rewrite the
/// terminal.
fn render_stderr(server: &str, bytes: &[u8], at_line_start: &mut bool) -> String {
    let mut text = String::with_capacity(bytes.len() + 16);
    for c in String::from_utf8_lossy(bytes).chars() {
        if *at_line_start {
            text.push_str(&format!("[mcp {server}] "));
            *at_line_start = false;
        }
        match c {
            '\n' => {
                text.push('\n');
                *at_line_start = true;
            }
            '\t' => text.push('\t'),
            c if c.is_control() => text.push('\u{FFFD}'),
            c => text.push(c),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_the_safe_set_plus_what_the_command_sets() {
        let parent = |name: &str| match name {
            "PATH" => Some(OsString::from("/usr/bin")),
            "SHELL" => Some(OsString::from("() { evil; }")),
            "OPENAI_API_KEY" => Some(OsString::from("sk-secret")),
            _ => None,
        };
        let explicit = vec![
            (OsString::from("TOKEN"), Some(OsString::from("given"))),
            (OsString::from("PATH"), Some(OsString::from("/opt/bin"))),
        ];
        let environment = child_environment(parent, explicit);
        assert_eq!(
            environment,
            [
                (OsString::from("TOKEN"), OsString::from("given")),
                (OsString::from("PATH"), OsString::from("/opt/bin")),
            ]
        );
        let removed = child_environment(parent, vec![(OsString::from("PATH"), None)]);
        assert!(removed.is_empty(), "{removed:?}");
    }

    #[test]
    fn lines_are_measured_across_chunks() {
        assert_eq!(line_after(0, b"abc\nde", 3), Some(2));
        assert_eq!(line_after(2, b"f", 3), Some(3));
        assert_eq!(line_after(3, b"g", 3), None);
        assert_eq!(line_after(3, b"\nabc\n", 3), Some(0));
        assert_eq!(line_after(0, b"abcd\n", 3), None);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_fails_the_read_and_is_recorded() {
        let overflow = Arc::new(OnceLock::new());
        let mut reader = BoundedLines {
            inner: &b"short\nfar too long a line\n"[..],
            line: 0,
            max: 8,
            overflow: Arc::clone(&overflow),
        };
        let mut read = Vec::new();
        let error = reader.read_to_end(&mut read).await.expect_err("the long line fails");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
        assert_eq!(overflow.get(), Some(&8));
        assert!(read.len() <= 8 + "short\n".len(), "{read:?}");
    }

    #[test]
    fn stderr_lines_are_prefixed_and_control_characters_replaced() {
        let mut at_line_start = true;
        let first = render_stderr("evil", b"one\n\x1b[2Jtw", &mut at_line_start);
        let second = render_stderr("evil", b"o\n", &mut at_line_start);
        assert_eq!(
            format!("{first}{second}"),
            "[mcp evil] one\n[mcp evil] \u{FFFD}[2Jtwo\n"
        );
    }
}

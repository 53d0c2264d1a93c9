//! The tools `headstart run` offers without any server. They read, never write, and treat the model as hostile:
//! a prompt injection must not turn them into a way to read secrets or reach the machine's network.
//!
//! - `read_file` and `list_dir` ([`files`]) see only the working directory, confined by the kernel (`openat2`
//!   `RESOLVE_BENEATH` through `cap-std`), not by a check before the open. `read_file` reads regular files only, at
//!   most [`MAX_OUTPUT_BYTES`], and refuses the run's transcript and, unless `--read-secrets`, the secrets
//!   [`secrets`] lists. A missing path and a path outside read the same.
//! - `fetch_url` ([`fetch`]) is offered only with `--fetch`. It reaches public addresses only (unless
//!   `--fetch-allow-private`), only the `--fetch-allow` hosts when given, follows at most five redirects within the
//!   same host, reads at most [`MAX_OUTPUT_BYTES`] of the body and takes at most 30 s in all. What it may reach is
//!   decided by the pure [`fetch_policy`].
//!
//! All three have no side effect, so they are early (they start while the model still streams) and idempotent
//! (recovery may run them again). A tool that writes would be declared sync, so that it runs only once the response
//! is complete (contract §4).

pub mod fetch;
pub mod fetch_policy;
pub mod files;
pub mod secrets;

use std::path::PathBuf;
use std::sync::Arc;

use headstart::{Arguments, Tool, ToolError, Toolbox, ToolboxError};
use serde_json::Value;

pub use fetch::{FetchLimits, FetchUrl};
pub use fetch_policy::FetchPolicy;
pub use files::{ListDir, ReadFile, Workdir};

/// The most a tool returns to the model, in bytes; longer output is cut with a note saying so.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// A required argument is missing or not a string.
#[derive(Debug, thiserror::Error)]
#[error("the argument {0:?} is required and must be a string")]
pub struct MissingArgument(&'static str);

impl From<MissingArgument> for ToolError {
    fn from(error: MissingArgument) -> Self {
        ToolError::new(error.to_string())
    }
}

fn string_argument<'a>(arguments: &'a Arguments, name: &'static str) -> Result<&'a str, MissingArgument> {
    arguments.get(name).and_then(Value::as_str).ok_or(MissingArgument(name))
}

/// How many bytes at the end of `bytes` are the start of a UTF-8 character that a cut left incomplete.
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xc0 != 0x80 {
            let needed = match byte {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => 1,
            };
            return if needed > back { back } else { 0 };
        }
    }
    0
}

/// `bytes` as text (invalid UTF-8 replaced); beyond `limit` cut, at a character boundary, with the note
/// `[WHAT cut at LIMIT bytes]`.
pub fn cut_text(mut bytes: Vec<u8>, limit: usize, what: &str) -> String {
    let cut = bytes.len() > limit;
    if cut {
        bytes.truncate(limit);
        bytes.truncate(limit - incomplete_tail(&bytes));
    }
    let mut text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    };
    if cut {
        text.push_str(&format!("\n[{what} cut at {limit} bytes]"));
    }
    text
}

/// What the built-in tools may do, from `headstart run`'s flags.
#[derive(Debug, Clone, Default)]
pub struct BuiltinConfig {
    /// The directory the file tools are confined to.
    pub workdir: PathBuf,
    /// The SQLite transcript of the run (`--db`), which `read_file` refuses with its `-wal`, `-shm`, `-journal`.
    pub transcript: Option<PathBuf>,
    /// `--read-secrets`: `read_file` reads secrets too.
    pub read_secrets: bool,
    /// `--fetch`: offer `fetch_url`, within this policy; `None`: not offered.
    pub fetch: Option<FetchPolicy>,
}

/// The built-in tools as `config` allows, plus `extra` (the seam where tools from MCP servers plug in).
pub fn toolbox(config: &BuiltinConfig, extra: Vec<Arc<dyn Tool>>) -> Result<Toolbox, String> {
    let workdir = Workdir::new(&config.workdir, config.transcript.as_deref(), config.read_secrets)
        .map_err(|error| format!("working directory {}: {error}", config.workdir.display()))?;
    let workdir = Arc::new(workdir);
    let register = |error: ToolboxError| error.to_string();
    let mut toolbox = Toolbox::new()
        .with(ReadFile(Arc::clone(&workdir)))
        .map_err(register)?
        .with(ListDir(workdir))
        .map_err(register)?;
    if let Some(policy) = &config.fetch {
        let fetch = FetchUrl::new(policy.clone(), FetchLimits::default())
            .map_err(|error| format!("cannot build the HTTP client of fetch_url: {error}"))?;
        toolbox.register(fetch).map_err(register)?;
    }
    for tool in extra {
        toolbox.register_arc(tool).map_err(register)?;
    }
    Ok(toolbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary_with_a_note() {
        let text = "é".repeat(MAX_OUTPUT_BYTES);
        let cut = cut_text(text.into_bytes(), MAX_OUTPUT_BYTES, "file");
        assert!(
            cut.ends_with("\n[file cut at 262144 bytes]"),
            "{}",
            &cut[cut.len() - 40..]
        );
        assert!(!cut.contains('\u{fffd}'));
        assert_eq!(cut.len(), MAX_OUTPUT_BYTES + "\n[file cut at 262144 bytes]".len());
        // A cut in the middle of a character drops the character whole.
        assert_eq!(
            cut_text("aé".as_bytes().to_vec(), 2, "body"),
            "a\n[body cut at 2 bytes]"
        );
        assert_eq!(
            cut_text("a€".as_bytes().to_vec(), 3, "body"),
            "a\n[body cut at 3 bytes]"
        );
        assert_eq!(
            cut_text("a😀".as_bytes().to_vec(), 4, "body"),
            "a\n[body cut at 4 bytes]"
        );
        assert_eq!(cut_text(b"short".to_vec(), 5, "body"), "short");
        assert_eq!(cut_text(vec![b'x', 0xff], 5, "body"), "x\u{fffd}");
    }
}

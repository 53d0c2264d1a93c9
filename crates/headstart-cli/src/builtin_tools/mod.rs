//! The tools `headstart run` offers without any server. They read, never write, and treat the model as hostile:
//! a prompt injection must not turn them into a way to read secrets or reach the machine's network.
//!
//! - `read_file` and `list_dir` ([`files`]) see only the [`workdir`], confined by the kernel (`openat2`
//!   `RESOLVE_BENEATH` through `cap-std`), not by a check before the open. `read_file` reads regular files only, at
//!   most [`MAX_OUTPUT_BYTES`], and refuses the run's transcript and, unless `--read-secrets`, the secrets
//!   [`secrets`] lists. A missing path and a path outside read the same.
//! - `fetch_url` ([`fetch`]) is offered only with `--fetch`. It reaches public addresses only (unless
//!   `--fetch-allow-private`), only the `--fetch-allow` hosts when given, follows at most five redirects within the
//!   same host, reads at most [`MAX_OUTPUT_BYTES`] of the body and takes at most 30 s in all. What it may reach is
//!   decided by the pure [`fetch_policy`].
//!
//! [`MAX_OUTPUT_BYTES`]: output::MAX_OUTPUT_BYTES
//!
//! All three have no side effect, so they are early (they start while the model still streams) and idempotent
//! (recovery may run them again). A tool that writes would be declared sync, so that it runs only once the response
//! is complete (contract §4).

mod arguments;
pub mod fetch;
pub mod fetch_policy;
pub mod files;
mod output;
pub mod secrets;
pub mod workdir;

use std::path::PathBuf;
use std::sync::Arc;

use headstart::layer::{ProviderAsyncLayer, ToolLayer};
use headstart::{Tool, Toolbox, ToolboxError};

pub use fetch::{FetchLimits, FetchUrl};
pub use fetch_policy::FetchPolicy;
pub use files::{ListDir, ReadFile};
pub use workdir::Workdir;

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
    /// `--provider-async`: declare the built-in tools provider-async ([`ProviderAsyncLayer`]).
    pub provider_async: bool,
}

/// The built-in tools as `config` allows, plus `extra` (the seam where tools from MCP servers plug in).
pub fn toolbox(config: &BuiltinConfig, extra: Vec<Arc<dyn Tool>>) -> Result<Toolbox, String> {
    let workdir = Workdir::new(&config.workdir, config.transcript.as_deref(), config.read_secrets)
        .map_err(|error| format!("working directory {}: {error}", config.workdir.display()))?;
    let workdir = Arc::new(workdir);
    let register = |error: ToolboxError| error.to_string();
    let mut builtins: Vec<Arc<dyn Tool>> = vec![Arc::new(ReadFile(Arc::clone(&workdir))), Arc::new(ListDir(workdir))];
    if let Some(policy) = &config.fetch {
        let fetch = FetchUrl::new(policy.clone(), FetchLimits::default())
            .map_err(|error| format!("cannot build the HTTP client of fetch_url: {error}"))?;
        builtins.push(Arc::new(fetch));
    }
    let mut toolbox = Toolbox::new();
    for tool in builtins {
        let tool = match config.provider_async {
            true => ProviderAsyncLayer.layer(tool),
            false => tool,
        };
        toolbox.register_arc(tool).map_err(register)?;
    }
    for tool in extra {
        toolbox.register_arc(tool).map_err(register)?;
    }
    Ok(toolbox)
}

//! The agent a command runs on a real model: the flags `run`, `resume` and `worker` share ([`ModelArgs`]), and
//! what they build ([`AgentParts`]: the model client, the built-in and MCP tools, the engine's configuration).
//!
//! One idea a file: `args` (the flags and the endpoint check), `mcp_flags` (the `--mcp` and `--mcp-env` values),
//! `parts` (building the model, tools and configuration).

mod args;
mod mcp_flags;
mod parts;
#[cfg(test)]
mod tests;

pub(crate) use args::parse_seal_at;
pub use args::ModelArgs;
pub(crate) use parts::AgentParts;

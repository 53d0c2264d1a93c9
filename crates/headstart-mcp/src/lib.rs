//! # headstart-mcp
//!
//! MCP servers as headstart tools. [`McpServer`] connects to a server over stdio (a child process), streamable
//! HTTP, or any transport rmcp (the official Rust MCP SDK) accepts, lists its tools, and registers them in a
//! [`headstart::Toolbox`] as [`McpTool`]s named `{server}__{tool}` ([`tool_name`]).
//!
//! Each call maps onto MCP as follows:
//! - arguments are validated against the tool's `inputSchema` (its `parameters`) and sent with `tools/call`;
//! - cancelling the call's token sends `notifications/cancelled` for the request (and so does dropping the call);
//! - `notifications/progress` for the request become the call's updates ([`headstart::ToolContext::updates`]);
//! - the result maps onto [`headstart::ToolOutput`]: `isError` → the call's error result, structured content →
//!   `details`, non-text content described in text and kept in `details` (see [`into_output`]);
//! - a server that dies or misbehaves mid-call fails that call with an error result; nothing panics.
//!
//! **Servers are held to limits** ([`McpLimits`], safe by default): time for `initialize`, `tools/list` and each
//! `tools/call`; the number of pages and tools listed, the size of each tool and of each call's result (cut, with a
//! note), the size of each message read from a stdio server. A stdio server starts with a clean environment
//! ([`INHERITED_ENV`] plus what its command sets), so headstart's API keys stay out of its reach.
//!
//! **Annotations are untrusted by default.** A server's `readOnlyHint` and `idempotentHint` are its own claims, so
//! unless the server is marked trusted ([`ToolPolicy::trusted`]) every tool is sync, non-idempotent, and its calls
//! keep source order with the server's other calls. [`ToolFlags`] says what a trusted server's annotations give, and
//! an [`Override`] sets flags per tool whatever the server says.
#![warn(missing_docs)]

mod connection;
mod content;
mod error;
mod limits;
mod names;
mod policy;
mod progress;
mod server;
mod stdio;
#[cfg(feature = "testing")]
pub mod testing;
mod tool;

pub use content::into_output;
pub use error::McpError;
pub use limits::McpLimits;
pub use names::{tool_name, MAX_TOOL_NAME_LEN};
pub use policy::{server_conflict_key, Override, ToolFlags, ToolPolicy};
pub use server::McpServer;
pub use stdio::INHERITED_ENV;
pub use tool::McpTool;

/// The MCP SDK this crate is built on, for naming its types (transports, tool definitions).
pub use rmcp;

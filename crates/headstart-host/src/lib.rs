//! # headstart-host
//!
//! How a host language's tools, hooks and answers are run and read: the one layer under headstart's Python package
//! (pyo3) and Node package (napi-rs). Each package keeps only its way of reaching its language, an implementation of
//! [`Host`]; what the engine asks a host, how the answer is awaited, and how it is read are here, once for both.
//!
//! - [`spec`]: a host tool's settings as data ([`HostToolSpec`]), read into the engine's [`headstart::ToolSpec`] and
//!   a [`ConflictKey`];
//! - [`ask`](mod@ask): what the engine asks ([`Ask`]), the [`Host`] trait (start a piece of work, abort it) and the protocol
//!   around it ([`ask()`]: an answer awaited, the host told to abort when the call is cancelled, the work abandoned
//!   when the engine stops waiting);
//! - [`answer`]: the host's answers as serde types ([`ToolAnswer`], [`BeforeAnswer`], [`AfterAnswer`]), each read
//!   into the engine's types; an answer that does not read becomes the call's error result, naming what was
//!   expected;
//! - [`tool`] and [`hook`]: [`HostTool`] and [`HostHook`], a host's tools and hooks as the engine's
//!   [`headstart::Tool`] and [`headstart::ToolHook`];
//! - [`open`]: one response of a session opened as a host's chat opens it ([`open_response`]: the session created
//!   under the host's id, the prompt's user messages recorded, an earlier response's missing results refused).
#![deny(missing_docs)]

pub mod answer;
pub mod ask;
pub mod hook;
pub mod open;
pub mod spec;
pub mod tool;

pub use answer::{AfterAnswer, BeforeAnswer, ToolAnswer};
pub use ask::{ask, Ask, CallAsk, Host, HostFailure, Reply};
pub use hook::HostHook;
pub use open::{new_session_id, open_response, OpenError, Opening};
pub use spec::{Amount, ConflictKey, HostToolSpec, SpecError};
pub use tool::HostTool;

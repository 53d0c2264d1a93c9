//! # headstart-node
//!
//! headstart for Node.js: the engine as a Node-API addon (napi-rs), loaded by the `headstart` npm package beside
//! this crate (`index.js`, `pi.js`, their `.d.ts`). The addon is private to the package: its surface is plain data
//! (JSON text) and a few handles, and the package's JavaScript gives it its typed, documented face.
//!
//! - [`store`]: opening a store from a location (a SQLite path or a PostgreSQL URL), once, shared by engines; what
//!   it holds, as JSON.
//! - [`bridge`]: the package's [`headstart_host::Host`]: how the engine, on tokio, asks JavaScript for something (run a
//!   tool, a hook): one thread-safe function per engine carries every ask, and JavaScript answers through `settle`.
//!   The tools and hooks themselves are the host layer's ([`headstart_host::HostTool`],
//!   [`headstart_host::HostHook`]).
//! - [`engine`]: `NativeEngine`, the engine over a store with JavaScript tools; [`response`]: one wrapped response,
//!   its feed in and its events out, in batches.
#![deny(missing_docs)]

pub mod bridge;
pub mod engine;
pub mod response;
pub mod store;

/// The version this addon was built as (its crate's, which is the workspace's). The package refuses an addon whose
/// version is not its own (`lib/platform.js`): a platform package left over from another release would otherwise
/// answer a protocol it does not speak.
#[napi_derive::napi]
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The value `name` stands for among two `choices`, or the error naming both: `<parameter> must be 'a' or 'b', not
/// "x"` (the text Python's package gives for its two-way options).
pub(crate) fn one_of<T: Copy>(parameter: &str, name: &str, choices: [(&str, T); 2]) -> napi::Result<T> {
    match choices.iter().find(|(choice, _)| *choice == name) {
        Some(&(_, value)) => Ok(value),
        None => Err(js_error(format!(
            "{parameter} must be '{}' or '{}', not {name:?}",
            choices[0].0, choices[1].0
        ))),
    }
}

/// A failure the package turns into a JavaScript `Error` with this message.
pub(crate) fn js_error(error: impl std::fmt::Display) -> napi::Error {
    napi::Error::from_reason(error.to_string())
}

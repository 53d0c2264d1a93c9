//! # headstart-py
//!
//! The native half of the `headstart` Python package (`headstart._native`): the engine, its Python tools, the
//! stream feed and the event stream, built with pyo3 for CPython 3.10 and later (one `abi3` wheel). The public
//! Python API (`headstart.Engine`, `@headstart.tool`, `engine.wrap`, ...) is the package's Python code in
//! `python/headstart`, documented by its stubs (`__init__.pyi`); this crate is its implementation detail.
//!
//! Two runtimes run side by side: asyncio on the caller's thread, tokio on its own threads. Rust futures become
//! asyncio awaitables (`runtime::awaitable`); a Python tool's coroutine is started on the caller's loop through a
//! mailbox (`mailbox.rs`: a letter and a one-byte wake-up, no GIL on the engine's side) and its answer crosses back
//! as JSON text (`outcome.rs`). How a tool or hook is asked and its answer read is the host layer's
//! (`headstart_host`); `host.rs` is only how it reaches Python. No tokio worker thread ever waits for the GIL, so a Python thread holding it
//! never delays a commit.
#![warn(missing_docs)]

mod agent;
mod engine;
mod errors;
mod events;
mod feed;
mod home;
mod host;
mod http_model;
mod inspect;
mod json;
mod mailbox;
mod model;
mod outcome;
mod request;
mod runtime;
mod savings;
mod store;
mod submit;
mod task;
#[cfg(feature = "testing")]
mod testing;

use pyo3::prelude::*;

/// The `headstart._native` module.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    // The package refuses an extension whose version is not its distribution's (`headstart/_version.py`).
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_class::<agent::Agent>()?;
    module.add_class::<engine::Engine>()?;
    module.add_class::<request::ModelRequest>()?;
    module.add_class::<events::Events>()?;
    module.add_class::<http_model::HttpModel>()?;
    module.add_class::<mailbox::Mailbox>()?;
    module.add_class::<feed::Feed>()?;
    module.add_class::<outcome::CallDone>()?;
    module.add_class::<outcome::CallUpdates>()?;
    module.add_function(wrap_pyfunction!(inspect::inspect, module)?)?;
    module.add_function(wrap_pyfunction!(savings::savings, module)?)?;
    module.add_function(wrap_pyfunction!(submit::submit, module)?)?;
    module.add_function(wrap_pyfunction!(savings::demo_script, module)?)?;
    module.add("HeadstartError", py.get_type::<errors::HeadstartError>())?;
    module.add("EngineError", py.get_type::<errors::EngineError>())?;
    module.add("StoreError", py.get_type::<errors::StoreError>())?;
    module.add("SessionBusy", py.get_type::<errors::SessionBusy>())?;
    module.add("ModelError", py.get_type::<errors::ModelError>())?;
    module.add("ConfigError", py.get_type::<errors::ConfigError>())?;
    #[cfg(feature = "testing")]
    testing::register(module)?;
    Ok(())
}

//! # headstart-testkit
//!
//! What headstart's tests share, apart from the simulator that runs scenarios (`headstart-sim`):
//!
//! - [`invariants`]: the engine's invariants, checked on a replay report, on what a store holds for a session, or
//!   on one wrapped response and the store it wrote; used by the scenario, adapter, load, crash and fleet tests and
//!   by the fuzz targets;
//! - [`expect`]: a scenario's `expect` block checked against its report (`docs/scenario-format.md`);
//! - [`fixtures`]: model responses and stored records built in one line;
//! - [`skip`]: the skip rule of tests that need something outside cargo, and [`command`]: running it.
//!
//! Test code: checks panic-free, fixtures panic on bad input (their input is the test's own).
#![warn(missing_docs)]

pub mod command;
pub mod expect;
pub mod fixtures;
pub mod invariants;
pub mod skip;

pub use invariants::InvariantViolation;

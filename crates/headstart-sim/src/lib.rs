//! # headstart-sim
//!
//! Scenario replay for headstart (contract §8, `docs/scenario-format.md`): a simulated streaming model that emits each
//! turn's delta events at their `at_ms`, simulated tools and hooks driven by the scenario, and the report builder.
//! On tokio's paused clock a scenario's report is deterministic: the same scenario yields byte-identical reports.
//! That clock needs tokio's `test-util`, which this crate enables only with its `virtual-clock` feature (see
//! [`ClockMode`]); everything else works without it.
#![warn(missing_docs)]

pub mod commit_trace;
pub mod crash_at;
pub mod demo;
pub mod replay;
pub mod scenario;
pub mod sim_model;
pub mod sim_tools;
pub mod timing;

pub use replay::{replay, replay_blocking, replay_file, ClockMode, ReplayOptions, ReplayOutcome};
pub use scenario::{Scenario, ScenarioError};

//! The stream adapter (contract §3): one model response in, one ordered stream of agent events out.
//!
//! `driver::ResponseDriver` holds the state of one response, in the parts its steps own, and has one small method per
//! step, each step in a file of its own: `accumulate` (accumulate a delta, ask the pure `prefix` whether a sealed call
//! triggers a prefix commit), `commit`,
//! `calls` (admit, start, settle), `results` (with `write_queue`, the one-at-a-time result writes), `ending`. Each
//! step hands the events it produces to the run's outbox; `drive::drive_response` is the loop that feeds the
//! driver. It runs on the engine's own task and never waits for the consumer (contract §6).
//!
//! Beside the driver, the machinery of a response's calls: the pure `scheduler` and the `runner` that carries out
//! its decisions, `prepare` and `execute` (the lifecycle phases of one call), `admission`, the `lease_guard` a
//! fleet worker's calls pass, `telemetry` (the GenAI spans) and `panic` (caught panics as messages).
//!
//! Order of effects for a prefix (contract §3.3): commit (durable) → `message_end` → admit. A failed commit admits
//! nothing: the response ends as `error` naming the store failure. Admission is a type (`admission::Admission`)
//! that only a successful commit produces.
//!
//! Store writes are awaited one at a time, in the order the driver makes them, so the transcript's order is
//! deterministic; a call's result is written after the calls it unblocks have started (contract §6.5, issue 11), so
//! the only durable write between a seal and a start is the commit of the call's own fragment.

mod accumulate;
pub(crate) mod admission;
mod calls;
mod commit;
pub(crate) mod drive;
mod driver;
pub(crate) mod ending;
pub(crate) mod execute;
// Test code, in a folder of its own: it builds a whole engine, which the response's own files do not name.
#[cfg(test)]
#[path = "response/tests/fixture.rs"]
mod fixture;
pub(crate) mod lease_guard;
mod panic;
mod prefix;
pub(crate) mod prepare;
pub(crate) mod results;
pub(crate) mod runner;
pub(crate) mod scheduler;
mod step;
pub(crate) mod telemetry;
mod write_queue;

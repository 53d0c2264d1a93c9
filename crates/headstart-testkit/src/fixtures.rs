//! Fixtures the tests share, so that a test states what it builds in one line: model responses as delta events
//! ([`deltas`]) and what a store holds, messages and run records ([`stored`]).

pub mod deltas;
pub mod stored;

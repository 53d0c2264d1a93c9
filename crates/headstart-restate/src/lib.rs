//! headstart on [Restate](https://restate.dev): a session is a Virtual Object, each seal a journal entry, each early
//! call a durable call to the `Tools` service, issued while the model goes on streaming.
//!
//! A deployment ([`endpoint`]) serves two services to a Restate server:
//! - `Session` (a Virtual Object keyed by the session id): its exclusive handler `turn` runs the agent loop for one
//!   prompt. The engine runs unchanged; a store layer and a tool layer (the *pump*) hand its durable steps to the
//!   invocation, which journals them in the engine's order.
//! - `Tools`: its handler `run_call` runs one call's body, at most once.
//!
//! The transcript store stays the record (docs/decisions.md): every seal is journaled, then committed to it, and no
//! call of the seal is admitted before both. `inspect`, `serve` and `timeline` read Restate sessions as any others.
//! docs/restate.md tells how to run it.
//!
//! Two features add what a deployment itself never needs: `balance`, the HTTP/2 balancer ([`Balancer`]) that puts
//! several deployments behind one registered address, and `testing`, the module `local`, which starts a throwaway
//! `restate-server` on loopback for tests and benchmarks, and crashes on purpose at named instants
//! ([`FAULT_VARIABLE`]) for the crash tests.

mod admin;
#[cfg(feature = "balance")]
pub mod balance;
mod client;
mod deployment;
#[cfg(feature = "testing")]
mod faults;
mod flagged;
mod journal;
#[cfg(feature = "testing")]
pub mod local;
pub mod metrics;
mod pump;
mod session;
mod tools;
mod watch;

pub use admin::{FailingCall, TurnStatus};
#[cfg(feature = "balance")]
pub use balance::{BalanceError, Balancer};
pub use client::{new_session_id, RestateClient, RestateError};
pub use deployment::{Deployment, DEFAULT_TURN_LIMIT};
#[cfg(feature = "testing")]
pub use faults::FAULT_VARIABLE;
pub use journal::{CallSpec, Seal, Step, TurnReport};
pub use session::{Session, TurnRequest};
pub use tools::Tools;
pub use watch::watch_failing_calls;

use std::sync::Arc;

use restate_sdk::prelude::{Endpoint, HttpServer};
use tokio::net::TcpListener;

/// The deployment's endpoint: both services, bound to `deployment`.
pub fn endpoint(deployment: Arc<Deployment>) -> Endpoint {
    Endpoint::builder()
        .bind(Session {
            deployment: Arc::clone(&deployment),
        })
        .bind(Tools { deployment })
        .build()
}

/// Serves `deployment` on the connections `listener` accepts (HTTP/2, what the Restate server speaks) until the
/// process ends. The caller binds the listener, so it knows the address is taken before it says it serves.
pub async fn serve(deployment: Arc<Deployment>, listener: TcpListener) {
    HttpServer::new(endpoint(deployment)).serve(listener).await;
}

//! Who runs a session: the one definition of a session's owner that `headstart run`, `resume`, `recover` and the
//! fleet's leases share, and the pure decision of whether another process may take the session.
//!
//! A session is written by one process at a time. Two kinds of owner exist:
//!
//! - **A process on this machine** (`headstart run`, `resume`, `recover` on a SQLite file): it holds an OS lock on
//!   a per-session lock file beside the database ([`SessionLocks`]), released when the process exits and when it
//!   crashes, because the operating system drops a dead process's locks. The lock file also holds a
//!   [`ProcessRecord`] (pid, host, since when), so that a refusal can name the owner.
//! - **A worker of a fleet** (contract §7.5): the session is `running` under its lease ([`Holder::of_session`]).
//!
//! [`decide`] says whether a process may take a session given who holds it: it may when nobody does; a process
//! holder is respected unless the caller forces (the user knows that process is gone, or hung); a worker's lease is
//! always respected, because the store fences every write made without it.

mod holder;
mod lock;
mod time;

pub use holder::{decide, Holder, ProcessRecord, Refusal, Take};
pub use lock::{lock_file_name, OwnershipError, SessionLock, SessionLocks};
pub use time::rfc3339_seconds;

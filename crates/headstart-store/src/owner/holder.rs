//! Who holds a session ([`Holder`]: a process's [`ProcessRecord`], or a worker's lease) and the pure decision
//! ([`decide`]) of whether another process may take it.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::time::rfc3339_seconds;
use crate::types::{SessionId, SessionInfo, SessionState};

/// The most bytes of a host name kept in a record (and shown in messages); longer names are cut.
const MAX_HOST_BYTES: usize = 255;

/// The owner a process records in its session's lock file: who it is and since when it holds the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// The owning process's id.
    pub pid: u32,
    /// The machine it runs on (its host name, control characters replaced, at most 255 bytes).
    pub host: String,
    /// When it took the session (µs since the Unix epoch, the machine's clock).
    pub since_us: i64,
}

impl ProcessRecord {
    /// The record of the calling process, taking the session at `now_us`.
    pub fn current(now_us: i64) -> Self {
        let host = whoami::hostname().unwrap_or_else(|_| "unknown".to_owned());
        ProcessRecord {
            pid: std::process::id(),
            host: clean_host(&host),
            since_us: now_us,
        }
    }

    /// The record as read from a lock file another process wrote: its host name cleaned like the own one, since
    /// the file may hold anything.
    pub(super) fn cleaned(self) -> Self {
        ProcessRecord {
            host: clean_host(&self.host),
            ..self
        }
    }
}

impl fmt::Display for ProcessRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "process {} on host {} since {}",
            self.pid,
            self.host,
            rfc3339_seconds(self.since_us)
        )
    }
}

/// A host name fit for a one-line message: control characters become `?`, and it is cut to 255 bytes.
fn clean_host(host: &str) -> String {
    let mut clean = String::new();
    for c in host.chars() {
        let c = if c.is_control() { '?' } else { c };
        if clean.len() + c.len_utf8() > MAX_HOST_BYTES {
            break;
        }
        clean.push(c);
    }
    if clean.is_empty() {
        clean.push_str("unknown");
    }
    clean
}

/// Who holds a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A live process holds the session's lock; its record, when it could be read (a process that has just taken
    /// the lock may not have written it yet).
    Process(Option<ProcessRecord>),
    /// A worker of a fleet holds the session under a lease (contract §7.5).
    Worker {
        /// The worker's name.
        name: String,
        /// The session's epoch under that worker.
        epoch: u64,
        /// When the lease ends, on the database's clock (µs since the Unix epoch).
        lease_expires_at_us: i64,
    },
}

impl Holder {
    /// The worker holding a fleet's session: `Some` while the session is `running` (its lease may have expired:
    /// [`decide`] tells that apart), `None` for sessions no worker holds.
    pub fn of_session(info: &SessionInfo) -> Option<Holder> {
        if info.state != SessionState::Running {
            return None;
        }
        Some(Holder::Worker {
            name: info.owner.clone().unwrap_or_else(|| "an unnamed worker".to_owned()),
            epoch: info.epoch,
            lease_expires_at_us: info.lease_expires_at_us.unwrap_or(i64::MIN),
        })
    }
}

/// How a process takes a session ([`decide`]'s yes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Nobody holds it (never held, or its holder exited or crashed).
    Free,
    /// A process holds it, and the caller forces: it takes the session over from that process.
    TakeOver(Option<ProcessRecord>),
}

/// Why a process may not take a session ([`decide`]'s no). Its `Display` names the owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Refusal {
    /// The session.
    pub session: SessionId,
    /// Who holds it.
    pub holder: Holder,
    /// When the decision was made (µs since the Unix epoch): a lease is live or expired relative to it.
    pub now_us: i64,
}

impl Refusal {
    /// Whether forcing would take the session: a process holder can be taken over; a worker's lease cannot, since
    /// the store fences every write made without it.
    pub fn forcible(&self) -> bool {
        matches!(self.holder, Holder::Process(_))
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let session = &self.session;
        match &self.holder {
            Holder::Process(Some(record)) => write!(f, "session {session} is running in {record}"),
            Holder::Process(None) => write!(
                f,
                "session {session} is running in a process that has not recorded itself yet (its lock is held)"
            ),
            Holder::Worker {
                name,
                epoch,
                lease_expires_at_us,
            } if *lease_expires_at_us > self.now_us => write!(
                f,
                "session {session} is held by worker {name} (epoch {epoch}) under a lease valid until {}; only \
                 that worker writes it",
                rfc3339_seconds(*lease_expires_at_us)
            ),
            Holder::Worker {
                name,
                epoch,
                lease_expires_at_us,
            } => write!(
                f,
                "session {session} is held by worker {name} (epoch {epoch}), whose lease expired at {}; the next \
                 worker to claim it recovers it",
                rfc3339_seconds(*lease_expires_at_us)
            ),
        }
    }
}

/// May a process take `session`, held by `holder` (`None`: nobody holds it), at `now_us`? `force` takes it over
/// from a process holder (which the OS lock says is alive: the user knows it is gone or hung); a worker's lease,
/// live or expired, is never taken: a worker's claim is the only way in (contract §7.5.2).
pub fn decide(session: &SessionId, holder: Option<&Holder>, force: bool, now_us: i64) -> Result<Take, Refusal> {
    match holder {
        None => Ok(Take::Free),
        Some(Holder::Process(record)) if force => Ok(Take::TakeOver(record.clone())),
        Some(holder) => Err(Refusal {
            session: session.clone(),
            holder: holder.clone(),
            now_us,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::SessionSettings;

    fn record() -> ProcessRecord {
        ProcessRecord {
            pid: 1234,
            host: "h".to_owned(),
            // 2026-12-01T20:11:03Z
            since_us: 1_796_155_863_000_000,
        }
    }

    #[test]
    fn a_free_session_is_taken_and_a_process_holder_only_by_force() {
        let session = SessionId::from("0192");
        assert_eq!(decide(&session, None, false, 0), Ok(Take::Free));
        assert_eq!(decide(&session, None, true, 0), Ok(Take::Free));
        let held = Holder::Process(Some(record()));
        let refusal = decide(&session, Some(&held), false, 0).expect_err("a live process is respected");
        assert!(refusal.forcible());
        assert_eq!(
            refusal.to_string(),
            "session 0192 is running in process 1234 on host h since 2026-12-01T20:11:03Z"
        );
        assert_eq!(
            decide(&session, Some(&held), true, 0),
            Ok(Take::TakeOver(Some(record())))
        );
        let unnamed = Holder::Process(None);
        assert!(decide(&session, Some(&unnamed), false, 0)
            .expect_err("refused")
            .to_string()
            .contains("has not recorded itself"));
        assert_eq!(decide(&session, Some(&unnamed), true, 0), Ok(Take::TakeOver(None)));
    }

    #[test]
    fn a_workers_lease_is_never_taken_and_says_whether_it_is_live() {
        let session = SessionId::from("s");
        let worker = Holder::Worker {
            name: "w1".to_owned(),
            epoch: 3,
            lease_expires_at_us: 2_000_000,
        };
        for force in [false, true] {
            let live = decide(&session, Some(&worker), force, 1_000_000).expect_err("a live lease");
            assert!(!live.forcible());
            assert_eq!(
                live.to_string(),
                "session s is held by worker w1 (epoch 3) under a lease valid until 1970-01-01T00:00:02Z; only \
                 that worker writes it"
            );
            let expired = decide(&session, Some(&worker), force, 2_000_000).expect_err("an expired lease");
            assert!(
                expired
                    .to_string()
                    .contains("whose lease expired at 1970-01-01T00:00:02Z"),
                "{expired}"
            );
        }
    }

    #[test]
    fn only_running_sessions_have_a_worker_holder() {
        let mut info = SessionInfo {
            id: SessionId::from("s"),
            created_at_us: 0,
            messages: 1,
            state: SessionState::Completed,
            owner: Some("w1".to_owned()),
            epoch: 2,
            lease_expires_at_us: None,
            failure: None,
            settings: SessionSettings::default(),
            attempts: 0,
            not_before_us: None,
        };
        assert_eq!(Holder::of_session(&info), None, "completed: nobody holds it");
        info.state = SessionState::Running;
        info.lease_expires_at_us = Some(7);
        assert_eq!(
            Holder::of_session(&info),
            Some(Holder::Worker {
                name: "w1".to_owned(),
                epoch: 2,
                lease_expires_at_us: 7
            })
        );
    }

    #[test]
    fn host_names_are_cleaned_for_one_line_messages() {
        assert_eq!(clean_host("build-7"), "build-7");
        assert_eq!(clean_host("evil\u{1b}[2Jhost\n"), "evil?[2Jhost?");
        assert_eq!(clean_host(""), "unknown");
        let long = "é".repeat(200);
        let cut = clean_host(&long);
        assert!(cut.len() <= MAX_HOST_BYTES && cut.chars().all(|c| c == 'é'), "{cut}");
        let current = ProcessRecord::current(5);
        assert_eq!(current.pid, std::process::id());
        assert!(!current.host.is_empty());
    }
}

//! `headstart recover STORE [--session ID] [--json] [--force]`: give every unfinished call (admitted, no result)
//! the interrupted result (contract §7.4), and print what was done. STORE is a SQLite file or a PostgreSQL URL.
//!
//! Recovery is for calls whose process is gone. A session that a live process runs (`headstart run` or `resume`,
//! holding the session's lock beside a SQLite file), that another recovery holds (the packages' `recover`, or this
//! command in another process: an advisory lock of a PostgreSQL database, held by its connection), or that a worker
//! of a fleet holds (`running`, under a lease) is not recovered: when such a session has unfinished calls,
//! `recover` names its owner and stops with exit status 1 before writing anything, to any session. `--session ID`
//! considers that session only: it is recovered, or refused the same way, whoever holds the others; an id the
//! store does not have is an error. `--force` takes sessions over from processes that hold a SQLite file's lock
//! (when they are known to be gone or hung); a PostgreSQL lock ends with its holder's connection, which a process
//! that is gone no longer has, so there is nothing to force. A worker's lease is never overridden, since the store
//! fences every write made without it (contract §7.5.2): the next worker to claim the session recovers it.

use headstart::store::owner::{decide, Holder, OwnershipError};
use headstart::store::{SessionId, SessionQueue};
use headstart::{recover_session, Clock, RecoveredCall, SystemClock};
use headstart_postgres::{DatabaseLocks, SessionHold};

use crate::owner::{self, NotTaken};
use crate::store_url::{runtime, Access, StoreUrl};

/// Arguments of `headstart recover`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a SQLite file, or a PostgreSQL connection string (postgresql://… or host=… dbname=…).
    db: String,
    /// Recover this session only, whoever holds the others (default: every session), e.g. `--session
    /// 0192f3a4-…`.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Print JSON: an array with one object per recovered call, e.g. `--json`.
    #[arg(long)]
    json: bool,
    /// Recover sessions that a live process holds too, taking them over: for a process that is known to be gone
    /// or hung (a worker's lease is never overridden), e.g. `--force`.
    #[arg(long)]
    force: bool,
}

/// The sessions recovery may write, each with this process's hold on it, and the refusals.
#[derive(Default)]
struct Plan {
    sessions: Vec<(SessionId, SessionHold)>,
    refused: Vec<String>,
}

/// Takes every session (or only the session `only`) that has unfinished calls for this process, or notes who holds
/// it. Writes nothing, and touches no lock of a session with nothing to recover.
async fn plan(url: &StoreUrl, store: &dyn SessionQueue, only: Option<&str>, force: bool) -> Result<Plan, String> {
    let now_us = SystemClock.now_us();
    let mut plan = Plan::default();
    // One pool for every session's advisory lock, connected at the first one taken.
    let mut database_locks: Option<DatabaseLocks> = None;
    for info in url.sessions(store, only).await? {
        let session = info.id.clone();
        if !has_unfinished(store, &session).await? {
            continue;
        }
        // A worker's session: its lease decides, and no process lock is involved.
        if let Some(worker) = Holder::of_session(&info) {
            if let Err(refusal) = decide(&session, Some(&worker), force, now_us) {
                plan.refused.push(owner::refusal_text(&refusal));
            }
            continue;
        }
        let hold = match url {
            StoreUrl::Sqlite(path) => match owner::take(path, &session, force) {
                Ok(lock) => SessionHold::File(lock),
                Err(NotTaken::Refused(refusal)) => {
                    plan.refused.push(owner::refusal_text(&refusal));
                    continue;
                }
                Err(failed @ NotTaken::Failed(_)) => return Err(failed.text()),
            },
            // The database's advisory lock, as the packages' `recover` takes it: one recovery at a time.
            StoreUrl::Postgres(connection) => {
                let locks = database_locks.get_or_insert_with(|| DatabaseLocks::new(connection));
                match locks.take(&session, now_us).await.map(SessionHold::Database) {
                    Ok(hold) => hold,
                    // Not forcible: the lock goes with the holder's connection, which a process that is gone has
                    // lost already.
                    Err(OwnershipError::Refused(refusal)) => {
                        plan.refused
                            .push(format!("{refusal}; its lock ends with that process's connection"));
                        continue;
                    }
                    Err(failed) => return Err(failed.to_string()),
                }
            }
        };
        // Read again once taken: what the owner that just let go admitted is recovered too, and nothing is
        // admitted between this look and the writes.
        if has_unfinished(store, &session).await? {
            plan.sessions.push((session, hold));
        }
    }
    Ok(plan)
}

async fn has_unfinished(store: &dyn SessionQueue, session: &SessionId) -> Result<bool, String> {
    let calls = store
        .unfinished_calls(session)
        .await
        .map_err(|error| error.to_string())?;
    Ok(!calls.is_empty())
}

/// Runs recovery; exit status 1 when the store cannot be recovered or a live owner holds a session to recover.
pub fn run(args: &Args) -> u8 {
    let url = StoreUrl::parse(&args.db);
    let recovered = runtime().and_then(|runtime| {
        runtime.block_on(async {
            let store = url.open(Access::WriteExisting).await?;
            let plan = plan(&url, store.as_ref(), args.session.as_deref(), args.force).await?;
            if !plan.refused.is_empty() {
                let mut message = plan.refused.join("\nheadstart recover: ");
                message.push_str("\nheadstart recover: nothing was recovered");
                return Err(message);
            }
            let mut recovered: Vec<RecoveredCall> = Vec::new();
            // Each session's lock is held until its calls have their results.
            for (session, _hold) in plan.sessions {
                let calls = recover_session(store.as_ref(), &session, SystemClock.now_us())
                    .await
                    .map_err(|error| error.to_string())?;
                recovered.extend(calls);
            }
            Ok::<_, String>(recovered)
        })
    });
    let recovered = match recovered {
        Ok(recovered) => recovered,
        Err(error) => {
            eprintln!("headstart recover: {error}");
            return 1;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&recovered) {
            Ok(text) => println!("{text}"),
            Err(error) => {
                eprintln!("headstart recover: {error}");
                return 1;
            }
        }
        return 0;
    }
    if recovered.is_empty() {
        match &args.session {
            Some(id) => println!("nothing to recover: every admitted call of session {id} in {url} has a result"),
            None => println!("nothing to recover: every admitted call in {url} has a result"),
        }
    }
    for call in &recovered {
        println!(
            "session {}: {} ({}) owned by fragment #{}, {} → interrupted result #{}",
            call.session,
            call.call_id,
            call.tool_name,
            call.fragment_seq,
            if call.had_started {
                "had started"
            } else {
                "had not started"
            },
            call.result_seq
        );
    }
    if !recovered.is_empty() {
        println!("recovered {} call(s)", recovered.len());
    }
    0
}

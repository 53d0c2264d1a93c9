//! What the resume suites share (`tests/resume.rs` on a fleet's workers, `tests/restate_resume.rs` on Restate): the
//! scenario and its crash points, what each point must leave, a store's snapshot of the session, and the checks of
//! the properties one crash and one resumption can show (1, 2, 4 and 5; 3 and 6 compare resumptions).
// Each suite uses some of these.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use headstart::core::model::ToolResultMessage;
use headstart::store::{RunOutcome, SessionQueue, SessionState, StoredMessage, ToolRun};
use headstart::{Message, SessionId};
use headstart_postgres::testing::{self, TestDatabase};
use headstart_postgres::{open_queue_location, Access};
use headstart_testkit::invariants::{check_session, InvariantViolation};
use serde_json::Value;

use crate::support::strip_times;

pub const SCENARIO: &str = "tests/resume/two-turns.json";
pub const PROMPT: &str = "fetch it and write it twice";
/// How long anything here may take before the test fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// The only tool recovery may run again.
pub const IDEMPOTENT: &str = "fetch";

/// An instant to crash at, and what the store and the effects must show when it hit.
pub struct Case {
    /// `HEADSTART_CRASH_AT`'s value.
    pub crash_at: &'static str,
    /// The calls admitted without a result at the crash, with whether their body had begun (been touched).
    pub unfinished: &'static [(&'static str, bool)],
    /// The calls with a result at the crash.
    pub settled: &'static [&'static str],
}

pub const CASES: [Case; 6] = [
    Case {
        crash_at: "before-seal",
        unfinished: &[],
        settled: &[],
    },
    Case {
        crash_at: "after-seal",
        unfinished: &[("c_fetch", false)],
        settled: &[],
    },
    Case {
        crash_at: "in-body:1",
        unfinished: &[("c_fetch", true)],
        settled: &[],
    },
    Case {
        crash_at: "in-body:2",
        unfinished: &[("c_write", true)],
        settled: &["c_fetch"],
    },
    Case {
        crash_at: "after-body",
        unfinished: &[("c_fetch", true)],
        settled: &[],
    },
    Case {
        crash_at: "request",
        unfinished: &[],
        settled: &["c_fetch", "c_write"],
    },
];

/// Where a store is: a SQLite file, or a PostgreSQL test database (dropped with it).
pub struct StoreAt {
    pub location: String,
    _database: Option<TestDatabase>,
}

#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl StoreAt {
    /// The SQLite file at `path`.
    pub fn sqlite(path: &Path) -> StoreAt {
        StoreAt {
            location: path.display().to_string(),
            _database: None,
        }
    }

    /// A fresh store of `backend`, `None` when PostgreSQL cannot be had (the test then skips, loudly).
    pub async fn fresh(backend: Backend, dir: &Path, name: &str) -> Option<StoreAt> {
        Some(match backend {
            Backend::Sqlite => StoreAt {
                location: dir.join(format!("{name}.db")).display().to_string(),
                _database: None,
            },
            Backend::Postgres => {
                let database = testing::database().await?;
                StoreAt {
                    location: database.url().to_owned(),
                    _database: Some(database),
                }
            }
        })
    }

    /// A copy of the store as it is now, named `name` (a SQLite file beside the original).
    pub async fn copy(&self, dir: &Path, name: &str) -> StoreAt {
        match &self._database {
            Some(database) => {
                let copy = database.copy().await;
                StoreAt {
                    location: copy.url().to_owned(),
                    _database: Some(copy),
                }
            }
            None => {
                let target = dir.join(format!("{name}.db"));
                crate::support::copy_sqlite(Path::new(&self.location), &target);
                StoreAt {
                    location: target.display().to_string(),
                    _database: None,
                }
            }
        }
    }

    pub async fn open(&self) -> Arc<dyn SessionQueue> {
        open_queue_location(&self.location, Access::Read)
            .await
            .unwrap_or_else(|error| panic!("open {}: {error}", self.location))
    }

    /// What the store holds of `session`.
    pub async fn snapshot(&self, session: &SessionId) -> Snapshot {
        let store = self.open().await;
        let info = store
            .session(session)
            .await
            .expect("read the session")
            .expect("the session is stored");
        Snapshot {
            state: info.state,
            failure: info.failure,
            log: store.load_log(session).await.expect("load the log"),
            runs: store.tool_runs(session).await.expect("read the runs"),
            violations: check_session(store.as_ref(), session).await.expect("check the session"),
        }
    }
}

/// What a store holds of the session.
pub struct Snapshot {
    pub state: SessionState,
    pub failure: Option<String>,
    pub log: Vec<StoredMessage>,
    pub runs: Vec<ToolRun>,
    pub violations: Vec<InvariantViolation>,
}

impl Snapshot {
    pub fn run(&self, call: &str) -> Option<&ToolRun> {
        self.runs.iter().find(|run| run.call_id == call)
    }

    /// The calls admitted without a result.
    pub fn unfinished(&self) -> Vec<&str> {
        self.calls(false)
    }

    /// The calls with a result.
    pub fn settled(&self) -> Vec<&str> {
        self.calls(true)
    }

    /// The admitted calls with a result (`with_result`) or without one, sorted.
    fn calls(&self, with_result: bool) -> Vec<&str> {
        let mut calls: Vec<&str> = self
            .runs
            .iter()
            .filter(|run| run.result_seq.is_some() == with_result)
            .map(|run| run.call_id.as_str())
            .collect();
        calls.sort_unstable();
        calls
    }

    /// The stored result of `call`.
    pub fn result(&self, call: &str) -> Option<&ToolResultMessage> {
        self.log.iter().find_map(|stored| match &stored.message {
            Message::ToolResult(result) if result.tool_call_id == call => Some(result),
            _ => None,
        })
    }

    /// The stored result of `call`, as JSON.
    pub fn result_of(&self, call: &str) -> Option<Value> {
        self.result(call)
            .map(|result| serde_json::to_value(result).expect("a result serializes"))
    }

    /// The transcript's messages and the runs, with every timestamp and log position taken out, each list sorted:
    /// what two resumptions of one crash must agree on. Whether an early call's result or the stream's next
    /// fragment is written first is the wall clock's (on a loaded machine either comes first), not a decision: the
    /// model's context places each result after its call either way (contract §7.3).
    pub fn decisions(&self) -> Value {
        let sorted = |items: Vec<Value>| {
            let mut items: Vec<Value> = items
                .into_iter()
                .map(|mut item| {
                    strip_times(&mut item);
                    if let Value::Object(fields) = &mut item {
                        fields.retain(|key, _| !matches!(key.as_str(), "seq" | "result_seq" | "fragment_seq"));
                    }
                    item
                })
                .collect();
            items.sort_by_key(Value::to_string);
            Value::Array(items)
        };
        let log = self.log.iter().map(|stored| serde_json::json!(stored)).collect();
        let runs = self.runs.iter().map(|run| serde_json::json!(run)).collect();
        serde_json::json!({ "log": sorted(log), "runs": sorted(runs) })
    }
}

/// How many times each call's body began, in `touch`/`session` (one line per begin).
pub fn touches(touch: &Path, session: &SessionId) -> BTreeMap<String, usize> {
    let Ok(entries) = std::fs::read_dir(touch.join(&session.0)) else {
        return BTreeMap::new();
    };
    entries
        .map(|entry| {
            let entry = entry.expect("a touch file");
            let lines = std::fs::read_to_string(entry.path())
                .expect("read a touch file")
                .lines()
                .count();
            (entry.file_name().to_string_lossy().into_owned(), lines)
        })
        .collect()
}

/// Copies the touch directory `from` (one level of session folders) to `to`.
pub fn copy_touches(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a touch directory");
    let Ok(sessions) = std::fs::read_dir(from) else {
        return;
    };
    for session in sessions {
        let session = session.expect("a session folder");
        let target = to.join(session.file_name());
        std::fs::create_dir_all(&target).expect("create a session folder");
        for call in std::fs::read_dir(session.path()).expect("read a session folder") {
            let call = call.expect("a touch file");
            std::fs::copy(call.path(), target.join(call.file_name())).expect("copy a touch file");
        }
    }
}

/// Property 4 (checkpoint validity) on what a crash at `case`'s instant left, and that the instant is the one named:
/// what was unfinished, settled and begun.
pub fn check_crashed(label: &str, case: &Case, at_crash: &Snapshot, touched_at_crash: &BTreeMap<String, usize>) {
    let broken: Vec<String> = at_crash
        .violations
        .iter()
        .filter(|violation| !violation.left_by_a_crash())
        .map(ToString::to_string)
        .collect();
    assert!(broken.is_empty(), "{label}: property 4, the crashed store: {broken:?}");
    assert_eq!(
        at_crash.unfinished(),
        case.unfinished_calls(),
        "{label}: unfinished at the crash"
    );
    assert_eq!(at_crash.settled(), case.settled, "{label}: settled at the crash");
    for (call, begun) in case.unfinished {
        assert_eq!(
            touched_at_crash.contains_key(*call),
            *begun,
            "{label}: whether {call}'s body had begun: {touched_at_crash:?}"
        );
    }
    for call in touched_at_crash.keys() {
        let run = at_crash
            .run(call)
            .unwrap_or_else(|| panic!("{label}: property 4, {call} ran without a stored run"));
        let owner = at_crash.log.iter().find(|stored| stored.seq == run.fragment_seq);
        assert!(
            owner.is_some_and(|stored| matches!(&stored.message, Message::Assistant(fragment)
                if fragment.tool_calls().any(|stored_call| &stored_call.id == call))),
            "{label}: property 4, {call} ran without its owning fragment #{} stored",
            run.fragment_seq
        );
    }
}

/// Properties 1 (prefix continuation), 2 (effect exactly once) and, for a session resumed by several at once, 5
/// (consume once), on a resumption of the crash `at_crash` (with the effects `touched_at_crash`): the session
/// `resumed` and its effects `touched`.
pub fn check_resumed(
    label: &str,
    case: &Case,
    (at_crash, touched_at_crash): (&Snapshot, &BTreeMap<String, usize>),
    (snapshot, touched): (&Snapshot, &BTreeMap<String, usize>),
) {
    assert_eq!(
        snapshot.state,
        SessionState::Completed,
        "{label}: {:?}",
        snapshot.failure
    );
    let violations: Vec<String> = snapshot.violations.iter().map(ToString::to_string).collect();
    assert!(
        violations.is_empty(),
        "{label}: the engine's invariants: {violations:?}"
    );

    // 1. prefix continuation.
    assert!(
        snapshot.log.len() >= at_crash.log.len() && snapshot.log[..at_crash.log.len()] == at_crash.log[..],
        "{label}: property 1, the crashed log is not a prefix of the resumed one"
    );
    for call in case.settled {
        assert_eq!(
            snapshot.run(call),
            at_crash.run(call),
            "{label}: property 1, {call}'s run changed"
        );
    }

    // 2. and 5. effect exactly once, whoever and however many resumed.
    for run in &snapshot.runs {
        let call = run.call_id.as_str();
        let before = touched_at_crash.get(call).copied().unwrap_or(0);
        let after = touched.get(call).copied().unwrap_or(0);
        let allowed = match at_crash.run(call) {
            Some(then) if then.result_seq.is_some() => before,
            Some(_) if run.tool_name == IDEMPOTENT => before + 1,
            Some(_) => before,
            None => 1,
        };
        assert!(
            after <= allowed && after <= 2,
            "{label}: properties 2 and 5, {call}'s body began {after} times ({before} before the crash, at \
             most {allowed} allowed)"
        );
        if at_crash.run(call).is_none() {
            assert_eq!(
                after, 1,
                "{label}: property 2, {call}, admitted after the resume, ran once"
            );
        }
    }
    for call in touched.keys() {
        assert!(
            snapshot.run(call).is_some(),
            "{label}: property 2, {call} ran without a run"
        );
    }
}

/// One copy of a crash, resumed apart: by whom (`label`), what its store holds of the session, and its effects.
pub struct Fork {
    pub label: String,
    pub snapshot: Snapshot,
    pub touched: BTreeMap<String, usize>,
}

/// Properties 1, 2 and 5 on each copy of the crash `at_crash` ([`check_resumed`]), then 3 (fork determinism: every
/// copy ends with the first one's transcript and runs, timestamps aside) and 6 (recovery determinism: the calls the
/// crash cut off get the same results in every copy). Returns what recovery gave those calls.
pub fn check_forks(
    case: &Case,
    crashed: (&Snapshot, &BTreeMap<String, usize>),
    forks: &[Fork],
) -> Vec<(String, Option<RunOutcome>, Option<Value>)> {
    let reference = forks[0].snapshot.decisions();
    let reference_recovery = case.recovered_in(&forks[0].snapshot);
    for fork in forks {
        let (label, snapshot) = (&fork.label, &fork.snapshot);
        check_resumed(label, case, crashed, (snapshot, &fork.touched));
        assert_eq!(
            case.recovered_in(snapshot),
            reference_recovery,
            "{label}: property 6, recovery gave the calls the crash cut off other results"
        );
        let decisions = snapshot.decisions();
        assert!(
            decisions == reference,
            "{label}: property 3, another transcript than {}:\n{}\nvs\n{}",
            forks[0].label,
            serde_json::to_string_pretty(&decisions).unwrap_or_default(),
            serde_json::to_string_pretty(&reference).unwrap_or_default()
        );
    }
    reference_recovery
}

impl Case {
    /// The calls unfinished at the crash.
    pub fn unfinished_calls(&self) -> Vec<&'static str> {
        self.unfinished.iter().map(|(call, _)| *call).collect()
    }

    /// Property 6's evidence: what recovery gave each call the crash cut off (its outcome and result), timestamps
    /// aside.
    pub fn recovered_in(&self, snapshot: &Snapshot) -> Vec<(String, Option<RunOutcome>, Option<Value>)> {
        self.unfinished_calls()
            .into_iter()
            .map(|call| {
                let run = snapshot.run(call).expect("the run of a call unfinished at the crash");
                let mut result = snapshot.result_of(call);
                if let Some(result) = &mut result {
                    strip_times(result);
                }
                (call.to_owned(), run.outcome, result)
            })
            .collect()
    }
}

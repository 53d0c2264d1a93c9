//! What a Restate server knows of the sessions' turns, read from its admin API's SQL introspection (`POST /query`
//! on `sys_invocation`): which turns are queued, running, retrying or done, on which attempt, and why the last
//! attempt failed. The store stays the record of what a session said and ran (docs/decisions.md); this is the
//! engine's side, which `inspect --restate` and `serve --restate` show beside it. A turn that waits on a
//! `Tools/run_call` invocation whose attempts fail carries that call's failure too: Restate retries such a call
//! for as long as its retry policy says, the turn waits on it all that time, and the turn's own row says only
//! `running` (issue 45: a journal mismatch retried for minutes, seen nowhere).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One turn of a session as the server sees it: an invocation of `Session/{id}/turn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStatus {
    /// The session (the object's key).
    pub session: String,
    /// The invocation id (`inv_…`).
    pub invocation: String,
    /// Restate's status: `pending` (queued behind the session's running turn), `scheduled`, `ready`, `running`,
    /// `backing-off` (retrying after a failed attempt), `suspended`, `paused` or `completed`.
    pub status: String,
    /// Attempts that failed and were retried (0 for a turn on its first attempt).
    pub retries: u64,
    /// Why the last attempt failed, when one did.
    pub last_failure: Option<String>,
    /// When the turn was submitted, as the server writes it (RFC 3339, UTC).
    pub created_at: Option<String>,
    /// When its status last changed, likewise.
    pub modified_at: Option<String>,
    /// The calls this turn issued to `Tools` that are not done and whose attempts failed: what it waits on.
    #[serde(default)]
    pub failing_calls: Vec<FailingCall>,
}

/// A `Tools/run_call` invocation, issued by a turn, that has not ended and whose last attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingCall {
    /// The invocation id (`inv_…`).
    pub invocation: String,
    /// Restate's status (`backing-off`, `running`, `paused`, …).
    pub status: String,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Why the last attempt failed (for example `[570 Journal mismatch] …`).
    pub last_failure: Option<String>,
}

impl FailingCall {
    /// The Restate error code of the last failure (`570` for a journal mismatch), when it names one: the number in
    /// the `[570 Journal mismatch] …` that opens it.
    pub fn code(&self) -> Option<u16> {
        let failure = self.last_failure.as_deref()?.strip_prefix('[')?;
        let digits = failure.find(|c: char| !c.is_ascii_digit()).unwrap_or(failure.len());
        failure[..digits].parse().ok()
    }
}

/// The query that lists turns: every invocation of `Session`'s `turn` handler, oldest first. `session`, when
/// given, is quoted as an SQL string literal (a quote doubled), so no id can change the query.
pub(crate) fn turns_query(session: Option<&str>) -> String {
    let mut query = String::from(
        "SELECT id, target_service_key, status, retry_count, last_failure, created_at, modified_at \
         FROM sys_invocation WHERE target_service_name = 'Session' AND target_handler_name = 'turn'",
    );
    if let Some(session) = session {
        query.push_str(&format!(" AND target_service_key = '{}'", session.replace('\'', "''")));
    }
    query.push_str(" ORDER BY created_at");
    query
}

/// The query that lists the `Tools` calls not done whose attempts failed, with the turn that issued each.
pub(crate) const FAILING_CALLS_QUERY: &str = "SELECT id, invoked_by_id, status, retry_count, last_failure \
     FROM sys_invocation WHERE target_service_name = 'Tools' AND status <> 'completed' \
     AND (retry_count > 0 OR last_failure IS NOT NULL) ORDER BY created_at";

/// The rows of [`FAILING_CALLS_QUERY`].
#[derive(Deserialize)]
pub(crate) struct CallRows {
    rows: Vec<CallRow>,
}

#[derive(Deserialize)]
struct CallRow {
    id: Option<String>,
    invoked_by_id: Option<String>,
    status: Option<String>,
    retry_count: Option<u64>,
    last_failure: Option<String>,
}

impl CallRows {
    /// Each failing call, with the turn that issued it (`None` when the row does not say).
    pub(crate) fn into_calls(self) -> impl Iterator<Item = (Option<String>, FailingCall)> {
        self.rows.into_iter().filter_map(|row| {
            let call = FailingCall {
                invocation: row.id?,
                status: row.status.unwrap_or_else(|| "unknown".to_owned()),
                retries: row.retry_count.unwrap_or(0),
                last_failure: row.last_failure.filter(|failure| !failure.is_empty()),
            };
            Some((row.invoked_by_id, call))
        })
    }

    /// Gives each of `turns` the failing calls it issued.
    pub(crate) fn attach_to(self, turns: &mut [TurnStatus]) {
        for (caller, call) in self.into_calls() {
            let Some(turn) = turns.iter_mut().find(|turn| Some(&turn.invocation) == caller.as_ref()) else {
                continue;
            };
            turn.failing_calls.push(call);
        }
    }
}

/// The rows `POST /query` answers with `accept: application/json`.
#[derive(Deserialize)]
pub(crate) struct Rows {
    rows: Vec<Row>,
}

/// One row of [`turns_query`]; every column may be null in Restate's tables.
#[derive(Deserialize)]
struct Row {
    id: Option<String>,
    target_service_key: Option<String>,
    status: Option<String>,
    retry_count: Option<u64>,
    last_failure: Option<String>,
    created_at: Option<Value>,
    modified_at: Option<Value>,
}

/// A time column as text, whichever way the server renders it (an RFC 3339 string, or milliseconds).
fn time_text(value: Option<Value>) -> Option<String> {
    match value? {
        Value::String(text) => Some(text),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

impl Rows {
    /// The turns, leaving out rows without an id or a key (none in practice: they would name nothing).
    pub(crate) fn into_turns(self) -> Vec<TurnStatus> {
        self.rows
            .into_iter()
            .filter_map(|row| {
                Some(TurnStatus {
                    invocation: row.id?,
                    session: row.target_service_key?,
                    status: row.status.unwrap_or_else(|| "unknown".to_owned()),
                    retries: row.retry_count.unwrap_or(0),
                    last_failure: row.last_failure.filter(|failure| !failure.is_empty()),
                    created_at: time_text(row.created_at),
                    modified_at: time_text(row.modified_at),
                    failing_calls: Vec::new(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(last_failure: Option<&str>) -> FailingCall {
        FailingCall {
            invocation: "inv_1".into(),
            status: "backing-off".into(),
            retries: 3,
            last_failure: last_failure.map(str::to_owned),
        }
    }

    #[test]
    fn a_failures_code_is_the_number_that_opens_it() {
        let mismatch = failing(Some(
            "[570 Journal mismatch] while executing 'handler return' (index '2')",
        ));
        assert_eq!(mismatch.code(), Some(570));
        assert_eq!(failing(Some("[500] run_call fails on purpose")).code(), Some(500));
        assert_eq!(failing(Some("run_call fails on purpose")).code(), None);
        assert_eq!(failing(Some("[Journal mismatch]")).code(), None);
        assert_eq!(failing(None).code(), None);
    }

    #[test]
    fn a_session_id_cannot_change_the_query() {
        let query = turns_query(Some("x' OR '1'='1"));
        assert!(query.contains("target_service_key = 'x'' OR ''1''=''1'"), "{query}");
        assert!(!turns_query(None).contains("target_service_key ="));
    }

    #[test]
    fn rows_become_turns_and_nameless_rows_are_left_out() {
        let rows: Rows = serde_json::from_str(
            r#"{"rows":[
                {"id":"inv_1","target_service_key":"s1","status":"backing-off","retry_count":2,
                 "last_failure":"[500] deployment gone","created_at":"2026-12-03T08:00:00.000Z","modified_at":null},
                {"id":null,"target_service_key":"s2","status":"running","retry_count":0,"last_failure":null,
                 "created_at":null,"modified_at":null},
                {"id":"inv_3","target_service_key":"s3","status":"running","retry_count":null,"last_failure":"",
                 "created_at":null,"modified_at":null}
            ]}"#,
        )
        .expect("rows");
        let turns = rows.into_turns();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].status, "backing-off");
        assert_eq!(turns[0].retries, 2);
        assert_eq!(turns[0].last_failure.as_deref(), Some("[500] deployment gone"));
        assert_eq!(turns[1].session, "s3");
        assert_eq!(turns[1].retries, 0);
        assert_eq!(turns[1].last_failure, None);
    }

    #[test]
    fn a_failing_call_goes_to_the_turn_that_issued_it_and_others_are_left_out() {
        let rows: Rows = serde_json::from_str(
            r#"{"rows":[
                {"id":"inv_t1","target_service_key":"s1","status":"running","retry_count":0,"last_failure":null,
                 "created_at":null,"modified_at":null},
                {"id":"inv_t2","target_service_key":"s2","status":"running","retry_count":0,"last_failure":null,
                 "created_at":null,"modified_at":null}
            ]}"#,
        )
        .expect("rows");
        let mut turns = rows.into_turns();
        let calls: CallRows = serde_json::from_str(
            r#"{"rows":[
                {"id":"inv_c1","invoked_by_id":"inv_t2","status":"backing-off","retry_count":6,
                 "last_failure":"[570 Journal mismatch] while executing 'handler return'"},
                {"id":"inv_c2","invoked_by_id":"inv_elsewhere","status":"backing-off","retry_count":1,
                 "last_failure":"x"},
                {"id":null,"invoked_by_id":"inv_t1","status":"backing-off","retry_count":1,"last_failure":"x"}
            ]}"#,
        )
        .expect("call rows");
        calls.attach_to(&mut turns);
        assert!(turns[0].failing_calls.is_empty());
        assert_eq!(
            turns[1].failing_calls,
            [FailingCall {
                invocation: "inv_c1".to_owned(),
                status: "backing-off".to_owned(),
                retries: 6,
                last_failure: Some("[570 Journal mismatch] while executing 'handler return'".to_owned()),
            }]
        );
    }
}

//! A deployment's own metrics, recorded through the `metrics` facade (the engines it runs record the engine's,
//! [`headstart::metrics`]); `headstart restate serve --metrics ADDR` exports them. docs/restate.md lists them.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use ::metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit};

use crate::admin::FailingCall;

/// Counter: journal entries this deployment's handlers wrote, labelled `kind`: `begin`, `prompt`, `step` (one per
/// seal, issued call and turn end), `call` (a durable call to `Tools`) and `started` (a call's at-most-once
/// marker). Restate's own entries (an invocation's input and output) are not counted.
pub const JOURNAL_ENTRIES: &str = "headstart_restate_journal_entries_total";

/// Histogram, seconds: from the seal of an early call (its fragment's journal entry asked for) to its body
/// starting in `Tools`, on whichever deployment runs it (both stamps on the wall clock).
pub const SEAL_TO_BODY: &str = "headstart_restate_seal_to_body_seconds";

/// Counter: writes of an attempt that Restate had replaced, refused: `where="journal"` (its seal's journal entry
/// could not be written, so the commit never reached the store) or `where="store"` (the store fenced it: a later
/// attempt had taken the session over).
pub const STALE_WRITES_REFUSED: &str = "headstart_restate_stale_writes_refused_total";

/// Counter: turns that waited for a free slot of the deployment's turn limit before they began.
pub const TURNS_QUEUED: &str = "headstart_restate_turns_queued_total";

/// Gauge: calls to `Tools` whose attempts fail and that Restate keeps retrying, as the server's admin API last said,
/// labelled `code`: the Restate error code of the last failure (`570`: a journal mismatch, a replay that does not
/// reproduce its journal), or `none`. Exported by a deployment that registers itself (`--register ADMIN_URL`).
pub const CALLS_FAILING: &str = "headstart_restate_calls_failing";

/// How often a deployment asks the admin API which calls fail.
pub const FAILING_CALLS_EVERY: Duration = Duration::from_secs(5);

/// Registers the descriptions and units of a deployment's metrics, the engine's too, with the installed recorder.
pub fn describe() {
    headstart::metrics::describe();
    describe_counter!(
        JOURNAL_ENTRIES,
        "Journal entries this deployment's handlers wrote, by kind (Restate's input and output entries not counted)."
    );
    describe_histogram!(
        SEAL_TO_BODY,
        Unit::Seconds,
        "From an early call's seal to its body starting in the Tools service."
    );
    describe_counter!(
        STALE_WRITES_REFUSED,
        "Writes of a replaced attempt refused, by where: the journal or the store's fence."
    );
    describe_gauge!(
        CALLS_FAILING,
        "Calls to Tools whose attempts fail and that Restate retries, by the last failure's Restate error code."
    );
    describe_counter!(
        TURNS_QUEUED,
        "Turns that waited for a free slot of the deployment's turn limit."
    );
}

/// A journal entry of `kind` was written.
pub(crate) fn journaled(kind: &'static str) {
    counter!(JOURNAL_ENTRIES, "kind" => kind).increment(1);
}

/// A body started `us` microseconds after its call's seal.
pub(crate) fn body_started(us: i64) {
    histogram!(SEAL_TO_BODY).record(us.max(0) as f64 / 1_000_000.0);
}

/// A stale attempt's write was refused at `place` (`journal` or `store`).
pub(crate) fn stale_write_refused(place: &'static str) {
    counter!(STALE_WRITES_REFUSED, "where" => place).increment(1);
}

/// A turn waited for a slot.
pub(crate) fn turn_queued() {
    counter!(TURNS_QUEUED).increment(1);
}

/// Sets [`CALLS_FAILING`] from `calls`: a count per code, and 0 for a code counted before and gone now.
pub fn record_failing_calls(calls: &[FailingCall]) {
    static CODES: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for call in calls {
        let code = call.code().map_or_else(|| "none".to_owned(), |code| code.to_string());
        *counts.entry(code).or_default() += 1;
    }
    let mut codes = CODES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for gone in codes.iter().filter(|code| !counts.contains_key(*code)) {
        gauge!(CALLS_FAILING, "code" => gone.clone()).set(0.0);
    }
    for (code, count) in &counts {
        gauge!(CALLS_FAILING, "code" => code.clone()).set(*count as f64);
    }
    *codes = counts.into_keys().collect();
}

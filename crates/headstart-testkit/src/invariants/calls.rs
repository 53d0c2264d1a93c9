//! Calls across a log: which fragment holds each call, which call each result answers, and each call's results.

use std::collections::BTreeMap;

use super::views::{Logged, LoggedKind};

/// A call: the request of the response holding it (`None` when the source does not say) and its id.
pub(super) type CallKey<'a> = (Option<u32>, &'a str);

/// The calls stored in `log`, each with the sequence number and time of the first fragment holding it.
pub(super) fn holders<'a>(log: &[Logged<'a>]) -> BTreeMap<CallKey<'a>, (u64, f64)> {
    let mut holders = BTreeMap::new();
    for logged in log {
        if let LoggedKind::Fragment { request, calls, .. } = &logged.kind {
            for call in calls {
                holders.entry((*request, *call)).or_insert((logged.seq, logged.at_ms));
            }
        }
    }
    holders
}

/// The call each message of `log` answers (`None` for messages that are not results): the result's request and
/// id, or, when the result does not carry its request, the most recent fragment before it that holds its id.
pub(super) fn answered<'a>(log: &[Logged<'a>]) -> Vec<Option<CallKey<'a>>> {
    let mut latest: BTreeMap<&str, Option<u32>> = BTreeMap::new();
    log.iter()
        .map(|logged| match &logged.kind {
            LoggedKind::Fragment { request, calls, .. } => {
                for call in calls {
                    latest.insert(call, *request);
                }
                None
            }
            LoggedKind::Result {
                request: Some(request),
                call_id,
            } => Some((Some(*request), *call_id)),
            LoggedKind::Result { request: None, call_id } => Some((latest.get(call_id).copied().flatten(), *call_id)),
            LoggedKind::User => None,
        })
        .collect()
}

/// The sequence numbers of each call's results in `log`.
pub(super) fn results<'a>(log: &[Logged<'a>]) -> BTreeMap<CallKey<'a>, Vec<u64>> {
    let mut results: BTreeMap<CallKey<'a>, Vec<u64>> = BTreeMap::new();
    for (logged, call) in log.iter().zip(answered(log)) {
        if let Some(call) = call {
            results.entry(call).or_default().push(logged.seq);
        }
    }
    results
}

//! Which stored result answers which call. A call is its request and its id (ids repeat across responses,
//! contract §7.2.2); a result stored before results carried their request answers the latest call with its id.
//! Pure: both views of a stored session (`headstart inspect` and `headstart serve`) read their logs through it.

use std::collections::{HashMap, HashSet};

use headstart::core::model::ToolResultMessage;
use headstart::store::StoredMessage;
use headstart::Message;

/// A call in a stored log: its request (`None` for records from before requests were stored) and its id.
pub type CallKey<'a> = (Option<u32>, &'a str);

/// The calls of a stored log and the results that answer them.
#[derive(Debug, Default)]
pub struct Answers<'a> {
    /// The calls the log's assistant messages hold.
    pub calls: HashSet<CallKey<'a>>,
    /// Each call's first result, with its stored record.
    pub results: HashMap<CallKey<'a>, (&'a StoredMessage, &'a ToolResultMessage)>,
    /// The call each stored result (by seq) answers.
    pub answered: HashMap<u64, CallKey<'a>>,
    /// Each request's first fragment (its seq), in log order: the model saw everything stored before it.
    pub request_starts: Vec<(u64, u32)>,
}

impl<'a> Answers<'a> {
    /// Reads `log` (in write order).
    pub fn of(log: &'a [StoredMessage]) -> Answers<'a> {
        let mut answers = Answers::default();
        let mut latest_request: HashMap<&str, Option<u32>> = HashMap::new();
        for stored in log {
            match &stored.message {
                Message::Assistant(assistant) => {
                    if let Some(request) = stored.request {
                        if answers.request_starts.last().is_none_or(|&(_, last)| last != request) {
                            answers.request_starts.push((stored.seq, request));
                        }
                    }
                    for call in assistant.tool_calls() {
                        answers.calls.insert((stored.request, call.id.as_str()));
                        latest_request.insert(call.id.as_str(), stored.request);
                    }
                }
                Message::ToolResult(result) => {
                    let id = result.tool_call_id.as_str();
                    let request = stored.request.or_else(|| latest_request.get(id).copied().flatten());
                    answers.results.entry((request, id)).or_insert((stored, result));
                    answers.answered.insert(stored.seq, (request, id));
                }
                Message::User(_) => {}
            }
        }
        answers
    }

    /// The request that carried the result stored at `seq` to the model (contract §3.7.5): the first whose response
    /// began after it was written, past the request that was streaming then (`ready_during`, which never saw it);
    /// `None` while no request followed.
    pub fn delivered_in(&self, seq: u64, ready_during: Option<u32>) -> Option<u32> {
        let after = self.request_starts.partition_point(|&(start, _)| start < seq);
        (self.request_starts[after..].iter())
            .map(|&(_, request)| request)
            .find(|&request| ready_during.is_none_or(|streaming| request > streaming))
    }

    /// Whether the result stored at `seq` answers a call the log holds (one that does not is an orphan).
    pub fn answers_a_call_in_the_log(&self, seq: u64) -> bool {
        self.answered.get(&seq).is_some_and(|call| self.calls.contains(call))
    }
}

//! One page of the session listing, newest first: what a viewer of a large store shows without reading every
//! session ([`TranscriptStore::sessions_page`](crate::TranscriptStore::sessions_page)).

use crate::types::{SessionInfo, SessionState};

/// Which sessions a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionsQuery {
    /// Only sessions in this state (`None`: every session).
    pub state: Option<SessionState>,
    /// How many of the matching sessions, newest first, to skip.
    pub offset: u64,
    /// At most this many sessions.
    pub limit: u64,
}

/// A page of the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsPage {
    /// The sessions, newest first (creation time, ties: the later created first).
    pub sessions: Vec<SessionInfo>,
    /// How many sessions match the query's state in all.
    pub total: u64,
}

impl SessionsQuery {
    /// The page of `all` (oldest first, as [`TranscriptStore::sessions`](crate::TranscriptStore::sessions) lists
    /// them) this query selects: the answer of a backend that cannot page in its database.
    pub fn select(&self, all: Vec<SessionInfo>) -> SessionsPage {
        let matching: Vec<SessionInfo> = all
            .into_iter()
            .rev()
            .filter(|info| self.state.is_none_or(|state| info.state == state))
            .collect();
        let total = matching.len() as u64;
        let sessions = matching
            .into_iter()
            .skip(usize::try_from(self.offset).unwrap_or(usize::MAX))
            .take(usize::try_from(self.limit).unwrap_or(usize::MAX))
            .collect();
        SessionsPage { sessions, total }
    }

    /// The offset and limit as SQL integers (clamped: no store holds 2^63 sessions).
    pub fn sql_bounds(&self) -> (i64, i64) {
        let clamp = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        (clamp(self.offset), clamp(self.limit))
    }
}

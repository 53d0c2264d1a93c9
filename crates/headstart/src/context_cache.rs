//! The model context of a session, kept in memory between requests: before each request the engine reads only the
//! messages written since its last read (`TranscriptStore::load_log_after`), so a step costs what changed, not the
//! history (contract §7.3: the context of a request is still exactly what the store holds).

use std::collections::HashMap;
use std::sync::Mutex;

use headstart_core::context::{ContextBuilder, ModelContext};
use headstart_core::Message;
use headstart_store::{SessionId, StoreError, StoredMessage, TranscriptStore};

/// One session's canonical context and what the engine knows of its log: the last sequence number read and the
/// number its next request gets.
#[derive(Debug)]
pub(crate) struct SessionContext {
    session: SessionId,
    builder: ContextBuilder,
    /// The sequence number of the last message read (0: none).
    seq: u64,
    /// One past the highest request of any message read (contract §7.5.3: a session's requests keep one numbering
    /// across runs and owners).
    next_request: u32,
}

impl SessionContext {
    /// `cached` brought up to date, or `session` read whole when there is none.
    pub(crate) async fn refreshed(
        cached: Option<SessionContext>,
        store: &dyn TranscriptStore,
        session: &SessionId,
    ) -> Result<SessionContext, StoreError> {
        match cached {
            Some(mut context) => {
                context.refresh(store).await?;
                Ok(context)
            }
            None => Self::load(store, session).await,
        }
    }

    /// Reads the whole log of `session`.
    async fn load(store: &dyn TranscriptStore, session: &SessionId) -> Result<SessionContext, StoreError> {
        let log = store.load_log(session).await?;
        let mut context = SessionContext {
            session: session.clone(),
            builder: ContextBuilder::from_log(log.iter().map(|stored| (stored.request, &stored.message))),
            seq: 0,
            next_request: 0,
        };
        context.note(&log);
        Ok(context)
    }

    /// Reads the messages written since the last read and adds them. Whatever the cache cannot extend in place (a
    /// gap in the sequence numbers, a result for an older response written by recovery or by another process) is
    /// read again whole, so the cache is never trusted past what the store says.
    pub(crate) async fn refresh(&mut self, store: &dyn TranscriptStore) -> Result<(), StoreError> {
        let new = store.load_log_after(&self.session, self.seq).await?;
        if !self.extend(&new) {
            tracing::debug!(session = %self.session, "the session changed in a way the cached context cannot follow; reading it whole");
            *self = Self::load(store, &self.session).await?;
        }
        Ok(())
    }

    /// Adds `new` (the messages after `self.seq`, in order); false when they cannot be added in place.
    fn extend(&mut self, new: &[StoredMessage]) -> bool {
        for stored in new {
            if stored.seq != self.seq + 1 || self.builder.push(stored.request, &stored.message).is_err() {
                return false;
            }
            self.note(std::slice::from_ref(stored));
        }
        true
    }

    fn note(&mut self, read: &[StoredMessage]) {
        for stored in read {
            self.seq = self.seq.max(stored.seq);
            if let Some(request) = stored.request {
                self.next_request = self.next_request.max(request.saturating_add(1));
            }
            // A result ready while a request streamed names it (contract §3.7.5): that number is never given again,
            // even when its response committed nothing, so the result is never placed after a response that saw it.
            if let Message::ToolResult(result) = &stored.message {
                if let Some(streaming) = result.ready_during {
                    self.next_request = self.next_request.max(streaming.saturating_add(1));
                }
            }
        }
    }

    /// The canonical context for the next request.
    pub(crate) fn context(&self) -> &ModelContext {
        self.builder.context()
    }

    /// The number the session's next request gets: one past the highest stored request, 0 for none.
    pub(crate) fn next_request(&self) -> u32 {
        self.next_request
    }

    pub(crate) fn session(&self) -> &SessionId {
        &self.session
    }
}

/// The contexts of the sessions an engine ran last, at most `capacity` of them; the least recently used goes
/// first. A context is taken out while a run uses it and put back when the run ends, so two users of one session
/// never share a builder (the second reads the session whole).
#[derive(Debug)]
pub(crate) struct ContextCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_session: HashMap<SessionId, (u64, SessionContext)>,
    /// A counter of puts, the recency of each entry.
    clock: u64,
}

impl ContextCache {
    pub(crate) fn new(capacity: usize) -> Self {
        ContextCache {
            capacity,
            entries: Mutex::default(),
        }
    }

    /// Takes the cached context of `session` out, if there is one.
    pub(crate) fn take(&self, session: &SessionId) -> Option<SessionContext> {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.by_session.remove(session).map(|(_, context)| context)
    }

    /// Puts a context back (or in), evicting the least recently used beyond the capacity.
    pub(crate) fn put(&self, context: SessionContext) {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.clock += 1;
        let used = entries.clock;
        entries.by_session.insert(context.session().clone(), (used, context));
        while entries.by_session.len() > self.capacity {
            let oldest = entries
                .by_session
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(session, _)| session.clone());
            match oldest {
                Some(session) => entries.by_session.remove(&session),
                None => break,
            };
        }
    }
}

#[cfg(test)]
mod tests;

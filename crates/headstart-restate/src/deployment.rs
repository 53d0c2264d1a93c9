//! A deployment's parts: the transcript store every session is written to, and the application's setup (tools,
//! hooks, model) for each session. Both services of one `restate serve` process share them.

use std::sync::Arc;

use headstart::core::model::UserMessage;
use headstart::store::StoreError;
use headstart::{Clock, RecoveryPolicy, SessionId, SystemClock, TranscriptStore};
use headstart_fleet::SessionSetup;

/// What a deployment runs sessions with.
pub struct Deployment {
    /// The record of every session (contract §7): `inspect`, `serve` and `timeline` read it as any other store.
    pub(crate) store: Arc<dyn TranscriptStore>,
    /// The application: each session's engine and model.
    pub(crate) setup: Arc<dyn SessionSetup>,
    /// What recovery does with calls a crashed attempt left without a result.
    pub(crate) policy: RecoveryPolicy,
    /// The clock of the writes the deployment makes itself.
    pub(crate) clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Deployment {
    /// Sessions of `setup`, written to `store`; interrupted calls are failed ([`RecoveryPolicy::FailAll`]).
    pub fn new(store: Arc<dyn TranscriptStore>, setup: Arc<dyn SessionSetup>) -> Self {
        Deployment {
            store,
            setup,
            policy: RecoveryPolicy::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// What recovery does with the calls a crashed attempt left without a result.
    pub fn with_recovery(mut self, policy: RecoveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Creates `session` if the store does not have it yet; returns how many messages it holds.
    pub(crate) async fn open(&self, session: &SessionId) -> Result<u64, StoreError> {
        match self.store.session(session).await? {
            Some(info) => Ok(info.messages),
            None => {
                self.store.create_session_with_id(session, self.clock.now_us()).await?;
                Ok(0)
            }
        }
    }

    /// Appends `prompt` unless the session already holds more than `before` messages: an earlier attempt of the same
    /// journal entry appended it (the entry's closure runs at least once; one writer per session makes the count
    /// exact).
    pub(crate) async fn append_prompt_once(
        &self,
        session: &SessionId,
        before: u64,
        prompt: &UserMessage,
    ) -> Result<(), StoreError> {
        let now = self.open(session).await?;
        if now == before {
            self.store.append_user(session, prompt, self.clock.now_us()).await?;
        }
        Ok(())
    }
}

//! A queue as the stores wrote it before sessions had settings of their own (SQLite schema 3, PostgreSQL schema 2),
//! for each backend's migration test: the backend writes one pending session with [`OLD_PROMPT`] with its old DDL,
//! opens the store (which upgrades it), and [`check_upgraded`] checks that the session kept everything, reads with
//! no settings, and that the queue goes on and stores the settings of new submissions.

use std::time::Duration;

use headstart_core::model::{Message, UserMessage};

use crate::types::{SessionId, SessionSettings, SessionState};
use crate::{SessionQueue, TranscriptStore};

/// The prompt of the session written before the upgrade.
pub const OLD_PROMPT: &str = "from before";

/// After the upgrade: `old` (the only session, pending with [`OLD_PROMPT`]) has default settings; a session
/// submitted now with settings is claimed after it, each with its own settings.
///
/// # Panics
///
/// On any difference (it is a test).
pub async fn check_upgraded<S>(store: &S, old: &SessionId)
where
    S: TranscriptStore + SessionQueue + ?Sized,
{
    let sessions = store.sessions().await.expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        (&sessions[0].id, sessions[0].state, sessions[0].messages),
        (old, SessionState::Pending, 1)
    );
    assert_eq!(sessions[0].settings, SessionSettings::default());
    let log = store.load_log(old).await.expect("log");
    assert_eq!(log[0].message, Message::User(UserMessage::new(OLD_PROMPT)));

    let own = SessionSettings {
        system: Some("Be brief.".to_owned()),
        model: Some("m2".to_owned()),
        queue: None,
    };
    let new = store
        .submit_with(&UserMessage::new("now"), &own, 8)
        .await
        .expect("submit with settings");
    let claims = store.claim("w1", Duration::from_secs(60), 10).await.expect("claim");
    let claimed: Vec<_> = claims
        .iter()
        .map(|claim| (&claim.lease.session, &claim.settings))
        .collect();
    assert_eq!(claimed, [(old, &SessionSettings::default()), (&new, &own)]);
}

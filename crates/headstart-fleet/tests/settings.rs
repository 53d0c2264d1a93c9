//! A session's own settings (`SessionQueue::submit_with`) reach the application's `SessionSetup::model` for that
//! session, and a session submitted without them gets none.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use headstart::store::{SessionQueue, SessionSettings, SqliteStore};
use headstart::{Engine, EngineBuilder, Model, SessionId, TranscriptStore, UserMessage};
use headstart_fleet::{SessionSetup, Worker, WorkerConfig, WorkerEvent};
use support::{Observed, Quiet};

/// Answers with [`Quiet`], noting the settings each session's model was asked with.
#[derive(Default)]
struct Noting(Mutex<BTreeMap<SessionId, SessionSettings>>);

impl SessionSetup for Noting {
    fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        Engine::builder(store)
    }
    fn model(&self, session: &SessionId, settings: &SessionSettings) -> Arc<dyn Model> {
        self.0
            .lock()
            .expect("not poisoned")
            .insert(session.clone(), settings.clone());
        Arc::new(Quiet)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_s_model_is_asked_for_with_its_own_settings() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let own = SessionSettings {
        system: Some("Answer in French.".to_owned()),
        model: Some("m2".to_owned()),
        queue: None,
    };
    let with = store
        .submit_with(&UserMessage::new("a"), &own, 0)
        .await
        .expect("submit with settings");
    let without = store.submit(&UserMessage::new("b"), 1).await.expect("submit");
    let setup = Arc::new(Noting::default());
    let worker = Worker::new(store.clone(), setup.clone(), WorkerConfig::new("w1")).expect("config");
    let mut worker = Observed::start(worker);
    let mut finished = 0;
    while finished < 2 {
        if let WorkerEvent::Finished { .. } = worker.next_stamped().await.1 {
            finished += 1;
        }
    }
    let stats = worker.stop().await;
    assert_eq!(stats.completed, 2);
    let noted = setup.0.lock().expect("not poisoned").clone();
    assert_eq!(
        noted,
        BTreeMap::from([(with, own), (without, SessionSettings::default())])
    );
}

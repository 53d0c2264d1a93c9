//! What the pages and the JSON API show of a session, loaded from a store in one place: its listing entry, its
//! durable log, its tool runs and its unfinished calls. `headstart inspect --json` prints the same shape
//! ([`SessionData::to_json`]).

use headstart::store::{
    SessionId, SessionInfo, SessionState, StoreError, StoredMessage, ToolRun, TranscriptStore, UnfinishedCall,
};
use headstart::{expects_answer, Message};
use headstart_timeline::answers::Answers;
use headstart_timeline::report::TranscriptEntry;
use headstart_timeline::{response_models, Timeline};
use serde_json::{json, Value};

/// One session as stored.
#[derive(Debug, Clone)]
pub struct SessionData {
    /// Its listing entry: queue state, owner, epoch, settings.
    pub info: SessionInfo,
    /// Its durable log, in write order.
    pub log: Vec<StoredMessage>,
    /// Its tool runs, in admission order.
    pub runs: Vec<ToolRun>,
    /// Its calls admitted without a result.
    pub unfinished: Vec<UnfinishedCall>,
}

impl SessionData {
    /// Loads session `id`; `None` when the store has no such session.
    pub async fn find(store: &dyn TranscriptStore, id: &SessionId) -> Result<Option<SessionData>, StoreError> {
        match store.session(id).await? {
            Some(info) => Self::load(store, info).await.map(Some),
            None => Ok(None),
        }
    }

    /// Loads the records of the session `info` lists.
    pub async fn load(store: &dyn TranscriptStore, info: SessionInfo) -> Result<SessionData, StoreError> {
        let log = store.load_log(&info.id).await?;
        let runs = store.tool_runs(&info.id).await?;
        let unfinished = store.unfinished_calls(&info.id).await?;
        Ok(SessionData {
            info,
            log,
            runs,
            unfinished,
        })
    }

    /// The session as `headstart inspect --json` prints it: `session`, its queue state (`state`, `owner`,
    /// `epoch`, `failure`), `settings`, the transcript in the replay report's shape, and its `figures`.
    pub fn to_json(&self) -> Value {
        inspect_json(&self.info, &self.log, &self.runs)
    }

    /// The session on one time axis, as `headstart timeline` draws it.
    pub fn timeline(&self) -> Timeline {
        Timeline::from_store(format!("session {}", self.info.id), &self.log, &self.runs)
    }

    /// The first line of the session's first prompt (empty when it has none yet).
    pub fn prompt_line(&self) -> &str {
        self.log
            .iter()
            .find_map(|stored| match &stored.message {
                Message::User(user) => Some(user.text.lines().next().unwrap_or_default()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// When anything was last written: the latest message or run time (µs, the writer's clock); the creation time
    /// when nothing was.
    pub fn last_activity_us(&self) -> i64 {
        let messages = self.log.iter().map(|stored| stored.at_us);
        let runs = self
            .runs
            .iter()
            .flat_map(|run| [Some(run.admitted_at_us), run.started_at_us, run.ended_at_us])
            .flatten();
        messages.chain(runs).fold(self.info.created_at_us, i64::max)
    }

    /// Its state in words: [`queue_state`], and for a session outside any queue (a `run` or a `demo`) where its
    /// conversation stands, read from the log: `answered`, `waits for the model` or `N calls unfinished`.
    pub fn state_words(&self) -> String {
        let state = queue_state(&self.info);
        if self.info.state != SessionState::Unqueued || self.log.is_empty() {
            return state;
        }
        let stands = if !self.unfinished.is_empty() {
            format!("{} calls unfinished", self.unfinished.len())
        } else {
            let context: Vec<Message> = self.log.iter().map(|stored| stored.message.clone()).collect();
            if expects_answer(&context) {
                "waits for the model"
            } else {
                "answered"
            }
            .to_owned()
        };
        format!("{state} · {stands}")
    }

    /// A fingerprint of what the session holds, to tell whether a reload changed anything: the message count,
    /// the runs' states and ends, and the queue state.
    pub fn fingerprint(&self) -> String {
        let mut print = format!(
            "{} {} {:?} {} {}",
            self.log.len(),
            self.info.state.as_str(),
            self.info.owner,
            self.info.epoch,
            self.info.attempts
        );
        for run in &self.runs {
            print.push_str(&format!(" {}:{:?}", run.state.as_str(), run.ended_at_us));
        }
        print
    }
}

/// The `inspect --json` object of a session from its listing entry, its log and its tool runs.
pub fn inspect_json(info: &SessionInfo, log: &[StoredMessage], runs: &[ToolRun]) -> Value {
    let transcript: Vec<TranscriptEntry> = log
        .iter()
        .map(|stored| TranscriptEntry::from_stored(stored, false))
        .collect();
    let timeline = Timeline::from_store(format!("session {}", info.id), log, runs);
    json!({
        "session": info.id.0,
        "state": info.state.as_str(),
        "owner": info.owner,
        "epoch": info.epoch,
        "failure": info.failure,
        "settings": info.settings,
        "queue": info.settings.queue_name(),
        "attempts": info.attempts,
        "not_before_us": info.not_before_us,
        "transcript": transcript,
        "figures": timeline.figures().to_json(&response_models(log)),
        "provider_async": provider_async_json(log),
    })
}

/// Each provider-async call (contract §3.7.5): its request and id, its result's seq (`null` while pending) and the
/// request that carried the result to the model (`null` while none followed).
fn provider_async_json(log: &[StoredMessage]) -> Value {
    let answers = Answers::of(log);
    let calls: Vec<Value> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::Assistant(fragment) => Some((stored.request, fragment)),
            _ => None,
        })
        .flat_map(|(request, fragment)| fragment.tool_calls().map(move |call| (request, call)))
        .filter(|(_, call)| call.provider_async)
        .map(|(request, call)| {
            let result = answers.results.get(&(request, call.id.as_str()));
            json!({
                "request": request,
                "call_id": call.id,
                "result_seq": result.map(|(stored, _)| stored.seq),
                "delivered_in": result.and_then(|(stored, result)| answers.delivered_in(stored.seq, result.ready_during)),
            })
        })
        .collect();
    Value::Array(calls)
}

/// A session's place in a fleet's queue, in words: `pending`, `running by w1 (epoch 2)`, `completed by w1`,
/// `failed by w1: reason`; `unqueued` for a single-process session.
pub fn queue_state(info: &SessionInfo) -> String {
    let state = info.state.as_str();
    let mut text = match &info.owner {
        Some(owner) if state == "running" => format!("{state} by {owner} (epoch {})", info.epoch),
        Some(owner) => format!("{state} by {owner}"),
        None => state.to_owned(),
    };
    if info.settings.queue.is_some() {
        text.push_str(&format!(" in queue {}", info.settings.queue_name()));
    }
    if info.attempts > 0 {
        text.push_str(&format!(", released {} time(s) for a provider outage", info.attempts));
    }
    if let Some(not_before_us) = info.not_before_us {
        text.push_str(&format!(", not claimed before {}", utc_time(not_before_us)));
    }
    match (&info.failure, info.state) {
        (Some(failure), SessionState::Failed) => text.push_str(&format!(": {failure}")),
        (Some(failure), _) => text.push_str(&format!(" (last error: {failure})")),
        (None, _) => {}
    }
    text
}

/// `at_us` (µs since the Unix epoch) as a UTC time of day, `HH:MM:SS.mmm UTC`.
fn utc_time(at_us: i64) -> String {
    let ms = at_us.div_euclid(1000);
    let day_ms = ms.rem_euclid(86_400_000);
    format!(
        "{:02}:{:02}:{:02}.{:03} UTC",
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000
    )
}

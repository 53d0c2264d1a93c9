//! [`Bridge`]: the engine asking JavaScript, and JavaScript answering.
//!
//! The engine runs on tokio threads; a JavaScript function runs only on the Node thread. Every request (run this
//! call, call this hook, abort that call) goes as one JSON letter through one thread-safe function per engine,
//! tagged with a fresh id; the package's JavaScript starts the work and answers later through
//! [`NativeEngine::settle`](crate::engine::NativeEngine::settle) with the same id. Nothing crosses but text, so a
//! letter never holds a JavaScript value off its thread, and the JavaScript side never throws into Rust: whatever
//! goes wrong there comes back as an answer with an error.
//!
//! The thread-safe function is weak: an engine alone does not keep Node's event loop alive. What is awaited (a
//! tool's own timers and sockets, the promise of the next events) does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use headstart::{CancellationToken, UpdateSink};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// The JavaScript function letters go to (`(letter: string) => void`), weak, its errors its own.
pub type Dispatch = ThreadsafeFunction<String, (), String, Status, false, true>;

/// What JavaScript answered: the answer's JSON, or its error message.
pub type Answer = Result<Value, String>;

struct Waiting {
    answer: oneshot::Sender<Answer>,
    updates: Option<UpdateSink>,
}

/// One engine's line to JavaScript.
pub struct Bridge {
    dispatch: Dispatch,
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, Waiting>>,
}

impl Bridge {
    /// A bridge sending its letters to `dispatch`.
    pub fn new(dispatch: Dispatch) -> Self {
        Bridge {
            dispatch,
            next: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `letter` (an object; its `id` is set here) and waits for its answer. A running call's partial results
    /// go to `updates`. When `cancel` fires, JavaScript is told to abort the work and its answer is still awaited
    /// (a cancelled call's result is what its tool made of the abort). Dropping the returned future (a timeout)
    /// tells JavaScript to abort too, and its late answer is ignored.
    pub async fn ask(
        &self,
        mut letter: Value,
        updates: Option<UpdateSink>,
        cancel: Option<&CancellationToken>,
    ) -> Answer {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (answer, receiver) = oneshot::channel();
        self.lock().insert(id, Waiting { answer, updates });
        if let Value::Object(fields) = &mut letter {
            fields.insert("id".into(), json!(id));
        }
        let mut pending = Pending {
            bridge: self,
            id,
            armed: true,
        };
        if self.send(&letter) != Status::Ok {
            pending.armed = false;
            self.lock().remove(&id);
            return Err("the JavaScript side of the engine is gone (its process is exiting)".into());
        }
        let mut receiver = receiver;
        let answer = match cancel {
            Some(cancel) => tokio::select! {
                answer = &mut receiver => answer,
                () = cancel.cancelled() => {
                    self.abort(id);
                    receiver.await
                }
            },
            None => receiver.await,
        };
        pending.armed = false;
        answer.unwrap_or_else(|_| Err("the JavaScript side ended without an answer".into()))
    }

    /// Asks JavaScript to abort the work of letter `id` (its `AbortSignal` fires); the answer still comes.
    pub fn abort(&self, id: u64) {
        let _ = self.send(&json!({"kind": "abort", "id": id}));
    }

    /// The answer to letter `id`: `{"ok": <value>}` or `{"error": "<message>"}` as JSON text. An unknown id (an
    /// answer after an abort) is ignored.
    pub fn settle(&self, id: u64, answer: &str) {
        let Some(waiting) = self.lock().remove(&id) else {
            return;
        };
        let answer = match serde_json::from_str::<Value>(answer) {
            Ok(Value::Object(mut fields)) => match (fields.remove("ok"), fields.remove("error")) {
                (_, Some(error)) => Err(error.as_str().map(str::to_owned).unwrap_or_else(|| error.to_string())),
                (Some(value), None) => Ok(value),
                (None, None) => Ok(Value::Null),
            },
            Ok(other) => Err(format!("an answer must be an object with ok or error, not {other}")),
            Err(error) => Err(format!("an answer that is not JSON: {error}")),
        };
        let _ = waiting.answer.send(answer);
    }

    /// A partial result of the call of letter `id` (its `onUpdate`), as the JSON of a tool result.
    pub fn update(&self, id: u64, partial: &str) {
        let guard = self.lock();
        let Some(sink) = guard.get(&id).and_then(|waiting| waiting.updates.as_ref()) else {
            return;
        };
        if let Ok(value) = serde_json::from_str::<Value>(partial) {
            sink.send(crate::result::output_of(&value));
        }
    }

    fn send(&self, letter: &Value) -> Status {
        self.dispatch
            .call(letter.to_string(), ThreadsafeFunctionCallMode::NonBlocking)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A letter waiting for its answer; dropped before the answer, it aborts the work.
struct Pending<'a> {
    bridge: &'a Bridge,
    id: u64,
    armed: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.bridge.lock().remove(&self.id);
            self.bridge.abort(self.id);
        }
    }
}

//! [`Bridge`]: the engine's line to JavaScript, the Node package's [`Host`].
//!
//! The engine runs on tokio threads; a JavaScript function runs only on the Node thread. Every ask (run this call,
//! call this hook, abort that call) goes as one JSON letter through one thread-safe function per engine, tagged with
//! a fresh id; the package's JavaScript starts the work and answers later through
//! [`NativeEngine::settle`](crate::engine::NativeEngine::settle) with the same id. Nothing crosses but text, so a
//! letter never holds a JavaScript value off its thread, and the JavaScript side never throws into Rust: whatever
//! goes wrong there comes back as an answer with an error. What an ask means and how its answer is read are the host
//! layer's ([`headstart_host`]).
//!
//! The thread-safe function is weak: an engine alone does not keep Node's event loop alive. What is awaited (a
//! tool's own timers and sockets, the promise of the next events) does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use headstart::core::model::joined_text;
use headstart::UpdateSink;
use headstart_host::{Ask, Host, HostFailure, Reply, ToolAnswer};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use serde_json::{json, Value};

/// The JavaScript function letters go to (`(letter: string) => void`), weak, its errors its own.
pub type Dispatch = ThreadsafeFunction<String, (), String, Status, false, true>;

/// An ask waiting for its answer.
struct Waiting {
    reply: Reply,
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

    /// The answer to letter `id`: `{"ok": <value>}`, `{"error": "<message>"}` (it threw) or `{"unreadable":
    /// "<what>"}` (what it gave cannot be serialized) as JSON text. An unknown id (an answer after the engine stopped
    /// waiting) is ignored. An answer with none of these carried a value JSON leaves out (a symbol or a function).
    pub fn settle(&self, id: u64, answer: &str) {
        let Some(waiting) = self.lock().remove(&id) else {
            return;
        };
        let answer = match serde_json::from_str::<Value>(answer) {
            Ok(Value::Object(mut fields)) => {
                let text = |value: Value| value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string());
                match (fields.remove("ok"), fields.remove("error"), fields.remove("unreadable")) {
                    (_, Some(error), _) => Err(HostFailure::Raised(text(error))),
                    (Some(value), None, _) => Ok(value),
                    (None, None, Some(what)) => Err(HostFailure::Unreadable(text(what))),
                    (None, None, None) => Err(HostFailure::Unreadable(
                        "a value JSON cannot hold (a symbol or a function)".into(),
                    )),
                }
            }
            Ok(other) => Err(HostFailure::Unreadable(format!(
                "an answer that is not an object with ok or error: {other}"
            ))),
            Err(error) => Err(HostFailure::Unreadable(format!("an answer that is not JSON: {error}"))),
        };
        waiting.reply.send(answer);
    }

    /// A partial result of the call of letter `id` (its `onUpdate`), as the JSON of a tool result; one that does not
    /// read is not sent.
    pub fn update(&self, id: u64, partial: &str) {
        let guard = self.lock();
        let Some(sink) = guard.get(&id).and_then(|waiting| waiting.updates.as_ref()) else {
            return;
        };
        let update = serde_json::from_str(partial)
            .ok()
            .and_then(|value| ToolAnswer::read(value).ok())
            .and_then(ToolAnswer::into_update);
        if let Some(update) = update {
            sink.send(update);
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

/// The letter of `ask` (numbered `id`) as the package's dispatcher reads it, and the updates sink of a call.
fn letter_of(id: u64, ask: Ask) -> (Value, Option<UpdateSink>) {
    match ask {
        Ask::Call(call) => (
            json!({
                "kind": "call",
                "id": id,
                "tool": call.tool,
                "callId": call.call_id,
                "arguments": Value::Object(call.arguments),
                "sessionId": call.session_id,
                "idempotencyKey": call.idempotency_key,
            }),
            Some(call.updates),
        ),
        Ask::Before { call, arguments } => (
            json!({"kind": "before", "id": id, "toolCall": call, "args": Value::Object(arguments)}),
            None,
        ),
        Ask::After { call, result } => (
            json!({
                "kind": "after",
                "id": id,
                "toolCall": call,
                "result": {
                    "content": [{"type": "text", "text": joined_text(&result.content)}],
                    "details": result.details,
                    "terminate": result.terminate,
                },
                "isError": result.is_error,
            }),
            None,
        ),
    }
}

impl Host for Bridge {
    fn start(&self, ask: Ask, reply: Reply) -> Result<u64, HostFailure> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (letter, updates) = letter_of(id, ask);
        self.lock().insert(id, Waiting { reply, updates });
        if self.send(&letter) != Status::Ok {
            self.lock().remove(&id);
            return Err(HostFailure::Gone(
                "the JavaScript side of the engine is gone (its process is exiting)".into(),
            ));
        }
        Ok(id)
    }

    fn abort(&self, id: u64) {
        let _ = self.send(&json!({"kind": "abort", "id": id}));
    }

    fn abandon(&self, id: u64) {
        self.lock().remove(&id);
        self.abort(id);
    }
}

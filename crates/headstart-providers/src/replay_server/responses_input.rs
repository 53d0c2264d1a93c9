//! What OpenAI's Responses API checks of a request's `input` before it answers (contract §3.7.1), so a test can hold
//! a client to it: every `function_call_output` follows a `function_call` with its `call_id`, once; every
//! `function_call` has its output unless the call is marked `async`. [`Checked`] answers a request that breaks a
//! rule with the API's 400, as the API does.

use serde_json::{json, Value};

use super::{ChooseReply, Reply};

/// Checks `body`'s `input` items in order; `Err` is the API's message for the first rule broken.
pub fn check(body: &Value) -> Result<(), String> {
    let items = body["input"].as_array().map(Vec::as_slice).unwrap_or_default();
    // Each call seen so far: its id, whether it is async, whether its output came.
    let mut calls: Vec<(&str, bool, bool)> = Vec::new();
    for item in items {
        let call_id = item["call_id"].as_str().unwrap_or_default();
        match item["type"].as_str() {
            Some("function_call") => calls.push((call_id, item["async"] == json!(true), false)),
            Some("function_call_output") => match calls.iter_mut().find(|(id, _, _)| *id == call_id) {
                None => {
                    return Err(format!(
                        "No tool call found for function call output with call_id {call_id}."
                    ))
                }
                Some((_, _, answered)) if *answered => {
                    return Err(format!(
                        "Duplicate function_call_output for call_id '{call_id}'. Each function_call must have \
                         exactly one matching function_call_output."
                    ))
                }
                Some((_, _, answered)) => *answered = true,
            },
            _ => {}
        }
    }
    match calls.iter().find(|(_, is_async, answered)| !is_async && !answered) {
        Some((call_id, _, _)) => Err(format!("No tool output found for function call {call_id}.")),
        None => Ok(()),
    }
}

/// The scripted replies, in order, to the requests that pass [`check`]; a request that does not gets the API's 400
/// (`invalid_request_error` on `input`) instead, and uses up no reply.
pub struct Checked {
    replies: Box<dyn Fn(usize) -> Option<Reply> + Send + Sync>,
    used: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked")
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl Checked {
    /// `replies`, one per request that passes, then an empty body.
    pub fn new(replies: Vec<Reply>) -> Self {
        Checked::scripted_by(move |next| replies.get(next).cloned())
    }

    /// The reply `script(n)` to the `n`-th request that passes (from 0), an empty body for `None`: for replies that
    /// name something known only once the server runs (its own address, say).
    pub fn scripted_by(script: impl Fn(usize) -> Option<Reply> + Send + Sync + 'static) -> Self {
        Checked {
            replies: Box::new(script),
            used: std::sync::atomic::AtomicUsize::new(0),
        }
    }
}

impl ChooseReply for Checked {
    fn reply(&self, _number: usize, body: &Value) -> Reply {
        if let Err(message) = check(body) {
            return Reply::Status {
                status: 400,
                headers: vec![("content-type".to_owned(), "application/json".to_owned())],
                body: json!({"error": {"message": message, "type": "invalid_request_error", "param": "input",
                                       "code": null}})
                .to_string(),
            };
        }
        let next = self.used.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        (self.replies)(next).unwrap_or(Reply::Events(Vec::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, is_async: bool) -> Value {
        let mut item = json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"});
        if is_async {
            item["async"] = json!(true);
        }
        item
    }

    fn output(id: &str) -> Value {
        json!({"type": "function_call_output", "call_id": id, "output": "ok"})
    }

    fn body(items: Vec<Value>) -> Value {
        json!({"input": items})
    }

    #[test]
    fn each_call_has_one_output_after_it_unless_it_is_async() {
        let user = json!({"role": "user", "content": "go on"});
        assert_eq!(check(&body(vec![call("a", false), output("a")])), Ok(()));
        // An async call may go without its output, and get it after later messages.
        assert_eq!(check(&body(vec![call("a", true), user.clone()])), Ok(()));
        assert_eq!(check(&body(vec![call("a", true), user, output("a")])), Ok(()));
        let refused = |items: Vec<Value>| check(&body(items)).expect_err("refused");
        assert!(refused(vec![call("a", false)]).starts_with("No tool output found for function call a"));
        assert!(refused(vec![output("b")]).starts_with("No tool call found for function call output with call_id b"));
        assert!(refused(vec![output("a"), call("a", true)]).starts_with("No tool call found"));
        assert!(refused(vec![call("a", true), output("a"), output("a")]).starts_with("Duplicate function_call_output"));
    }

    #[test]
    fn a_refused_request_gets_the_apis_400_and_uses_up_no_reply() {
        let checked = Checked::new(vec![Reply::Events(vec!["first".into()])]);
        let refused = checked.reply(0, &body(vec![output("x")]));
        assert!(matches!(&refused, Reply::Status { status: 400, body, .. } if body.contains("invalid_request_error")));
        assert!(matches!(checked.reply(1, &body(vec![])), Reply::Events(events) if events == ["first"]));
    }
}

//! The host layer with a fake host: the specs, the answers of both languages (JavaScript's spellings and Python's),
//! answers that do not read, the ask protocol (cancel, abandon, a host that is gone), and host tools and hooks inside
//! an engine, where every call gets its one stored result.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use headstart::core::model::ContentBlock;
use headstart::core::{DoneReason, Usage};
use headstart::{
    Arguments, CancellationToken, Decision, DeltaEvent, Engine, ExecutionMode, Hooks, Message, ResultDraft,
    SqliteStore, Tool, ToolCall, ToolContext, ToolHook, Toolbox,
};
use headstart_host::{
    AfterAnswer, Ask, BeforeAnswer, ConflictKey, Host, HostFailure, HostHook, HostTool, HostToolSpec, Reply, ToolAnswer,
};
use serde_json::{json, Value};

/// What the fake host does with an ask: answer at once, or keep the reply for the test to answer.
type Behaviour = Box<dyn Fn(&Ask) -> Option<Result<Value, HostFailure>> + Send + Sync>;

/// A host that answers as its behaviour says, and records what it was asked and told.
struct FakeHost {
    behaviour: Behaviour,
    next: Mutex<u64>,
    asked: Mutex<Vec<Ask>>,
    held: Mutex<Vec<(u64, Reply)>>,
    aborted: Mutex<Vec<u64>>,
    abandoned: Mutex<Vec<u64>>,
    gone: bool,
}

impl FakeHost {
    fn new(behaviour: impl Fn(&Ask) -> Option<Result<Value, HostFailure>> + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(FakeHost {
            behaviour: Box::new(behaviour),
            next: Mutex::new(0),
            asked: Mutex::new(Vec::new()),
            held: Mutex::new(Vec::new()),
            aborted: Mutex::new(Vec::new()),
            abandoned: Mutex::new(Vec::new()),
            gone: false,
        })
    }

    /// A host that answers every ask with `value`.
    fn answering(value: Value) -> Arc<Self> {
        FakeHost::new(move |_| Some(Ok(value.clone())))
    }

    /// Answers the held ask `id`.
    fn answer_held(&self, id: u64, answer: Result<Value, HostFailure>) {
        let mut held = self.held.lock().unwrap();
        let at = held
            .iter()
            .position(|(held_id, _)| *held_id == id)
            .expect("the ask is held");
        held.remove(at).1.send(answer);
    }
}

impl Host for FakeHost {
    fn start(&self, ask: Ask, reply: Reply) -> Result<u64, HostFailure> {
        if self.gone {
            return Err(HostFailure::Gone("the host is gone".into()));
        }
        let id = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            *next
        };
        let answer = (self.behaviour)(&ask);
        self.asked.lock().unwrap().push(ask);
        match answer {
            Some(answer) => reply.send(answer),
            None => self.held.lock().unwrap().push((id, reply)),
        }
        Ok(id)
    }

    fn abort(&self, id: u64) {
        self.aborted.lock().unwrap().push(id);
    }

    fn abandon(&self, id: u64) {
        self.abandoned.lock().unwrap().push(id);
    }
}

fn spec(value: Value) -> HostToolSpec {
    HostToolSpec::from_json(value).expect("the spec reads")
}

fn tool(host: &Arc<FakeHost>, value: Value) -> HostTool {
    HostTool::new(spec(value), Arc::clone(host) as Arc<dyn Host>).expect("a valid spec")
}

fn text(result: &headstart::ToolResult) -> String {
    match result {
        Ok(output) => headstart::core::model::joined_text(&output.content),
        Err(error) => error.message.clone(),
    }
}

async fn run(tool: &HostTool, arguments: Value) -> headstart::ToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    tool.execute(arguments, ToolContext::detached("c1")).await
}

#[test]
fn a_spec_reads_the_same_in_either_language_and_keys_conflicts_by_argument_or_fixed() {
    let parameters = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let js = spec(
        json!({"name": "write", "parameters": parameters, "providerAsync": true, "sequential": true,
        "idempotent": true, "timeoutMs": 1500, "conflictKey": "path"}),
    );
    let py = spec(
        json!({"name": "write", "parameters": parameters, "provider_async": true, "sequential": true,
        "idempotent": true, "timeout": 1.5, "conflict_key": "path"}),
    );
    assert_eq!(
        js.clone().into_spec(),
        py.into_spec(),
        "each language's spellings and unit"
    );
    let (tool, key) = js.into_spec().expect("valid");
    assert!(
        tool.early && tool.provider_async && tool.idempotent,
        "provider-async is early"
    );
    assert_eq!(tool.execution_mode, ExecutionMode::Sequential);
    assert_eq!(tool.timeout, Some(Duration::from_millis(1500)));
    assert_eq!(key, Some(ConflictKey::Argument("path".into())));
    let arguments: Arguments = serde_json::from_value(json!({"path": "a.txt"})).unwrap();
    assert_eq!(key.unwrap().of(&arguments), Some("a.txt".into()));

    let (_, fixed) = spec(json!({"name": "db", "conflictKey": "the-database"}))
        .into_spec()
        .unwrap();
    assert_eq!(fixed, Some(ConflictKey::Fixed("the-database".into())));
    let (defaults, none) = spec(json!({"name": "plain"})).into_spec().unwrap();
    assert_eq!(defaults.parameters, json!({"type": "object"}));
    assert!(!defaults.early && none.is_none() && defaults.timeout.is_none());
    let (negative, _) = spec(json!({"name": "t", "timeoutMs": -5})).into_spec().unwrap();
    assert_eq!(
        negative.timeout,
        Some(Duration::ZERO),
        "a negative timeout is no time at all"
    );
}

#[test]
fn a_spec_the_engine_cannot_take_is_an_error_naming_the_tool() {
    let error = |value: Value| spec(value).into_spec().expect_err("refused").to_string();
    assert_eq!(error(json!({"name": ""})), "a tool needs a name (a non-empty string)");
    assert!(
        error(json!({"name": "t", "parameters": [1]})).starts_with("tool t: parameters must be a JSON Schema object")
    );
    assert_eq!(
        error(json!({"name": "t", "timeoutMs": 1e300})),
        "tool t: timeoutMs must be a finite number of milliseconds, not 1e300"
    );
    assert_eq!(
        error(json!({"name": "t", "timeout": 1e300})),
        "tool t: timeout must be a finite number of seconds, not 1e300"
    );
    assert_eq!(
        error(json!({"name": "t", "timeout": "inf"})),
        "tool t: timeout must be a finite number of seconds, not inf",
        "Python's infinity, which JSON cannot hold, comes as its text"
    );
    assert_eq!(
        error(json!({"name": "t", "timeout": "nan"})),
        "tool t: timeout must be a finite number of seconds, not nan"
    );
    assert!(error(json!({"name": "t", "timeout": 1, "timeoutMs": 1000})).ends_with("not both"));
    let unreadable = HostToolSpec::from_json(json!({"name": 5}))
        .expect_err("refused")
        .to_string();
    assert!(unreadable.starts_with("a tool spec that does not read"), "{unreadable}");
}

#[tokio::test]
async fn a_tool_answers_as_either_language_does() {
    for (answer, expected_text, error, details, terminate) in [
        (json!("plain text"), "plain text", false, Value::Null, false),
        // JavaScript: text blocks (an image is not kept), camelCase.
        (
            json!({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "…"}, {"type": "text", "text": "b"}],
                   "details": {"n": 1}, "terminate": true}),
            "a\nb",
            false,
            json!({"n": 1}),
            true,
        ),
        (
            json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}),
            "it broke",
            true,
            Value::Null,
            false,
        ),
        // Python: the content as text, snake_case.
        (
            json!({"content": "{\"x\": 1}", "details": {"x": 1}}),
            "{\"x\": 1}",
            false,
            json!({"x": 1}),
            false,
        ),
        (
            json!({"content": "no", "is_error": true}),
            "no",
            true,
            Value::Null,
            false,
        ),
    ] {
        let host = FakeHost::answering(answer.clone());
        let result = run(&tool(&host, json!({"name": "t"})), json!({"q": 1})).await;
        assert_eq!(text(&result), expected_text, "{answer}");
        assert_eq!(result.is_err(), error, "{answer}");
        if let Ok(output) = result {
            assert_eq!((output.details, output.terminate), (details, terminate), "{answer}");
        }
        let Ask::Call(call) = &host.asked.lock().unwrap()[0] else {
            panic!("a call was asked")
        };
        assert_eq!((call.tool.as_str(), call.call_id.as_str()), ("t", "c1"));
        assert_eq!(Value::Object(call.arguments.clone()), json!({"q": 1}));
    }
}

#[tokio::test]
async fn an_answer_that_does_not_read_is_the_calls_error_naming_what_was_expected() {
    let expected =
        "expected a string, or {content: a string or [{type: \"text\", text}], details?, isError?, terminate?}";
    for (answer, given) in [
        (Ok(json!(5)), "5"),
        (Ok(json!({"details": {}})), "{\"details\":{}}"),
        (Ok(json!(null)), "null"),
        (Err(HostFailure::Unreadable("a symbol".into())), "a symbol"),
    ] {
        let host = FakeHost::new(move |_| Some(answer.clone()));
        let result = run(&tool(&host, json!({"name": "t"})), json!({})).await;
        assert_eq!(
            text(&result),
            format!("the tool answered {given}, which is not a result: {expected}")
        );
    }
    let host = FakeHost::answering(json!({"content": [{"type": "text"}]}));
    let result = run(&tool(&host, json!({"name": "t"})), json!({})).await;
    assert_eq!(
        text(&result),
        format!("the tool's result has a text block without its text: {expected}")
    );
    let raised = FakeHost::new(|_| Some(Err(HostFailure::Raised("ValueError: boom".into()))));
    assert_eq!(
        text(&run(&tool(&raised, json!({"name": "t"})), json!({})).await),
        "ValueError: boom"
    );
}

#[test]
fn the_before_hook_decides_as_either_language_says() {
    for (answer, decision) in [
        (json!(null), Decision::Continue),
        (json!(true), Decision::Continue),
        (json!(false), Decision::Block(None)),
        (json!("not now"), Decision::Block(Some("not now".into()))),
        (
            json!({"block": true, "reason": "no"}),
            Decision::Block(Some("no".into())),
        ),
        (json!({"block": true}), Decision::Block(None)),
        (json!({"block": false}), Decision::Continue),
    ] {
        assert_eq!(
            BeforeAnswer::settle(Ok(answer.clone())).expect("reads"),
            decision,
            "{answer}"
        );
    }
    for answer in [json!(5), json!([true]), json!({"block": "yes"})] {
        let error = BeforeAnswer::settle(Ok(answer.clone()))
            .expect_err("does not read")
            .message;
        assert!(
            error.starts_with(&format!(
                "a hook failed: the before-call hook answered {answer}, which is not a decision: expected"
            )),
            "{error}"
        );
    }
    let raised = BeforeAnswer::settle(Err(HostFailure::Raised("PermissionError: no".into()))).expect_err("raised");
    assert_eq!(raised.message, "a hook failed: PermissionError: no");
}

#[test]
fn the_after_hook_changes_a_result_as_either_language_says() {
    let read = |answer: Value| AfterAnswer::settle(Ok(answer)).expect("reads");
    assert_eq!(read(json!(null)), Default::default());
    let js = read(json!({"content": [{"type": "text", "text": "redacted"}], "isError": false, "details": null}));
    let py = read(json!({"content": "redacted", "is_error": false, "details": null}));
    assert_eq!(js, py);
    assert_eq!(js.content, Some(vec![ContentBlock::text("redacted")]));
    assert_eq!(
        (js.is_error, js.details),
        (Some(false), Some(Value::Null)),
        "a null replaces the details"
    );
    assert_eq!(read(json!({"terminate": true})).terminate, Some(true));
    let error = AfterAnswer::settle(Ok(json!(7))).expect_err("does not read").message;
    assert!(
        error.starts_with("a hook failed: the after-call hook answered 7, which is not a change"),
        "{error}"
    );
}

#[tokio::test]
async fn a_cancelled_call_tells_the_host_to_abort_and_still_gets_its_answer() {
    let host = FakeHost::new(|_| None);
    let tool = tool(&host, json!({"name": "slow"}));
    let context = ToolContext::detached("c1");
    let cancel = context.cancel.clone();
    let running = tokio::spawn({
        let host = Arc::clone(&host);
        async move {
            let result = tool.execute(Arguments::new(), context).await;
            (result, host)
        }
    });
    tokio::task::yield_now().await;
    cancel.cancel();
    while host.aborted.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    host.answer_held(1, Ok(json!("stopped on the abort")));
    let (result, host) = running.await.expect("the call ends");
    assert_eq!(text(&result), "stopped on the abort");
    assert_eq!(*host.aborted.lock().unwrap(), [1]);
    assert!(
        host.abandoned.lock().unwrap().is_empty(),
        "the answer was awaited, not abandoned"
    );
}

#[tokio::test]
async fn a_call_the_engine_stops_waiting_for_is_abandoned_and_a_gone_host_is_an_error() {
    let host = FakeHost::new(|_| None);
    let tool = tool(&host, json!({"name": "slow"}));
    let timed_out = tokio::time::timeout(Duration::from_millis(10), run(&tool, json!({}))).await;
    assert!(timed_out.is_err());
    assert_eq!(*host.abandoned.lock().unwrap(), [1]);

    let gone = Arc::new(FakeHost {
        gone: true,
        ..Arc::into_inner(FakeHost::new(|_| None)).unwrap()
    });
    assert_eq!(
        text(&run(&self::tool(&gone, json!({"name": "t"})), json!({})).await),
        "the host is gone"
    );
    // The host dropped the reply without answering.
    let dropped = FakeHost::new(|_| None);
    let task = tokio::spawn({
        let dropped = Arc::clone(&dropped);
        async move { run(&self::tool(&dropped, json!({"name": "t"})), json!({})).await }
    });
    while dropped.held.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    dropped.held.lock().unwrap().clear();
    assert_eq!(text(&task.await.unwrap()), "the host ended without an answer");
}

#[tokio::test]
async fn in_an_engine_every_call_of_a_host_gets_its_one_stored_result() {
    // `ok` answers; `bad` answers a number; the hooks block `blocked` and answer a number after `odd`.
    let host = FakeHost::new(|ask| match ask {
        Ask::Call(call) if call.tool == "ok" => Some(Ok(json!("fine"))),
        Ask::Call(_) => Some(Ok(json!(42))),
        Ask::Before { call, .. } if call.name == "blocked" => Some(Ok(json!("not this one"))),
        Ask::Before { .. } => Some(Ok(Value::Null)),
        Ask::After { call, .. } if call.name == "odd" => Some(Ok(json!(3))),
        Ask::After { .. } => Some(Ok(Value::Null)),
    });
    let dyn_host = Arc::clone(&host) as Arc<dyn Host>;
    let mut toolbox = Toolbox::new();
    for name in ["ok", "bad", "blocked", "odd"] {
        toolbox
            .register(tool(&host, json!({"name": name, "early": name == "ok"})))
            .unwrap();
    }
    let hooks = Hooks::new().with(HostHook {
        before: true,
        after: true,
        host: dyn_host,
    });
    let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .toolbox(toolbox)
        .hooks(hooks)
        .build();
    let session = engine.create_session().await.unwrap();
    let mut deltas = vec![DeltaEvent::Start {
        model: None,
        response_id: None,
    }];
    for (index, name) in ["ok", "bad", "blocked", "odd"].into_iter().enumerate() {
        deltas.push(DeltaEvent::ToolcallStart {
            index,
            id: format!("c{index}"),
            name: name.into(),
            early: false,
            provider_async: false,
        });
        deltas.push(DeltaEvent::ToolcallEnd { index, arguments: None });
    }
    deltas.push(DeltaEvent::Done {
        stop_reason: DoneReason::ToolUse,
        usage: Usage::default(),
    });
    let mut events = engine
        .wrap_next(
            &session,
            futures::stream::iter(deltas.into_iter().map(Ok)),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    while events.next().await.is_some() {}
    let results: Vec<(String, bool, String)> = engine
        .store()
        .load_log(&session)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|stored| match stored.message {
            Message::ToolResult(result) => Some((result.tool_call_id.clone(), result.is_error, result.text())),
            _ => None,
        })
        .collect();
    let by_id = |id: &str| results.iter().find(|(call, ..)| call == id).cloned().expect("a result");
    assert_eq!(results.len(), 4, "{results:?}");
    assert_eq!(by_id("c0"), ("c0".into(), false, "fine".into()));
    assert!(by_id("c1").1 && by_id("c1").2.starts_with("the tool answered 42, which is not a result"));
    assert_eq!(by_id("c2"), ("c2".into(), true, "not this one".into()));
    assert!(
        by_id("c3").1
            && by_id("c3")
                .2
                .starts_with("a hook failed: the after-call hook answered 3"),
        "{:?}",
        by_id("c3")
    );
}

#[tokio::test]
async fn the_hook_sees_the_call_and_its_draft() {
    let host = FakeHost::answering(Value::Null);
    let hook = HostHook {
        before: true,
        after: true,
        host: Arc::clone(&host) as Arc<dyn Host>,
    };
    let call: ToolCall = serde_json::from_value(json!({"id": "c1", "name": "t", "arguments": {"a": 1}})).unwrap();
    let arguments: Arguments = serde_json::from_value(json!({"a": 1})).unwrap();
    assert_eq!(
        hook.before_tool_call(&call, &arguments).await.unwrap(),
        Decision::Continue
    );
    let draft = ResultDraft {
        content: vec![ContentBlock::text("r")],
        details: json!({}),
        is_error: false,
        terminate: false,
    };
    assert_eq!(hook.after_tool_call(&call, &draft).await.unwrap(), Default::default());
    {
        let asked = host.asked.lock().unwrap();
        assert!(matches!(&asked[0], Ask::Before { call, arguments } if call.id == "c1" && arguments["a"] == 1));
        assert!(matches!(&asked[1], Ask::After { result, .. } if result == &draft));
    }
    let silent = HostHook {
        before: false,
        after: false,
        host: Arc::clone(&host) as Arc<dyn Host>,
    };
    assert_eq!(
        silent.before_tool_call(&call, &arguments).await.unwrap(),
        Decision::Continue
    );
    assert_eq!(
        host.asked.lock().unwrap().len(),
        2,
        "a hook the host has not is not asked"
    );
}

#[test]
fn a_partial_result_reads_as_a_tool_answer_does() {
    let update = ToolAnswer::read(json!({"content": [{"type": "text", "text": "half"}], "isError": true}))
        .expect("reads")
        .into_update()
        .expect("an output");
    assert_eq!(headstart::core::model::joined_text(&update.content), "half");
    assert!(
        ToolAnswer::read(json!([{"type": "text", "text": "x"}])).is_err(),
        "an array is not a result"
    );
}

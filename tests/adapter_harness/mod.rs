//! A scripted harness that drives an arbitrary delta-event sequence through the whole stream adapter
//! ([`Engine::wrap`]) and checks the engine's invariants.
//!
//! Shared by the property test `tests/adapter_props.rs` and the `adapter` fuzz target in `fuzz/` (which includes
//! this file by path), so both check exactly the same things:
//!
//! - nothing panics (tool panics are caught by the engine; see [`quiet_scripted_panics`]);
//! - the engine's invariants, by the checker the scenario, load and crash tests share
//!   ([`headstart_testkit::invariants::check_turn`]): the event stream starts with `turn_start`, ends with `turn_end`,
//!   and has exactly one of each; every admitted call (a `tool_runs` row) is admitted once, has a stored owner,
//!   exactly one result and a final run state; every tool call stored in an assistant fragment has exactly one
//!   result, and every result answers a stored call; a run never starts before its owner was stored; per call, one
//!   `tool_execution_start` then one `tool_execution_end`, directly followed by its result message (back to back
//!   for calls that never executed), and the `message_end` of the fragment holding an executed call precedes its
//!   `tool_execution_start`; sequence numbers are gapless from 1; fragments of the response share a turn id and
//!   only the last carries usage;
//! - no call executes before its owner is stored: each tool body looks its call up in the store when it starts;
//! - each call id executes at most once, and only admitted calls execute;
//! - `turn_end` counts the admitted calls, and no store write failed.
//!
//! Everything runs on a paused current-thread tokio runtime (virtual time) against an in-memory [`SqliteStore`].
//! A backstop cancellation at [`BACKSTOP_CANCEL_MS`] ends tools that hang until cancelled; a response that has not
//! ended an hour of virtual time later is reported as a hang.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::{DoneReason, ErrorReason, Usage};
use headstart::{
    AgentEvent, Arguments, CancellationToken, Decision, DeltaEvent, Engine, EngineConfig, ExecutionMode, Hooks,
    Message, ModelError, SessionId, SqliteStore, TokioClock, Tool, ToolCall, ToolContext, ToolError, ToolHook,
    ToolOutput, ToolSpec, Toolbox, TranscriptStore,
};
use headstart_testkit::invariants;

/// The payload of every panic a scripted tool raises on purpose.
pub const SCRIPTED_PANIC: &str = "scripted panic";

/// Virtual time at which the harness cancels the response if the script did not cancel it earlier, so that tools
/// which hang until cancelled end.
pub const BACKSTOP_CANCEL_MS: u64 = 60_000;

/// Virtual time after which a response that has not ended counts as a hang.
pub const HANG_AFTER_MS: u64 = 3_600_000;

/// Tool names a script may call: the scripted toolbox's tools, plus one that is not registered.
pub const TOOL_NAMES: [&str; 12] = [
    "fetch", "fail", "boom", "wait", "slow", "keyed", "write", "check", "crash", "block", "fence", "nope",
];

/// Call ids a script may use (including an empty one, a blocked one, and odd characters).
pub const CALL_IDS: [&str; 8] = ["c0", "c1", "c2", "c3", "blocked", "", "c\u{0}\u{e9}", "c1 "];

/// Argument pieces a script may stream (valid, partial, and garbage JSON).
pub const ARG_PIECES: [&str; 12] = [
    "{}",
    "{\"x\": 1}",
    "{\"k\": \"a\"}",
    "{\"k\": \"b\", \"x\": 2}",
    "{\"x\"",
    ": 3}",
    "",
    "[1, 2]",
    "null",
    "not json",
    "{\"x\": \"str\"}",
    "}{",
];

/// One step of a script: the model stream yields `item` after `gap_ms` of virtual time.
#[derive(Debug, Clone)]
pub struct Step {
    /// Virtual milliseconds to wait before yielding the item.
    pub gap_ms: u64,
    /// What the model stream yields.
    pub item: Result<DeltaEvent, ModelError>,
}

/// A model response and the engine settings to run it with.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// The model stream; it ends after the last step (with or without a terminal event).
    pub steps: Vec<Step>,
    /// External cancellation at this virtual time (else at [`BACKSTOP_CANCEL_MS`]).
    pub cancel_at_ms: Option<u64>,
    /// Sequential tool execution.
    pub sequential: bool,
    /// Bound on executing calls.
    pub max_in_flight: Option<usize>,
    /// Early execution off (every call waits for the end of the stream).
    pub no_early_execution: bool,
}

/// What a run did, for coverage statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Agent events emitted.
    pub events: usize,
    /// Calls admitted.
    pub admitted: usize,
    /// Calls whose body executed.
    pub executed: usize,
    /// Assistant fragments stored.
    pub fragments: usize,
    /// The response ended in `error`/`aborted`.
    pub failed: bool,
}

// ---------------------------------------------------------------------------------------------------------------
// Scripted tools
// ---------------------------------------------------------------------------------------------------------------

/// Records every body start, and whether the call's owning fragment was in the store at that moment.
struct Probe {
    store: Arc<dyn TranscriptStore>,
    session: SessionId,
    starts: Mutex<Vec<(String, bool)>>,
}

impl Probe {
    async fn record_start(&self, call_id: &str) {
        let owned = match self.store.load_log(&self.session).await {
            Ok(log) => log.iter().any(|stored| match &stored.message {
                Message::Assistant(message) => message
                    .content
                    .iter()
                    .any(|block| block.as_tool_call().is_some_and(|call| call.id == call_id)),
                _ => false,
            }),
            Err(_) => false,
        };
        self.starts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((call_id.to_owned(), owned));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    Ok,
    Error,
    Panic,
    Hang,
}

struct Scripted {
    spec: ToolSpec,
    behaviour: Behaviour,
    keyed: bool,
    probe: Arc<Probe>,
}

impl Scripted {
    fn new(name: &'static str, early: bool, behaviour: Behaviour, probe: &Arc<Probe>) -> Self {
        Scripted {
            spec: ToolSpec::new(name).early(early),
            behaviour,
            keyed: false,
            probe: Arc::clone(probe),
        }
    }
}

/// A small per-call delay (0–40 ms) derived from the id, so calls finish in varied orders.
fn delay_for(call_id: &str) -> Duration {
    let sum: u64 = call_id.bytes().map(u64::from).sum();
    Duration::from_millis((sum % 5) * 10)
}

#[async_trait]
impl Tool for Scripted {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn conflict_key(&self, arguments: &Arguments) -> Option<String> {
        if !self.keyed {
            return None;
        }
        arguments.get("k").map(ToString::to_string)
    }

    async fn execute(&self, _arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        self.probe.record_start(&context.call_id).await;
        context.updates.send(ToolOutput::text("started"));
        if self.behaviour == Behaviour::Hang {
            context.cancel.cancelled().await;
            return Err(ToolError::new("cancelled"));
        }
        tokio::select! {
            biased;
            () = tokio::time::sleep(delay_for(&context.call_id)) => {}
            () = context.cancel.cancelled() => return Err(ToolError::new("cancelled")),
        }
        match self.behaviour {
            Behaviour::Ok => Ok(ToolOutput::text(format!("{} done", self.spec.name))),
            Behaviour::Error => Err(ToolError::new("scripted failure")),
            Behaviour::Panic => std::panic::panic_any(SCRIPTED_PANIC),
            Behaviour::Hang => unreachable!("handled above"),
        }
    }
}

fn toolbox(probe: &Arc<Probe>) -> Toolbox {
    use Behaviour::{Error, Hang, Ok, Panic};
    let mut slow = Scripted::new("slow", true, Hang, probe);
    slow.spec.timeout = Some(Duration::from_millis(25));
    let mut keyed = Scripted::new("keyed", true, Ok, probe);
    keyed.keyed = true;
    let mut check = Scripted::new("check", false, Ok, probe);
    check.spec.parameters =
        serde_json::json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]});
    let mut fence = Scripted::new("fence", false, Ok, probe);
    fence.spec.execution_mode = ExecutionMode::Sequential;
    let tools = [
        Scripted::new("fetch", true, Ok, probe),
        Scripted::new("fail", true, Error, probe),
        Scripted::new("boom", true, Panic, probe),
        Scripted::new("wait", true, Hang, probe),
        slow,
        keyed,
        Scripted::new("write", false, Ok, probe),
        check,
        Scripted::new("crash", false, Panic, probe),
        Scripted::new("block", false, Hang, probe),
        fence,
    ];
    let mut toolbox = Toolbox::new();
    for tool in tools {
        toolbox.register(tool).expect("the scripted tools register");
    }
    toolbox
}

/// Blocks the call with id `blocked`; fails the hook for calls to `write` whose id is `c3`.
struct ScriptedHook;

#[async_trait]
impl ToolHook for ScriptedHook {
    async fn before_tool_call(&self, call: &ToolCall, _arguments: &Arguments) -> Result<Decision, ToolError> {
        if call.id == "blocked" {
            return Ok(Decision::Block(Some("blocked by the script".into())));
        }
        if call.id == "c3" && call.name == "write" {
            return Err(ToolError::new("scripted hook failure"));
        }
        Ok(Decision::Continue)
    }
}

/// Installs (once per process) a panic hook that stays silent for [`SCRIPTED_PANIC`] and defers to the previous
/// hook for every other panic, so that deliberate tool panics neither spam the output nor trip a fuzzer's
/// abort-on-panic hook.
pub fn quiet_scripted_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() == Some(&SCRIPTED_PANIC) {
                return;
            }
            previous(info);
        }));
    });
}

// ---------------------------------------------------------------------------------------------------------------
// Running a script and checking the invariants
// ---------------------------------------------------------------------------------------------------------------

/// Runs `script` on its own paused current-thread runtime; `Err` lists every invariant it broke.
pub fn run(script: &Script) -> Result<Summary, Vec<String>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run_async(script))
}

async fn run_async(script: &Script) -> Result<Summary, Vec<String>> {
    let store = Arc::new(SqliteStore::open_in_memory().expect("an in-memory store"));
    let session = store.create_session(0).await.expect("a session");
    let probe = Arc::new(Probe {
        store: store.clone(),
        session: session.clone(),
        starts: Mutex::new(Vec::new()),
    });
    let config = EngineConfig::default()
        .tool_execution(ExecutionMode::sequential_if(script.sequential))
        .max_in_flight(script.max_in_flight)
        .max_requests(1)
        .early_execution(!script.no_early_execution);
    let engine = Engine::builder(store.clone())
        .toolbox(toolbox(&probe))
        .hooks(Hooks::new().with(ScriptedHook))
        .config(config)
        .clock(Arc::new(TokioClock::starting_now()))
        .turn_ids(Arc::new(|request| format!("turn-{request}")))
        .build();

    let steps = script.steps.clone();
    let model = async_stream::stream! {
        for step in steps {
            tokio::time::sleep(Duration::from_millis(step.gap_ms)).await;
            yield step.item;
        }
    };
    let cancel = CancellationToken::new();
    let cancel_at = Duration::from_millis(script.cancel_at_ms.unwrap_or(BACKSTOP_CANCEL_MS));
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(cancel_at).await;
            cancel.cancel();
        })
    };
    let collected = tokio::time::timeout(
        Duration::from_millis(HANG_AFTER_MS),
        engine.wrap(&session, 0, model, cancel).collect::<Vec<AgentEvent>>(),
    )
    .await;
    canceller.abort();
    let Ok(events) = collected else {
        return Err(vec![format!(
            "the response did not end within {HANG_AFTER_MS} ms of virtual time"
        )]);
    };
    let starts = probe
        .starts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    check(&*store, &session, &events, &starts).await
}

async fn check(
    store: &dyn TranscriptStore,
    session: &SessionId,
    events: &[AgentEvent],
    starts: &[(String, bool)],
) -> Result<Summary, Vec<String>> {
    let log = store
        .load_log(session)
        .await
        .map_err(|e| vec![format!("load_log failed: {e}")])?;
    let runs = store
        .tool_runs(session)
        .await
        .map_err(|e| vec![format!("tool_runs failed: {e}")])?;

    // The engine's invariants, checked as everywhere else: sequence numbers, owners, one result per call, turn
    // ids and usage, the event order.
    let mut failures: Vec<String> = invariants::check_turn(&log, &runs, events)
        .iter()
        .map(ToString::to_string)
        .collect();

    // What only this harness can see: how the turn says it ended, and that no store write failed.
    let outcome = match events.last() {
        Some(AgentEvent::ResponseEnd { outcome, .. }) => Some(outcome),
        _ => None,
    };
    if let Some(outcome) = outcome {
        if let Some(failure) = &outcome.store_failure {
            failures.push(format!("a store write failed: {failure}"));
        }
        if outcome.admitted != runs.len() {
            failures.push(format!(
                "turn_end says {} calls were admitted, the store has {} runs",
                outcome.admitted,
                runs.len()
            ));
        }
    }
    if events
        .iter()
        .any(|event| matches!(event, AgentEvent::MessageEnd { seq: None, .. }))
    {
        failures.push("a message_end without a sequence number (store write failed)".to_owned());
    }

    // Every admitted call was sealed before its admission, and its run says when (contract §7.2), a sync call
    // admitted at the end of the stream included.
    for run in &runs {
        match run.sealed_at_us {
            None => failures.push(format!("call {:?} was admitted without its seal time", run.call_id)),
            Some(sealed) if sealed > run.admitted_at_us => failures.push(format!(
                "call {:?} was sealed at {sealed} µs, after its admission at {} µs",
                run.call_id, run.admitted_at_us
            )),
            Some(_) => {}
        }
    }

    // Executions as the tool bodies saw them: only admitted calls, at most once, never before the owner was stored.
    let admitted: BTreeSet<&str> = runs.iter().map(|run| run.call_id.as_str()).collect();
    let mut executed: HashMap<&str, usize> = HashMap::new();
    for (id, owned) in starts {
        *executed.entry(id).or_default() += 1;
        if !owned {
            failures.push(format!("call {id:?} executed before its owning fragment was stored"));
        }
        if !admitted.contains(id.as_str()) {
            failures.push(format!("call {id:?} executed without being admitted"));
        }
    }
    for (id, count) in &executed {
        if *count > 1 {
            failures.push(format!("call {id:?} executed {count} times"));
        }
    }

    if failures.is_empty() {
        Ok(Summary {
            events: events.len(),
            admitted: runs.len(),
            executed: executed.len(),
            fragments: log
                .iter()
                .filter(|stored| matches!(stored.message, Message::Assistant(_)))
                .count(),
            failed: outcome.is_some_and(|outcome| outcome.stop_reason.is_abnormal()),
        })
    } else {
        Err(failures)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding arbitrary bytes into a script (the fuzz target's input format)
// ---------------------------------------------------------------------------------------------------------------

/// Reads bytes one at a time, yielding 0 once they run out.
struct Bytes<'a> {
    data: &'a [u8],
}

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        match self.data.split_first() {
            Some((first, rest)) => {
                self.data = rest;
                *first
            }
            None => 0,
        }
    }

    fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[usize::from(self.next()) % items.len()]
    }
}

/// The block indices a decoded script has used, to make plausible ones.
#[derive(Default)]
struct Indices {
    next: usize,
    opened: Vec<usize>,
}

impl Indices {
    /// Mostly the next unused index (claiming it), sometimes an arbitrary small one.
    fn for_start(&mut self, raw: u8) -> usize {
        if raw < 224 {
            self.opened.push(self.next);
            self.next += 1;
            self.next - 1
        } else {
            usize::from(raw % 8)
        }
    }

    /// Mostly one of the three most recently opened indices, sometimes an arbitrary small one.
    fn for_open(&self, raw: u8) -> usize {
        match self.opened.len() {
            0 => usize::from(raw % 4),
            len if raw < 224 => self.opened[len - 1 - usize::from(raw) % len.min(3)],
            _ => usize::from(raw % 8),
        }
    }
}

/// Decodes arbitrary bytes into a script: a header byte of settings, then one event per opcode byte with its
/// operands. Indices are mostly "plausible" (the next unused index, or a recently opened one) so the decoder
/// reaches deep states, and sometimes arbitrary; everything else (ids, names, argument pieces, gaps) is picked
/// from small pools.
pub fn decode(data: &[u8]) -> Script {
    let mut bytes = Bytes { data };
    let header = bytes.next();
    let mut script = Script {
        sequential: header & 1 != 0,
        no_early_execution: header & 0b110 == 0b110,
        max_in_flight: (header & 0b1000 != 0).then(|| usize::from(bytes.next() % 3) + 1),
        cancel_at_ms: (header & 0b1_0000 != 0).then(|| u64::from(bytes.next()) * 2),
        steps: Vec::new(),
    };
    if header & 0b10_0000 == 0 {
        script.steps.push(Step {
            gap_ms: 0,
            item: Ok(DeltaEvent::Start {
                model: None,
                response_id: None,
            }),
        });
    }
    let mut indices = Indices::default();
    while !bytes.data.is_empty() && script.steps.len() < 256 {
        let op = bytes.next();
        let gap_ms = u64::from(op >> 6) * 5;
        let event = match op % 16 {
            0 => DeltaEvent::Start {
                model: None,
                response_id: (bytes.next() & 1 == 0).then(|| "resp".to_owned()),
            },
            1 => DeltaEvent::TextStart {
                index: indices.for_start(bytes.next()),
            },
            2 => DeltaEvent::TextDelta {
                index: indices.for_open(bytes.next()),
                delta: "txt".to_owned(),
            },
            3 => DeltaEvent::TextEnd {
                index: indices.for_open(bytes.next()),
            },
            4 => DeltaEvent::ThinkingStart {
                index: indices.for_start(bytes.next()),
            },
            5 => DeltaEvent::ThinkingDelta {
                index: indices.for_open(bytes.next()),
                delta: "hmm".to_owned(),
            },
            6 => DeltaEvent::ThinkingEnd {
                index: indices.for_open(bytes.next()),
                signature: Some("sig".to_owned()),
            },
            7 | 14 | 15 => {
                let flags = bytes.next();
                DeltaEvent::ToolcallStart {
                    index: indices.for_start(bytes.next()),
                    id: (*bytes.pick(&CALL_IDS)).to_owned(),
                    name: (*bytes.pick(&TOOL_NAMES)).to_owned(),
                    early: flags & 3 == 0,
                    provider_async: false,
                }
            }
            8 => DeltaEvent::ToolcallDelta {
                index: indices.for_open(bytes.next()),
                delta: (*bytes.pick(&ARG_PIECES)).to_owned(),
            },
            9 | 13 => DeltaEvent::ToolcallEnd {
                index: indices.for_open(bytes.next()),
                arguments: None,
            },
            10 => {
                let index = indices.for_open(bytes.next());
                let arguments = match bytes.next() % 3 {
                    0 => serde_json::json!({"x": 5, "k": "a"}),
                    1 => serde_json::json!([1]),
                    _ => serde_json::json!({}),
                };
                DeltaEvent::ToolcallEnd {
                    index,
                    arguments: Some(arguments),
                }
            }
            11 => DeltaEvent::Done {
                stop_reason: *bytes.pick(&[DoneReason::ToolUse, DoneReason::Stop, DoneReason::Length]),
                usage: Usage {
                    input: 1,
                    output: 2,
                    ..Usage::default()
                },
            },
            _ => {
                let choice = bytes.next();
                if choice & 1 == 0 {
                    script.steps.push(Step {
                        gap_ms,
                        item: Err(if choice & 3 == 0 {
                            ModelError::aborted("scripted model failure")
                        } else {
                            ModelError::new("scripted model failure")
                        }),
                    });
                    continue;
                }
                DeltaEvent::Error {
                    stop_reason: if choice % 4 == 1 {
                        ErrorReason::Error
                    } else {
                        ErrorReason::Aborted
                    },
                    message: "scripted error event".to_owned(),
                    usage: None,
                    kind: None,
                }
            }
        };
        script.steps.push(Step {
            gap_ms,
            item: Ok(event),
        });
    }
    script
}

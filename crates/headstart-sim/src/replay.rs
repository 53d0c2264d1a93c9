//! Running a scenario and building its report (`headstart replay`, contract §8).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use headstart::store::{Durability, Layered, SqliteOptions, SqliteStore, TranscriptStore};
use headstart::{
    Agent, AgentEvent, AgentStop, CancellationToken, Clock, Emitted, Engine, EventStream, Hooks, Role, TokioClock,
    Toolbox, UserMessage,
};
use headstart_timeline::report::{EventReport, Ms, Report, RequestReport, ToolRunReport, TranscriptEntry};

use crate::commit_trace::CommitTrace;
use crate::scenario::Scenario;
use crate::sim_model::{ExternalCancel, SimModel};
use crate::sim_tools::{SimHooks, SimTool};
use crate::timing::Timing;

/// Which clock a replay runs on.
///
/// The virtual clock is tokio's paused clock, which only tokio's `test-util` feature provides; this crate enables
/// it only with its own `virtual-clock` feature, so a build that needs no virtual replay does not carry it. Without
/// that feature `Wall` is the only mode (and the default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClockMode {
    /// tokio's paused clock: deterministic reports, whole milliseconds (feature `virtual-clock`).
    #[cfg(feature = "virtual-clock")]
    #[default]
    Virtual,
    /// Real time and real sleeps: measured milliseconds.
    #[cfg_attr(not(feature = "virtual-clock"), default)]
    Wall,
}

impl ClockMode {
    /// `true` for tokio's paused clock.
    pub fn is_virtual(self) -> bool {
        match self {
            #[cfg(feature = "virtual-clock")]
            ClockMode::Virtual => true,
            ClockMode::Wall => false,
        }
    }
}

/// Options of a replay.
#[derive(Debug, Clone, Default)]
pub struct ReplayOptions {
    /// The clock.
    pub clock: ClockMode,
    /// The SQLite file to use; default a temporary file deleted afterwards.
    pub db: Option<PathBuf>,
    /// Where `touch` tools create their files.
    pub touch_dir: Option<PathBuf>,
    /// Trace every durable fragment commit to standard error ([`CommitTrace`]), for crash tests.
    pub trace_commits: bool,
    /// The SQLite durability of the replay's store (default `full`, as the store's).
    pub durability: Durability,
    /// The consumer waits this many milliseconds (of the replay's clock) after taking each event (contract §6: the
    /// report's `requests`, `transcript`, `tool_runs` and `end_ms` do not change).
    pub consumer_delay_ms: u64,
    /// The consumer drops the event stream after taking this many events (contract §6.7); the report is then
    /// written from the store once the engine has settled every admitted call.
    pub drop_after_events: Option<usize>,
}

/// In virtual time, a replay still running this long after it started is stopped with a run-level error: 100
/// years. Only a run that waits for something that never comes (a tool with `hang: true` and no `cancel_at_ms` to
/// end it) gets there, and the paused clock gets there at once, since nothing else is due.
pub const VIRTUAL_TIME_LIMIT_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// A finished replay.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    /// The report.
    pub report: Report,
    /// 0 when the scenario ran, 2 when it could not be run.
    pub exit_code: i32,
}

impl ReplayOutcome {
    fn could_not_run(scenario: &str, error: impl Into<String>) -> Self {
        ReplayOutcome {
            report: Report::failed(scenario, error),
            exit_code: 2,
        }
    }
}

/// Loads and replays a scenario file on its own tokio runtime (paused for the virtual clock).
pub fn replay_file(path: &Path, options: &ReplayOptions) -> ReplayOutcome {
    let scenario = match Scenario::load(path) {
        Ok(scenario) => scenario,
        Err(error) => return ReplayOutcome::could_not_run("", error.to_string()),
    };
    replay_blocking(&scenario, options)
}

/// Replays a loaded scenario on its own tokio runtime.
pub fn replay_blocking(scenario: &Scenario, options: &ReplayOptions) -> ReplayOutcome {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    #[cfg(feature = "virtual-clock")]
    if options.clock.is_virtual() {
        builder.start_paused(true);
    }
    match builder.build() {
        Ok(runtime) => runtime.block_on(replay(scenario, options)),
        Err(error) => ReplayOutcome::could_not_run(&scenario.name, format!("cannot start a runtime: {error}")),
    }
}

/// Replays a loaded scenario on the current runtime. For deterministic reports the runtime must be a
/// current-thread runtime with a paused clock (see [`replay_blocking`]).
pub async fn replay(scenario: &Scenario, options: &ReplayOptions) -> ReplayOutcome {
    // Keep the temporary directory alive for the whole replay; it is deleted on drop.
    let temp_dir;
    let db_path = match &options.db {
        Some(path) => path.clone(),
        None => {
            temp_dir = match tempfile::tempdir() {
                Ok(dir) => dir,
                Err(error) => {
                    return ReplayOutcome::could_not_run(
                        &scenario.name,
                        format!("cannot create a temporary database: {error}"),
                    )
                }
            };
            temp_dir.path().join("replay.db")
        }
    };
    let sqlite_options = SqliteOptions {
        durability: options.durability,
        // On the virtual clock, writes complete within the poll that starts them, so reports are deterministic.
        inline: options.clock.is_virtual(),
        ..SqliteOptions::default()
    };
    let store = match SqliteStore::open(&db_path, sqlite_options) {
        Ok(store) => store,
        Err(error) => return ReplayOutcome::could_not_run(&scenario.name, error.to_string()),
    };
    // Wall-clock replays measure the engine, not tokio's timer resolution (see `timing`).
    let timing = if options.clock.is_virtual() {
        Timing::Timer
    } else {
        Timing::Precise
    };
    let mut toolbox = Toolbox::new();
    for spec in &scenario.tools {
        let tool = SimTool::new(spec.clone(), options.touch_dir.clone()).with_timing(timing);
        if let Err(error) = toolbox.register(tool) {
            return ReplayOutcome::could_not_run(&scenario.name, error.to_string());
        }
    }
    let mut store: Arc<dyn TranscriptStore> = Arc::new(store);
    if options.trace_commits {
        store = Arc::new(Layered::new(store, CommitTrace));
    }
    let session = match store.create_session(0).await {
        Ok(session) => session,
        Err(error) => return ReplayOutcome::could_not_run(&scenario.name, error.to_string()),
    };
    // Time 0 is the start of the run (on the wall clock, setting up the database is not part of it).
    let clock = TokioClock::starting_now();
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox)
        .hooks(Hooks::new().with(SimHooks::new(scenario.hooks.clone())))
        .config(scenario.config.engine_config())
        .clock(Arc::new(clock))
        .turn_ids(Arc::new(|request| format!("turn-{request}")))
        .build();

    let whole = options.clock.is_virtual();
    let now = || Ms::from_us(clock.now_us(), whole);
    let cancel = CancellationToken::new();
    let mut model = SimModel::new(scenario.turns.clone()).with_timing(timing);
    if let Some(ms) = scenario.cancel_at_ms {
        let at = clock.base() + std::time::Duration::from_millis(ms);
        tokio::spawn(cancel_at(cancel.clone(), at));
        model = model.with_cancel(ExternalCancel {
            token: cancel.clone(),
            at,
        });
    }
    let agent = Agent::new(engine, Arc::new(model));
    let events = agent.run(&session, UserMessage::new(scenario.prompt.clone()), cancel.clone());
    let time_limit = options
        .clock
        .is_virtual()
        .then(|| clock.base() + std::time::Duration::from_millis(VIRTUAL_TIME_LIMIT_MS));
    let (recorder, ending) = consume(events, options, time_limit, whole).await;
    let mut report = recorder.finish(&scenario.name);
    let stuck = ending == Ending::Stuck;
    if stuck {
        report.end_ms = now();
        report.error = Some(format!(
            "the run was stopped after {VIRTUAL_TIME_LIMIT_MS} ms of virtual time (100 years) without finishing: \
             a tool that hangs needs cancel_at_ms to end"
        ));
    } else if ending == Ending::Dropped {
        // The stream was dropped: the run ends when the engine has settled everything, not at an event taken.
        report.end_ms = now();
    }
    let written = async {
        let log = store.load_log(&session).await?;
        let runs = store.tool_runs(&session).await?;
        Ok::<_, headstart::store::StoreError>((log, runs))
    }
    .await;
    match written {
        Ok((log, runs)) => {
            report.transcript = log
                .iter()
                .map(|stored| TranscriptEntry::from_stored(stored, whole))
                .collect();
            report.tool_runs = runs.iter().map(|run| ToolRunReport::from_run(run, whole)).collect();
        }
        Err(error) => {
            report.error.get_or_insert_with(|| error.to_string());
        }
    }
    ReplayOutcome {
        report,
        exit_code: if stuck { 2 } else { 0 },
    }
}

/// Cancels the run at `at`, after the tool returns, timeouts and updates due at that instant (docs/scenario-format.md): one yield
/// lets the tasks woken at `at` run first. (When a model event is due then too, the simulated model fires the
/// cancellation itself, before that event.)
async fn cancel_at(cancel: CancellationToken, at: tokio::time::Instant) {
    tokio::time::sleep_until(at).await;
    tokio::task::yield_now().await;
    cancel.cancel();
}

/// How the replay's consumer stopped taking events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The stream ended (after `agent_end`).
    Finished,
    /// The consumer dropped the stream after `drop_after_events`, and the engine then settled.
    Dropped,
    /// The virtual-time limit passed first.
    Stuck,
}

/// Takes the run's events as the replay's consumer: recording each with the time the engine emitted it, waiting
/// `consumer_delay_ms` after each, dropping the stream after `drop_after_events` and then waiting for the engine
/// to settle. Returns the recorder and whether the run was stopped at the virtual-time limit.
async fn consume(
    mut events: EventStream,
    options: &ReplayOptions,
    time_limit: Option<tokio::time::Instant>,
    whole: bool,
) -> (Recorder, Ending) {
    let mut recorder = Recorder::default();
    let delay = std::time::Duration::from_millis(options.consumer_delay_ms);
    loop {
        if options
            .drop_after_events
            .is_some_and(|limit| recorder.events.len() >= limit)
        {
            let settled = events.settled();
            drop(events);
            let ending = tokio::select! {
                () = settled => Ending::Dropped,
                () = sleep_until_option(time_limit) => Ending::Stuck,
            };
            return (recorder, ending);
        }
        let next = tokio::select! {
            biased;
            () = sleep_until_option(time_limit) => return (recorder, Ending::Stuck),
            next = events.next_emitted() => next,
        };
        let Some(Emitted { at_us, event }) = next else {
            return (recorder, Ending::Finished);
        };
        recorder.record(&event, Ms::from_us(at_us, whole));
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }
}

async fn sleep_until_option(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Builds the report's event-derived parts as events arrive.
#[derive(Default)]
struct Recorder {
    events: Vec<EventReport>,
    requests: Vec<RequestReport>,
    error: Option<String>,
    end_ms: Ms,
}

impl Recorder {
    fn record(&mut self, event: &AgentEvent, at: Ms) {
        self.events.push(EventReport::from_event(event, at));
        match event {
            AgentEvent::ResponseStart { request } => self.requests.push(RequestReport {
                request: *request,
                started_ms: at,
                stream_end_ms: None,
                settled_ms: None,
                stop_reason: None,
                error: None,
            }),
            AgentEvent::MessageEnd { message, .. } if Role::of(message) == Role::Assistant => {
                // The last assistant fragment of a response is its terminal one.
                if let Some(request) = self.requests.last_mut() {
                    request.stream_end_ms = Some(at);
                }
            }
            AgentEvent::ResponseEnd { outcome, .. } => {
                if let Some(request) = self.requests.last_mut() {
                    request.settled_ms = Some(at);
                    request.stop_reason = Some(outcome.stop_reason);
                    request.error.clone_from(&outcome.error);
                }
            }
            AgentEvent::AgentEnd { stop } => {
                self.end_ms = at;
                if let AgentStop::Error(message) = stop {
                    self.error = Some(message.clone());
                }
            }
            _ => {}
        }
    }

    fn finish(self, scenario: &str) -> Report {
        Report {
            scenario: scenario.to_owned(),
            error: self.error,
            requests: self.requests,
            transcript: Vec::new(),
            tool_runs: Vec::new(),
            events: self.events,
            end_ms: self.end_ms,
        }
    }
}

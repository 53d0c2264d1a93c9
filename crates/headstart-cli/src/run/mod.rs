//! `headstart run` and `headstart resume`: the agent loop against a real provider, with the built-in tools, the
//! live view, the transcript in SQLite and, at the end, the time saved against end-of-stream batching computed from
//! the stored timings.
//!
//! The model and tool flags both share are `crate::agent`'s (`worker` takes them too); this file is the two
//! commands and the flags of their view.

#[cfg(test)]
mod tests;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use headstart::store::{SqliteOptions, SqliteStore};
use headstart::Clock;
use headstart::{
    AgentEvent, AgentStop, CancellationToken, EventStream, RecoveryPolicy, SessionId, SystemClock, TranscriptStore,
    UserMessage,
};
use headstart_providers::Recorder;
use headstart_timeline::{svg, Timeline};

use crate::agent::ModelArgs;
use crate::failure::{failed, Failure};
use crate::owner;
use crate::serve::ServeFlags;
use crate::store_url::StoreUrl;
use crate::view::{print_savings, View};

/// How `run` and `resume` show the run: the live view or plain lines, and a timeline.
#[derive(clap::Args)]
pub struct ViewArgs {
    /// Also draw the run as an SVG timeline, e.g. `--timeline run.svg`.
    #[arg(long, value_name = "OUT.svg")]
    timeline: Option<PathBuf>,
    /// Print plain lines instead of the live view (the default when stdout is not a terminal), e.g.
    /// `--no-progress`.
    #[arg(long)]
    no_progress: bool,
}

impl ViewArgs {
    fn live(&self) -> bool {
        !self.no_progress && std::io::stdout().is_terminal()
    }
}

/// Arguments of `headstart run`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  headstart run --provider anthropic --model claude-sonnet-4-5 \"What is in Cargo.toml?\"
  headstart run --provider openai --model gpt-4.1 --timeline run.svg \"Summarize README.md\"
  headstart run --provider openai-compatible --base-url http://127.0.0.1:8000/v1 --model qwen3 \"List src\"
  headstart run --provider gemini --model gemini-2.5-flash --session 0192… \"And now the tests?\"
  headstart run --provider anthropic --model claude-sonnet-4-5 --fetch --fetch-allow docs.rs \"What is new in tokio?\"")]
pub struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    view: ViewArgs,
    /// The SQLite transcript file (created if missing), e.g. `--db runs.db`.
    #[arg(long, default_value = "headstart.db", value_name = "PATH")]
    db: PathBuf,
    /// Continue this stored session instead of starting one, e.g. `--session 0192f3a4-…`.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Save every response's raw SSE stream, each event with its arrival time, to this file (for `headstart bench
    /// headroom`, `headstart convert` or a replay), e.g. `--record run.sse`.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// With --session: take the session over from the process that holds it, when that process is known to be
    /// gone or hung (without it, a session another process runs is refused, naming that process), e.g. `--force`.
    #[arg(long, requires = "session")]
    force: bool,
    #[command(flatten)]
    serve: ServeFlags,
    /// What to ask, e.g. `"Which crates does this workspace have?"`.
    prompt: String,
}

/// Arguments of `headstart resume`.
#[derive(clap::Args)]
#[command(after_help = "Example:
  headstart resume headstart.db --session 0192f3a4-… --provider anthropic --model claude-sonnet-4-5")]
pub struct ResumeArgs {
    /// The SQLite transcript file, e.g. `headstart.db`.
    db: PathBuf,
    /// The session to resume, e.g. `--session 0192f3a4-…`.
    #[arg(long, value_name = "ID")]
    session: String,
    /// Take the session over from the process that holds it, when that process is known to be gone or hung
    /// (without it, a session another process runs is refused, naming that process), e.g. `--force`.
    #[arg(long)]
    force: bool,
    /// Run calls of idempotent tools (all the built-ins) again instead of giving them the interrupted result,
    /// e.g. `--rerun-idempotent`.
    #[arg(long)]
    rerun_idempotent: bool,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    view: ViewArgs,
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| failed(format!("cannot start a runtime: {error}")))
}

/// Cancels `cancel` on Ctrl-C, so that running calls are settled and the transcript stays valid.
fn cancel_on_interrupt(cancel: &CancellationToken) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
}

/// Shows every event and returns why the run stopped.
async fn watch(mut events: EventStream, live: bool) -> AgentStop {
    let started = Instant::now();
    let mut view = View::new(live);
    let mut stop = AgentStop::Error("the run ended without agent_end".to_owned());
    while let Some(event) = events.next().await {
        view.event(&event, started.elapsed().as_secs_f64() * 1000.0);
        if let AgentEvent::AgentEnd { stop: end } = event {
            stop = end;
        }
    }
    view.finish();
    stop
}

/// The summary of what this run stored (messages after `after_seq`), the timeline SVG if asked for, and the
/// exit status the stop reason deserves.
async fn finish(
    store: &dyn TranscriptStore,
    session: &SessionId,
    after_seq: u64,
    stop: &AgentStop,
    view: &ViewArgs,
    db: &Path,
) -> Result<u8, Failure> {
    // A continued session holds earlier runs too, whose request numbers start again at 0: only this run counts.
    let log: Vec<_> = store
        .load_log(session)
        .await
        .map_err(failed)?
        .into_iter()
        .filter(|stored| stored.seq > after_seq)
        .collect();
    let runs: Vec<_> = store
        .tool_runs(session)
        .await
        .map_err(failed)?
        .into_iter()
        .filter(|run| run.fragment_seq > after_seq)
        .collect();
    let timeline = Timeline::from_store(format!("session {session}"), &log, &runs);
    print_savings(&timeline, &format!("{stop:?}"));
    if let Some(out) = &view.timeline {
        std::fs::write(out, svg::render(&timeline)).map_err(|error| failed(format!("{}: {error}", out.display())))?;
        println!("Timeline: {}", out.display());
    }
    println!(
        "Transcript: {} (session {session}); continue it with --session {session}",
        db.display()
    );
    Ok(match stop {
        AgentStop::Completed | AgentStop::Terminated | AgentStop::MaxRequests => 0,
        AgentStop::Cancelled => 130,
        AgentStop::ResponseFailed | AgentStop::Error(_) | AgentStop::Fenced(_) => {
            eprintln!("headstart: the run stopped: {stop:?}");
            1
        }
    })
}

/// The number of the last stored message of `session` (0 when it has none).
async fn last_seq(store: &dyn TranscriptStore, session: &SessionId) -> Result<u64, Failure> {
    Ok(store
        .load_log(session)
        .await
        .map_err(failed)?
        .last()
        .map_or(0, |stored| stored.seq))
}

/// `headstart run`; exit status 0 when the run completed, 2 for a usage error (a missing key), 1 otherwise.
pub fn run(args: &RunArgs) -> u8 {
    // The key is checked before any file is touched.
    if let Err(failure) = args.model.endpoint() {
        return failure.report("run");
    }
    let result = runtime().and_then(|runtime| {
        runtime.block_on(async {
            let (code, url) = run_async(args).await?;
            // Served after the run's ownership of its session is let go (another process may resume it).
            args.serve.linger(url.as_deref()).await;
            Ok(code)
        })
    });
    result.unwrap_or_else(|failure| failure.report("run"))
}

/// The run; its exit status and the URL of the server `--serve` started.
async fn run_async(args: &RunArgs) -> Result<(u8, Option<String>), Failure> {
    let store: Arc<dyn TranscriptStore> = Arc::new(
        SqliteStore::open(&args.db, SqliteOptions::default())
            .map_err(|error| failed(crate::store_url::damaged_hint(&error)))?,
    );
    // The session is this process's while the run lasts (held until this function returns).
    let (session, _owner) = match &args.session {
        None => {
            let session = store.create_session(SystemClock.now_us()).await.map_err(failed)?;
            let owner = owner::take(&args.db, &session, false).map_err(|not| failed(not.text()))?;
            (session, owner)
        }
        Some(id) => {
            let session = SessionId(id.clone());
            let known = store.sessions().await.map_err(failed)?;
            if !known.iter().any(|info| info.id == session) {
                return Err(Failure::Usage(format!("{} has no session {id}", args.db.display())));
            }
            // Taken before its calls are read: unfinished calls of a live run are that run's, not a crash's.
            let owner = owner::take(&args.db, &session, args.force).map_err(|not| failed(not.text()))?;
            if !store.unfinished_calls(&session).await.map_err(failed)?.is_empty() {
                return Err(Failure::Usage(format!(
                    "session {id} has calls interrupted by a crash: run `headstart resume {} --session {id}` first",
                    args.db.display()
                )));
            }
            (session, owner)
        }
    };
    let after_seq = last_seq(store.as_ref(), &session).await?;
    let record = match &args.record {
        Some(path) => Some(Recorder::create(path).map_err(|error| failed(format!("{}: {error}", path.display())))?),
        None => None,
    };
    let agent = args
        .model
        .parts(Some(&args.db), record)
        .await?
        .agent(Arc::clone(&store));
    println!(
        "headstart run: session {session}, {} tools",
        agent.engine().toolbox().len()
    );
    let url = args
        .serve
        .start(&StoreUrl::Sqlite(args.db.clone()))
        .await
        .map_err(failed)?;
    if let Some(url) = &url {
        println!("headstart run: the live view is at {url} (this session: /sessions/{session})");
    }
    let cancel = CancellationToken::new();
    cancel_on_interrupt(&cancel);
    let events = agent.run(&session, UserMessage::new(&args.prompt), cancel);
    let stop = watch(events, args.view.live()).await;
    let code = finish(store.as_ref(), &session, after_seq, &stop, &args.view, &args.db).await?;
    Ok((code, url))
}

/// `headstart resume`: recover the session's unfinished calls and continue its loop when it awaits an answer.
pub fn resume(args: &ResumeArgs) -> u8 {
    if let Err(failure) = args.model.endpoint() {
        return failure.report("resume");
    }
    let result = runtime().and_then(|runtime| runtime.block_on(resume_async(args)));
    result.unwrap_or_else(|failure| failure.report("resume"))
}

async fn resume_async(args: &ResumeArgs) -> Result<u8, Failure> {
    if !args.db.exists() {
        return Err(Failure::Usage(format!("{} does not exist", args.db.display())));
    }
    let store: Arc<dyn TranscriptStore> = Arc::new(
        SqliteStore::open(&args.db, SqliteOptions::default())
            .map_err(|error| failed(crate::store_url::damaged_hint(&error)))?,
    );
    let session = SessionId(args.session.clone());
    if !store
        .sessions()
        .await
        .map_err(failed)?
        .iter()
        .any(|info| info.id == session)
    {
        return Err(Failure::Usage(format!(
            "{} has no session {}",
            args.db.display(),
            args.session
        )));
    }
    // The session is this process's while it is recovered and continued (held until this function returns).
    let _owner = owner::take(&args.db, &session, args.force).map_err(|not| failed(not.text()))?;
    let agent = args.model.parts(Some(&args.db), None).await?.agent(Arc::clone(&store));
    let policy = if args.rerun_idempotent {
        RecoveryPolicy::ReExecuteIdempotent
    } else {
        RecoveryPolicy::FailAll
    };
    let cancel = CancellationToken::new();
    cancel_on_interrupt(&cancel);
    // The timeline shows what this command adds: the recovered results and the continued loop.
    let after_seq = last_seq(store.as_ref(), &session).await?;
    let resumed = agent
        .resume_after_crash(&session, policy, cancel)
        .await
        .map_err(failed)?;
    for call in &resumed.recovered {
        println!(
            "recovered {} ({}): {:?}, result #{}",
            call.call_id, call.tool_name, call.action, call.result_seq
        );
    }
    let Some(events) = resumed.events else {
        println!("session {session} is already answered: nothing to continue");
        return Ok(0);
    };
    let stop = watch(events, args.view.live()).await;
    finish(store.as_ref(), &session, after_seq, &stop, &args.view, &args.db).await
}

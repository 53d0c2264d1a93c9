//! `headstart run` and `headstart resume`: the agent loop against a real provider, with the built-in tools, the
//! live view, the transcript in SQLite and, at the end, the time saved against end-of-stream batching computed from
//! the stored timings.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use headstart::store::{SqliteOptions, SqliteStore};
use headstart::Clock;
use headstart::{
    Agent, AgentEvent, AgentStop, CancellationToken, Engine, EngineConfig, EventStream, RecoveryPolicy, SessionId,
    SystemClock, Tool, TranscriptStore, UserMessage,
};
use headstart_mcp::{McpServer, ToolPolicy};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::retry::RetryPolicy;
use headstart_providers::WireFormat;
use headstart_sim::timeline::Timeline;

use crate::builtin_tools;
use crate::owner;
use crate::timeline::svg;
use crate::view::{print_savings, View};

/// Exit status of a usage problem (a missing key, a bad flag combination), as clap uses.
const USAGE: u8 = 2;

/// The provider's API, as `--provider` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// OpenAI Chat Completions (`OPENAI_API_KEY`).
    Openai,
    /// OpenAI Responses (`OPENAI_API_KEY`).
    OpenaiResponses,
    /// Anthropic Messages (`ANTHROPIC_API_KEY`).
    Anthropic,
    /// Google Gemini (`GEMINI_API_KEY`).
    Gemini,
    /// Any server speaking Chat Completions (vLLM, Ollama, LM Studio, DeepSeek, ...): needs `--base-url`; the key
    /// comes from `--api-key-env`, or none is sent.
    OpenaiCompatible,
}

impl Provider {
    fn format(self) -> WireFormat {
        match self {
            Provider::Openai | Provider::OpenaiCompatible => WireFormat::OpenAiChat,
            Provider::OpenaiResponses => WireFormat::OpenAiResponses,
            Provider::Anthropic => WireFormat::Anthropic,
            Provider::Gemini => WireFormat::Gemini,
        }
    }
}

/// How the model is reached and how the loop runs: shared by `run` and `resume`.
#[derive(clap::Args)]
pub struct ModelArgs {
    /// The provider's API, e.g. `--provider anthropic`.
    #[arg(long, value_enum)]
    provider: Provider,
    /// The model, e.g. `--model claude-sonnet-4-5`, `--model gpt-4.1`, `--model gemini-2.5-flash`.
    #[arg(long)]
    model: String,
    /// The API base URL instead of the provider's public one, e.g. `--base-url http://127.0.0.1:8000/v1`.
    #[arg(long)]
    base_url: Option<String>,
    /// The environment variable holding the API key, e.g. `--api-key-env DEEPSEEK_API_KEY` (default:
    /// OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY; none for openai-compatible).
    #[arg(long, value_name = "NAME")]
    api_key_env: Option<String>,
    /// A system prompt, e.g. `--system "Answer in one paragraph."`.
    #[arg(long)]
    system: Option<String>,
    /// The loop stops after this many model requests, e.g. `--max-turns 8`.
    #[arg(long, default_value_t = 32, value_name = "N")]
    max_turns: u32,
    /// Retries of a request that fails before its first delta (refused connection, 408, 409, 429, 5xx), with
    /// backoff and Retry-After, e.g. `--retries 5`.
    #[arg(long, default_value_t = 2, value_name = "N")]
    retries: u32,
    /// Further requests after a stream broke once calls had been committed (their results are kept), e.g.
    /// `--continue-after-failure 0` to stop at the first broken stream.
    #[arg(long, default_value_t = 2, value_name = "N")]
    continue_after_failure: u32,
    /// The directory `read_file` and `list_dir` may see (default: the current directory), e.g. `--workdir .`.
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Also draw the run as an SVG timeline, e.g. `--timeline run.svg`.
    #[arg(long, value_name = "OUT.svg")]
    timeline: Option<PathBuf>,
    /// Print plain lines instead of the live view (the default when stdout is not a terminal), e.g.
    /// `--no-progress`.
    #[arg(long)]
    no_progress: bool,
    /// An MCP server whose tools the agent may call, started over stdio; repeatable. `NAME=` in front names it
    /// (default: the program's file name); the words after the program are its arguments (split on spaces), e.g.
    /// `--mcp "everything=npx -y @modelcontextprotocol/server-everything stdio"`.
    #[arg(long = "mcp", value_name = "[NAME=]COMMAND ARGS…")]
    mcp: Vec<String>,
    /// Trust the tool annotations of the MCP server NAME (read-only tools then start early), e.g.
    /// `--trusted-mcp everything`. Untrusted servers' tools are sync and non-idempotent.
    #[arg(long = "trusted-mcp", value_name = "NAME")]
    trusted_mcp: Vec<String>,
}

/// One `--mcp` value: the server's name and its command line.
#[derive(Debug, PartialEq, Eq)]
struct McpSpec {
    name: String,
    program: String,
    args: Vec<String>,
}

impl McpSpec {
    /// Reads `[NAME=]COMMAND ARGS…`.
    fn parse(text: &str) -> Result<McpSpec, Failure> {
        let (name, command) = match text.split_once('=') {
            Some((name, command)) if !name.is_empty() && !name.contains(char::is_whitespace) => {
                (Some(name.to_owned()), command)
            }
            _ => (None, text),
        };
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words
            .next()
            .ok_or_else(|| Failure::Usage(format!("--mcp {text:?}: no command")))?;
        let name = name.unwrap_or_else(|| {
            std::path::Path::new(&program)
                .file_stem()
                .map_or_else(|| program.clone(), |stem| stem.to_string_lossy().into_owned())
        });
        Ok(McpSpec {
            name,
            program,
            args: words.collect(),
        })
    }
}

/// Arguments of `headstart run`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  headstart run --provider anthropic --model claude-sonnet-4-5 \"What is in Cargo.toml?\"
  headstart run --provider openai --model gpt-4.1 --timeline run.svg \"Summarize README.md\"
  headstart run --provider openai-compatible --base-url http://127.0.0.1:8000/v1 --model qwen3 \"List src\"
  headstart run --provider gemini --model gemini-2.5-flash --session 0192… \"And now the tests?\"")]
pub struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The SQLite transcript file (created if missing), e.g. `--db runs.db`.
    #[arg(long, default_value = "headstart.db", value_name = "PATH")]
    db: PathBuf,
    /// Continue this stored session instead of starting one, e.g. `--session 0192f3a4-…`.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// With --session: take the session over from the process that holds it, when that process is known to be
    /// gone or hung (without it, a session another process runs is refused, naming that process), e.g. `--force`.
    #[arg(long, requires = "session")]
    force: bool,
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
}

/// Why a command could not do its work, and its exit status.
#[derive(Debug)]
enum Failure {
    /// Bad usage or a missing key: exit 2.
    Usage(String),
    /// Anything else: exit 1.
    Failed(String),
}

impl Failure {
    fn report(&self, command: &str) -> u8 {
        match self {
            Failure::Usage(message) => {
                eprintln!("headstart {command}: {message}");
                USAGE
            }
            Failure::Failed(message) => {
                eprintln!("headstart {command}: {message}");
                1
            }
        }
    }
}

fn failed(error: impl std::fmt::Display) -> Failure {
    Failure::Failed(error.to_string())
}

impl ModelArgs {
    /// The key variable and the base URL, checked before anything else so that a missing key is one line naming
    /// the variable (exit 2) and no file is touched.
    fn endpoint(&self) -> Result<(Option<String>, Option<&str>), Failure> {
        let key_env = match (&self.api_key_env, self.provider) {
            (Some(name), _) => Some(name.clone()),
            (None, Provider::OpenaiCompatible) => None,
            (None, _) => Some(self.provider.format().default_api_key_env().to_owned()),
        };
        if let Some(name) = &key_env {
            if std::env::var(name).map_or(true, |key| key.trim().is_empty()) {
                return Err(Failure::Usage(format!(
                    "{name} is not set (the API key; --api-key-env NAME reads another variable)"
                )));
            }
        }
        if self.base_url.is_none() && self.provider == Provider::OpenaiCompatible {
            return Err(Failure::Usage(
                "--provider openai-compatible needs --base-url".to_owned(),
            ));
        }
        Ok((key_env, self.base_url.as_deref()))
    }

    /// The model client.
    fn model(&self) -> Result<HttpModel, Failure> {
        let (key_env, base_url) = self.endpoint()?;
        let mut config = HttpModelConfig::new(self.provider.format(), &self.model).with_api_key_env(key_env.as_deref());
        if let Some(url) = base_url {
            config = config.with_base_url(url);
        }
        config.system.clone_from(&self.system);
        // OpenAI finishes call N before it starts call N+1, so N may run at once; a compatible server might not.
        config.convert.seal_on_next_index = self.provider == Provider::Openai;
        config.retry = RetryPolicy {
            max_retries: self.retries,
            ..RetryPolicy::default()
        };
        HttpModel::new(config).map_err(failed)
    }

    /// The tools of the `--mcp` servers, started now; `--trusted-mcp` names must be among them.
    async fn mcp_tools(&self) -> Result<Vec<Arc<dyn Tool>>, Failure> {
        let specs = self
            .mcp
            .iter()
            .map(|text| McpSpec::parse(text))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(unknown) = self
            .trusted_mcp
            .iter()
            .find(|name| !specs.iter().any(|spec| &spec.name == *name))
        {
            return Err(Failure::Usage(format!(
                "--trusted-mcp {unknown}: no --mcp server has that name"
            )));
        }
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for spec in specs {
            let mut command = tokio::process::Command::new(&spec.program);
            command.args(&spec.args);
            let server = McpServer::stdio(spec.name.clone(), command).await.map_err(failed)?;
            let policy = if self.trusted_mcp.contains(&spec.name) {
                ToolPolicy::trusted()
            } else {
                ToolPolicy::untrusted()
            };
            for tool in server.tools(&policy).await.map_err(failed)? {
                tools.push(Arc::new(tool));
            }
        }
        Ok(tools)
    }

    /// The agent: the model, the built-in tools plus `extra` (where MCP servers' tools plug in), the engine
    /// continuing after failed streams as `--continue-after-failure` allows.
    fn agent(&self, store: Arc<dyn TranscriptStore>, extra: Vec<Arc<dyn Tool>>) -> Result<Agent, Failure> {
        let model = self.model()?;
        let workdir = match &self.workdir {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(failed)?,
        };
        let toolbox = builtin_tools::toolbox(&workdir, extra).map_err(Failure::Failed)?;
        let config = EngineConfig::default()
            .max_turns(self.max_turns)
            .continue_after_failed_stream((self.continue_after_failure > 0).then_some(self.continue_after_failure));
        let engine = Engine::builder(store).toolbox(toolbox).config(config).build();
        Ok(Agent::new(engine, Arc::new(model)))
    }
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
    args: &ModelArgs,
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
    if let Some(out) = &args.timeline {
        std::fs::write(out, svg::render(&timeline)).map_err(|error| failed(format!("{}: {error}", out.display())))?;
        println!("Timeline: {}", out.display());
    }
    println!(
        "Transcript: {} (session {session}); continue it with --session {session}",
        db.display()
    );
    Ok(match stop {
        AgentStop::Completed | AgentStop::Terminated | AgentStop::MaxTurns => 0,
        AgentStop::Cancelled => 130,
        AgentStop::ResponseFailed | AgentStop::Error(_) | AgentStop::Fenced(_) => {
            eprintln!("headstart: the run stopped: {stop:?}");
            1
        }
    })
}

fn live(args: &ModelArgs) -> bool {
    !args.no_progress && std::io::stdout().is_terminal()
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
    let result = runtime().and_then(|runtime| runtime.block_on(run_async(args)));
    result.unwrap_or_else(|failure| failure.report("run"))
}

async fn run_async(args: &RunArgs) -> Result<u8, Failure> {
    let store: Arc<dyn TranscriptStore> =
        Arc::new(SqliteStore::open(&args.db, SqliteOptions::default()).map_err(failed)?);
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
    let agent = args.model.agent(Arc::clone(&store), args.model.mcp_tools().await?)?;
    println!(
        "headstart run: session {session}, {} tools",
        agent.engine().toolbox().len()
    );
    let cancel = CancellationToken::new();
    cancel_on_interrupt(&cancel);
    let events = agent.run(&session, UserMessage::new(&args.prompt), cancel);
    let stop = watch(events, live(&args.model)).await;
    finish(store.as_ref(), &session, after_seq, &stop, &args.model, &args.db).await
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
    let store: Arc<dyn TranscriptStore> =
        Arc::new(SqliteStore::open(&args.db, SqliteOptions::default()).map_err(failed)?);
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
    let agent = args.model.agent(Arc::clone(&store), args.model.mcp_tools().await?)?;
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
    let stop = watch(events, live(&args.model)).await;
    finish(store.as_ref(), &session, after_seq, &stop, &args.model, &args.db).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_specs_name_the_server_and_split_its_command() {
        let spec = McpSpec::parse("everything=npx -y @modelcontextprotocol/server-everything stdio").expect("valid");
        assert_eq!(spec.name, "everything");
        assert_eq!(spec.program, "npx");
        assert_eq!(spec.args, ["-y", "@modelcontextprotocol/server-everything", "stdio"]);
        let spec = McpSpec::parse("/usr/bin/mcp-files --root .").expect("valid");
        assert_eq!(spec.name, "mcp-files");
        assert_eq!(spec.args, ["--root", "."]);
        // An `=` inside an argument does not name the server.
        let spec = McpSpec::parse("srv --opt=1").expect("valid");
        assert_eq!(spec.name, "srv");
        assert!(matches!(McpSpec::parse("  "), Err(Failure::Usage(_))));
        assert!(matches!(McpSpec::parse("name="), Err(Failure::Usage(_))));
    }
}

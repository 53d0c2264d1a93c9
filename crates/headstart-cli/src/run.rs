//! `headstart run` and `headstart resume`: the agent loop against a real provider, with the built-in tools, the
//! live view, the transcript in SQLite and, at the end, the time saved against end-of-stream batching computed from
//! the stored timings.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use headstart::store::{SqliteOptions, SqliteStore};
use headstart::Clock;
use headstart::{
    Agent, AgentEvent, AgentStop, CancellationToken, Engine, EngineConfig, EventStream, RecoveryPolicy, SessionId,
    SystemClock, Tool, TranscriptStore, UserMessage,
};
use headstart_mcp::{McpLimits, McpServer, ToolPolicy};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::retry::RetryPolicy;
use headstart_providers::WireFormat;
use headstart_sim::timeline::Timeline;

use crate::builtin_tools::{self, fetch_policy::normalize_host, BuiltinConfig, FetchPolicy};
use crate::owner;
use crate::timeline::svg;
use crate::view::{print_savings, View};
use crate::visible::{visible, Lines};

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
    /// The loop stops after this many model requests, e.g. `--max-requests 8` (`--max-turns`, its old name, still
    /// works).
    #[arg(long, alias = "max-turns", default_value_t = 32, value_name = "N")]
    max_requests: u32,
    /// At most this many tool calls of one response run; the calls past it get an error result and never run
    /// (contract §4.6.4), e.g. `--max-calls-per-response 32`.
    #[arg(long, default_value_t = headstart::DEFAULT_MAX_CALLS_PER_RESPONSE, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_calls_per_response: usize,
    /// At most this many tool bodies run at once (contract §4.6), e.g. `--max-in-flight 4`.
    #[arg(long, default_value_t = headstart::DEFAULT_MAX_IN_FLIGHT, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_in_flight: usize,
    /// Retries of a request that fails before its first delta (refused connection, 408, 409, 429, 5xx), with
    /// backoff and Retry-After, e.g. `--retries 5`.
    #[arg(long, default_value_t = 2, value_name = "N")]
    retries: u32,
    /// The longest one model response may take, from the request to its last event, whatever keeps arriving
    /// (keep-alives, slow deltas), e.g. `--response-timeout 1800` for a slow reasoning model. Not retried.
    #[arg(long, default_value_t = 600, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    response_timeout: u64,
    /// The longest wait for the next event of a streaming response; keep-alive comments do not count, e.g.
    /// `--idle-timeout 300` for a gateway that sends only keep-alives while the model thinks.
    #[arg(long, default_value_t = 120, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
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
    /// Seconds an MCP server has to answer `initialize`, and again to list all its tools (every page), before the
    /// run stops with an error naming the server, e.g. `--mcp-timeout 10`.
    #[arg(long, value_name = "SECS", default_value_t = McpLimits::default().initialize_timeout.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..))]
    mcp_timeout: u64,
    /// Seconds each MCP tool call may take; past it the call fails (the run goes on) and the server is sent
    /// notifications/cancelled, e.g. `--mcp-call-timeout 600`.
    #[arg(long, value_name = "SECS", default_value_t = McpLimits::default().call_timeout.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..))]
    mcp_call_timeout: u64,
    /// A variable of headstart's environment to pass to the MCP servers, which start with a clean environment
    /// (only HOME, LOGNAME, PATH, SHELL, TERM, USER); repeatable. `SERVER:NAME` passes it to that server only,
    /// e.g. `--mcp-env GITHUB_TOKEN` or `--mcp-env github:GITHUB_TOKEN`.
    #[arg(long = "mcp-env", value_name = "[SERVER:]NAME")]
    mcp_env: Vec<String>,
    /// Offer the model `fetch_url` (HTTP GET; off by default): public addresses only, at most 5 redirects within
    /// the same host, 256 KiB of body, 30 s in all, e.g. `--fetch`.
    #[arg(long)]
    fetch: bool,
    /// Let `fetch_url` reach loopback, private, link-local and other non-public addresses too (needs --fetch),
    /// e.g. `--fetch --fetch-allow-private` for a service on 127.0.0.1.
    #[arg(long, requires = "fetch")]
    fetch_allow_private: bool,
    /// Let `fetch_url` reach only this host; repeatable (needs --fetch), e.g. `--fetch --fetch-allow docs.rs
    /// --fetch-allow crates.io`.
    #[arg(long = "fetch-allow", value_name = "HOST", requires = "fetch")]
    fetch_allow: Vec<String>,
    /// Let `read_file` read secrets, refused by default (.env, .env.*, *.pem, *.key, id_rsa*, .netrc, .pgpass,
    /// .git-credentials, .npmrc, .pypirc, files under .ssh/.aws/.docker/.kube, ...), e.g. `--read-secrets`.
    #[arg(long)]
    read_secrets: bool,
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

/// One `--mcp-env` value: a variable passed to one server, or to all.
#[derive(Debug, PartialEq, Eq)]
struct McpEnv {
    server: Option<String>,
    name: String,
}

impl McpEnv {
    /// Reads `[SERVER:]NAME`.
    fn parse(text: &str) -> Result<McpEnv, Failure> {
        let (server, name) = match text.split_once(':') {
            Some((server, name)) => (Some(server.to_owned()), name),
            None => (None, text),
        };
        if name.is_empty() || name.contains(['=', '\0']) || server.as_deref() == Some("") {
            return Err(Failure::Usage(format!(
                "--mcp-env {text:?}: expected NAME or SERVER:NAME, e.g. --mcp-env github:GITHUB_TOKEN"
            )));
        }
        Ok(McpEnv {
            server,
            name: name.to_owned(),
        })
    }

    fn is_for(&self, server: &str) -> bool {
        self.server.as_deref().is_none_or(|only| only == server)
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
            // A message may quote a provider's or a server's words: made visible, never printed raw.
            Failure::Usage(message) => {
                eprintln!("headstart {command}: {}", visible(message, Lines::Keep));
                USAGE
            }
            Failure::Failed(message) => {
                eprintln!("headstart {command}: {}", visible(message, Lines::Keep));
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
        config.response_timeout = Duration::from_secs(self.response_timeout);
        config.idle_timeout = Duration::from_secs(self.idle_timeout);
        HttpModel::new(config).map_err(failed)
    }

    /// The limits `--mcp-timeout` and `--mcp-call-timeout` set; the rest are headstart-mcp's defaults.
    fn mcp_limits(&self) -> McpLimits {
        McpLimits {
            initialize_timeout: Duration::from_secs(self.mcp_timeout),
            list_timeout: Duration::from_secs(self.mcp_timeout),
            call_timeout: Duration::from_secs(self.mcp_call_timeout),
            ..McpLimits::default()
        }
    }

    /// The tools of the `--mcp` servers, started now; `--trusted-mcp` and `--mcp-env` server names must be among
    /// them, and every `--mcp-env` variable set.
    async fn mcp_tools(&self) -> Result<Vec<Arc<dyn Tool>>, Failure> {
        let specs = self
            .mcp
            .iter()
            .map(|text| McpSpec::parse(text))
            .collect::<Result<Vec<_>, _>>()?;
        let known = |name: &str| specs.iter().any(|spec| spec.name == name);
        if let Some(unknown) = self.trusted_mcp.iter().find(|name| !known(name)) {
            return Err(Failure::Usage(format!(
                "--trusted-mcp {unknown}: no --mcp server has that name"
            )));
        }
        let mut passed = Vec::with_capacity(self.mcp_env.len());
        for text in &self.mcp_env {
            let pass = McpEnv::parse(text)?;
            if let Some(server) = pass.server.as_deref().filter(|server| !known(server)) {
                return Err(Failure::Usage(format!(
                    "--mcp-env {text}: no --mcp server is named {server}"
                )));
            }
            let value = std::env::var_os(&pass.name)
                .ok_or_else(|| Failure::Usage(format!("--mcp-env {text}: {} is not set", pass.name)))?;
            passed.push((pass, value));
        }
        let limits = self.mcp_limits();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for spec in specs {
            let mut command = tokio::process::Command::new(&spec.program);
            command.args(&spec.args);
            for (pass, value) in passed.iter().filter(|(pass, _)| pass.is_for(&spec.name)) {
                command.env(&pass.name, value);
            }
            let server = McpServer::stdio_with_limits(spec.name.clone(), command, limits.clone())
                .await
                .map_err(failed)?;
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

    /// What the built-in tools may do: `--workdir`, `--read-secrets`, the `--fetch` flags; `transcript` is the
    /// database file they must not read.
    fn builtin_config(&self, transcript: &Path) -> Result<BuiltinConfig, Failure> {
        let fetch = if self.fetch {
            let allowed_hosts = self
                .fetch_allow
                .iter()
                .map(|host| {
                    normalize_host(host)
                        .ok_or_else(|| Failure::Usage(format!("--fetch-allow {host:?}: not a host name or address")))
                })
                .collect::<Result<_, _>>()?;
            Some(FetchPolicy {
                allow_private: self.fetch_allow_private,
                allowed_hosts,
            })
        } else {
            None
        };
        Ok(BuiltinConfig {
            workdir: match &self.workdir {
                Some(dir) => dir.clone(),
                None => std::env::current_dir().map_err(failed)?,
            },
            transcript: Some(transcript.to_path_buf()),
            read_secrets: self.read_secrets,
            fetch,
        })
    }

    /// The agent: the model, the built-in tools plus `extra` (where MCP servers' tools plug in), the engine
    /// continuing after failed streams as `--continue-after-failure` allows; `transcript` is the database file.
    fn agent(
        &self,
        store: Arc<dyn TranscriptStore>,
        extra: Vec<Arc<dyn Tool>>,
        transcript: &Path,
    ) -> Result<Agent, Failure> {
        let model = self.model()?;
        let toolbox = builtin_tools::toolbox(&self.builtin_config(transcript)?, extra).map_err(Failure::Failed)?;
        let config = EngineConfig::default()
            .max_requests(self.max_requests)
            .max_calls_per_response(Some(self.max_calls_per_response))
            .max_in_flight(Some(self.max_in_flight))
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
        AgentStop::Completed | AgentStop::Terminated | AgentStop::MaxRequests => 0,
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
    let agent = args
        .model
        .agent(Arc::clone(&store), args.model.mcp_tools().await?, &args.db)?;
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
    let agent = args
        .model
        .agent(Arc::clone(&store), args.model.mcp_tools().await?, &args.db)?;
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

    #[test]
    fn mcp_env_names_a_variable_for_all_servers_or_one() {
        let all = McpEnv::parse("GITHUB_TOKEN").expect("valid");
        assert_eq!(all.server, None);
        assert!(all.is_for("github") && all.is_for("files"));
        let one = McpEnv::parse("github:GITHUB_TOKEN").expect("valid");
        assert_eq!(one.name, "GITHUB_TOKEN");
        assert!(one.is_for("github") && !one.is_for("files"));
        for bad in ["", "github:", ":NAME", "NAME=value"] {
            assert!(matches!(McpEnv::parse(bad), Err(Failure::Usage(_))), "{bad:?}");
        }
    }

    #[test]
    fn max_requests_keeps_its_old_spelling_as_a_hidden_alias() {
        use clap::{CommandFactory, FromArgMatches};
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let parse = |flag: &str| {
            let matches = Cli::command().try_get_matches_from([
                "headstart",
                "--provider",
                "openai",
                "--model",
                "m",
                flag,
                "3",
                "hi",
            ]);
            Cli::from_arg_matches(&matches.expect("parses"))
                .expect("valid")
                .run
                .model
                .max_requests
        };
        assert_eq!((parse("--max-requests"), parse("--max-turns")), (3, 3));
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains("--max-requests") && !help.contains("--max-turns <"),
            "{help}"
        );
    }
}

//! How the model is reached and how the loop runs, shared by `run` and `resume`: the flags, and the model client,
//! MCP tools, built-in tools and agent they describe.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use headstart::{Agent, Engine, EngineConfig, Tool, TranscriptStore};
use headstart_mcp::{McpLimits, McpServer, ToolPolicy};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::retry::RetryPolicy;
use headstart_providers::WireFormat;

use super::failure::{failed, Failure};
use super::mcp_flags::{McpEnv, McpSpec};
use crate::builtin_tools::{self, fetch_policy::normalize_host, BuiltinConfig, FetchPolicy};

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
    pub(super) max_requests: u32,
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
    pub(super) timeline: Option<PathBuf>,
    /// Print plain lines instead of the live view (the default when stdout is not a terminal), e.g.
    /// `--no-progress`.
    #[arg(long)]
    pub(super) no_progress: bool,
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

impl ModelArgs {
    /// The key variable and the base URL, checked before anything else so that a missing key is one line naming
    /// the variable (exit 2) and no file is touched.
    pub(super) fn endpoint(&self) -> Result<(Option<String>, Option<&str>), Failure> {
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
    pub(super) async fn mcp_tools(&self) -> Result<Vec<Arc<dyn Tool>>, Failure> {
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
    pub(super) fn agent(
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

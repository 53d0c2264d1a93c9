//! The flags that say how the model is reached and which tools it gets, one struct shared by `run`, `resume` and
//! `worker`, and the check of the model's endpoint (its key) that comes before anything else.

use std::path::PathBuf;
use std::time::Duration;

use headstart_mcp::McpLimits;
use headstart_providers::{SealAt, WireFormat};

use crate::failure::Failure;

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
    /// The wire format the provider speaks.
    pub(super) fn format(self) -> WireFormat {
        match self {
            Provider::Openai | Provider::OpenaiCompatible => WireFormat::OpenAiChat,
            Provider::OpenaiResponses => WireFormat::OpenAiResponses,
            Provider::Anthropic => WireFormat::Anthropic,
            Provider::Gemini => WireFormat::Gemini,
        }
    }
}

/// How the model is reached, which tools it gets and how the loop runs: shared by `run`, `resume` and `worker`
/// (which makes `--provider` and `--model` optional, `--scenario` being its other choice).
#[derive(clap::Args)]
pub struct ModelArgs {
    /// The provider's API, e.g. `--provider anthropic`.
    #[arg(long, value_enum, required = true)]
    pub(super) provider: Option<Provider>,
    /// The model, e.g. `--model claude-sonnet-4-5`, `--model gpt-4.1`, `--model gemini-2.5-flash` (a worker's
    /// default: a session submitted with `--model` asks for its own).
    #[arg(long, required = true)]
    pub(super) model: Option<String>,
    /// The API base URL instead of the provider's public one, e.g. `--base-url http://127.0.0.1:8000/v1`.
    #[arg(long)]
    pub(super) base_url: Option<String>,
    /// The environment variable holding the API key, e.g. `--api-key-env DEEPSEEK_API_KEY` (default:
    /// OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY; none for openai-compatible).
    #[arg(long, value_name = "NAME")]
    pub(super) api_key_env: Option<String>,
    /// When a Chat Completions call is sealed and may start: `complete` (the default: once its arguments form a
    /// complete JSON object, the next call starts, or finish_reason arrives), `next-index`, or `finish` (only at
    /// finish_reason, for a server that interleaves calls), e.g. `--seal-at finish`. The other formats end each
    /// call explicitly.
    #[arg(long, value_name = "RULE", default_value_t = SealAt::Complete, value_parser = parse_seal_at)]
    pub(super) seal_at: SealAt,
    /// Declare the built-in tools async to the model (OpenAI Responses' async tool calling, GPT-6 Astra and later):
    /// the model goes on working after it calls one, and its result goes in the next request. Needs `--provider
    /// openai-responses`; an older model may refuse the request, e.g. `--provider openai-responses --model
    /// gpt-6-astra --provider-async`.
    #[arg(long)]
    pub(super) provider_async: bool,
    /// A system prompt, e.g. `--system "Answer in one paragraph."` (a worker's default: a session submitted with
    /// `--system` has its own).
    #[arg(long)]
    pub(super) system: Option<String>,
    /// The loop stops after this many model requests, e.g. `--max-requests 8` (`--max-turns`, its old name, still
    /// works).
    #[arg(long, alias = "max-turns", default_value_t = 32, value_name = "N")]
    pub(crate) max_requests: u32,
    /// At most this many tool calls of one response run; the calls past it get an error result and never run
    /// (contract §4.6.4), e.g. `--max-calls-per-response 32`.
    #[arg(long, default_value_t = headstart::DEFAULT_MAX_CALLS_PER_RESPONSE, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub(super) max_calls_per_response: usize,
    /// At most this many tool bodies run at once (contract §4.6), e.g. `--max-in-flight 4`.
    #[arg(long, default_value_t = headstart::DEFAULT_MAX_IN_FLIGHT, value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub(super) max_in_flight: usize,
    /// Retries of a request that fails before its first delta (refused connection, 408, 409, 429, 5xx), with
    /// backoff and Retry-After, e.g. `--retries 5`.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub(super) retries: u32,
    /// The longest one model response may take, from the request to its last event, whatever keeps arriving
    /// (keep-alives, slow deltas), e.g. `--response-timeout 1800` for a slow reasoning model. Not retried.
    #[arg(long, default_value_t = 600, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) response_timeout: u64,
    /// The longest wait for the next event of a streaming response; keep-alive comments do not count, e.g.
    /// `--idle-timeout 300` for a gateway that sends only keep-alives while the model thinks.
    #[arg(long, default_value_t = 120, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) idle_timeout: u64,
    /// Further requests after a stream broke once calls had been committed (their results are kept), e.g.
    /// `--continue-after-failure 0` to stop at the first broken stream.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub(super) continue_after_failure: u32,
    /// The directory `read_file` and `list_dir` may see (default: the current directory), e.g. `--workdir .`.
    #[arg(long, value_name = "DIR")]
    pub(super) workdir: Option<PathBuf>,
    /// An MCP server whose tools the agent may call, started over stdio; repeatable. `NAME=` in front names it
    /// (default: the program's file name); the words after the program are its arguments (split on spaces), e.g.
    /// `--mcp "everything=npx -y @modelcontextprotocol/server-everything stdio"`.
    #[arg(long = "mcp", value_name = "[NAME=]COMMAND ARGS…")]
    pub(super) mcp: Vec<String>,
    /// Trust the tool annotations of the MCP server NAME (read-only tools then start early), e.g.
    /// `--trusted-mcp everything`. Untrusted servers' tools are sync and non-idempotent.
    #[arg(long = "trusted-mcp", value_name = "NAME")]
    pub(super) trusted_mcp: Vec<String>,
    /// Seconds an MCP server has to answer `initialize`, and again to list all its tools (every page), before the
    /// run stops with an error naming the server, e.g. `--mcp-timeout 10`.
    #[arg(long, value_name = "SECS", default_value_t = crate::mcp::default_timeout_secs(),
        value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) mcp_timeout: u64,
    /// Seconds each MCP tool call may take; past it the call fails (the run goes on) and the server is sent
    /// notifications/cancelled, e.g. `--mcp-call-timeout 600`.
    #[arg(long, value_name = "SECS", default_value_t = McpLimits::default().call_timeout.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) mcp_call_timeout: u64,
    /// A variable of headstart's environment to pass to the MCP servers, which start with a clean environment
    /// (only HOME, LOGNAME, PATH, SHELL, TERM, USER); repeatable. `SERVER:NAME` passes it to that server only,
    /// e.g. `--mcp-env GITHUB_TOKEN` or `--mcp-env github:GITHUB_TOKEN`.
    #[arg(long = "mcp-env", value_name = "[SERVER:]NAME")]
    pub(super) mcp_env: Vec<String>,
    /// Offer the model `fetch_url` (HTTP GET; off by default): public addresses only, at most 5 redirects within
    /// the same host, 256 KiB of body, 30 s in all, e.g. `--fetch`.
    #[arg(long)]
    pub(super) fetch: bool,
    /// Let `fetch_url` reach loopback, private, link-local and other non-public addresses too (needs --fetch),
    /// e.g. `--fetch --fetch-allow-private` for a service on 127.0.0.1.
    #[arg(long, requires = "fetch")]
    pub(super) fetch_allow_private: bool,
    /// Let `fetch_url` reach only this host; repeatable (needs --fetch), e.g. `--fetch --fetch-allow docs.rs
    /// --fetch-allow crates.io`.
    #[arg(long = "fetch-allow", value_name = "HOST", requires = "fetch")]
    pub(super) fetch_allow: Vec<String>,
    /// Let `read_file` read secrets, refused by default (.env, .env.*, *.pem, *.key, id_rsa*, .netrc, .pgpass,
    /// .git-credentials, .npmrc, .pypirc, files under .ssh/.aws/.docker/.kube, ...), e.g. `--read-secrets`.
    #[arg(long)]
    pub(super) read_secrets: bool,
}

impl ModelArgs {
    /// The provider (clap requires it for `run` and `resume`; `worker` asks for it only without `--scenario`).
    pub(super) fn provider(&self) -> Result<Provider, Failure> {
        self.provider
            .ok_or_else(|| Failure::Usage("--provider is required (and --model with it)".to_owned()))
    }

    /// The model's name (clap requires `--model` with `--provider`, for `worker` too).
    pub(super) fn model_name(&self) -> Result<&str, Failure> {
        self.model
            .as_deref()
            .ok_or_else(|| Failure::Usage("--model is required with --provider".to_owned()))
    }

    /// The key variable and the base URL, checked before anything else so that a missing key is one line naming
    /// the variable (exit 2) and no file is touched.
    pub(crate) fn endpoint(&self) -> Result<(Option<String>, Option<&str>), Failure> {
        let provider = self.provider()?;
        let key_env = match (&self.api_key_env, provider) {
            (Some(name), _) => Some(name.clone()),
            (None, Provider::OpenaiCompatible) => None,
            (None, _) => Some(provider.format().default_api_key_env().to_owned()),
        };
        if let Some(name) = &key_env {
            if std::env::var(name).map_or(true, |key| key.trim().is_empty()) {
                return Err(Failure::Usage(format!(
                    "{name} is not set (the API key; --api-key-env NAME reads another variable)"
                )));
            }
        }
        if self.base_url.is_none() && provider == Provider::OpenaiCompatible {
            return Err(Failure::Usage(
                "--provider openai-compatible needs --base-url".to_owned(),
            ));
        }
        Ok((key_env, self.base_url.as_deref()))
    }

    /// The limits `--mcp-timeout` (as `mcp tools --timeout`) and `--mcp-call-timeout` set; the rest are
    /// headstart-mcp's defaults.
    pub(super) fn mcp_limits(&self) -> McpLimits {
        McpLimits {
            call_timeout: Duration::from_secs(self.mcp_call_timeout),
            ..crate::mcp::limits(self.mcp_timeout)
        }
    }
}

/// Parses `--seal-at`.
pub(crate) fn parse_seal_at(name: &str) -> Result<SealAt, String> {
    name.parse()
        .map_err(|error: headstart_providers::UnknownSealAt| error.to_string())
}

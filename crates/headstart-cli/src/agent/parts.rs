//! What the flags of [`ModelArgs`] build: the model client, the MCP servers' tools (servers started once), the
//! built-in tools, the engine's configuration, gathered in [`AgentParts`], from which `run` and `resume` make their
//! one agent and `worker` an engine per session.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use headstart::{Agent, Engine, EngineBuilder, EngineConfig, Tool, Toolbox, TranscriptStore};
use headstart_mcp::{McpServer, ToolPolicy};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::retry::RetryPolicy;
use headstart_providers::Recorder;

use super::args::{ModelArgs, Provider};
use super::mcp_flags::{McpEnv, McpSpec};
use crate::builtin_tools::{self, fetch_policy::normalize_host, BuiltinConfig, FetchPolicy};
use crate::failure::{failed, Failure};

/// The model client, the tools and the engine configuration the flags describe, built once: every engine made
/// from them shares the model's connections and the MCP servers (kept running while any of their tools is).
pub(crate) struct AgentParts {
    /// The model client.
    pub(crate) model: Arc<HttpModel>,
    /// The built-in tools and the MCP servers' tools.
    pub(crate) toolbox: Toolbox,
    /// The engine's limits and continuation.
    pub(crate) config: EngineConfig,
}

impl AgentParts {
    /// An engine on `store` with these tools and this configuration.
    pub(crate) fn engine(&self, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        Engine::builder(store)
            .toolbox(self.toolbox.clone())
            .config(self.config.clone())
    }

    /// The one agent of `run` and `resume`, on `store`.
    pub(crate) fn agent(&self, store: Arc<dyn TranscriptStore>) -> Agent {
        Agent::new(
            self.engine(store).build(),
            Arc::clone(&self.model) as Arc<dyn headstart::Model>,
        )
    }
}

impl ModelArgs {
    /// Builds the parts: the model client first (its key is read), then the MCP servers are started and the
    /// toolbox assembled. `transcript` is the SQLite file the file tools must not read (none for PostgreSQL).
    /// `record` receives every response's SSE events with their arrival times (`run --record`).
    pub(crate) async fn parts(
        &self,
        transcript: Option<&Path>,
        record: Option<Recorder>,
    ) -> Result<AgentParts, Failure> {
        let model = self.client(record)?;
        let extra = self.mcp_tools().await?;
        let toolbox = builtin_tools::toolbox(&self.builtin_config(transcript)?, extra).map_err(Failure::Failed)?;
        Ok(AgentParts {
            model: Arc::new(model),
            toolbox,
            config: self.engine_config(),
        })
    }

    /// The model client.
    fn client(&self, record: Option<Recorder>) -> Result<HttpModel, Failure> {
        let provider = self.provider()?;
        let (key_env, base_url) = self.endpoint()?;
        let mut config =
            HttpModelConfig::new(provider.format(), self.model_name()?).with_api_key_env(key_env.as_deref());
        if let Some(url) = base_url {
            config = config.with_base_url(url);
        }
        config.system.clone_from(&self.system);
        config.convert.seal_at = self.seal_at;
        if self.provider_async && provider != Provider::OpenaiResponses {
            return Err(Failure::Usage(
                "--provider-async needs --provider openai-responses (the only wire format with async tools)".to_owned(),
            ));
        }
        config.provider_async = self.provider_async;
        config.convert.record = record;
        config.retry = RetryPolicy {
            max_retries: self.retries,
            ..RetryPolicy::default()
        };
        config.response_timeout = Duration::from_secs(self.response_timeout);
        config.idle_timeout = Duration::from_secs(self.idle_timeout);
        HttpModel::new(config).map_err(failed)
    }

    /// The engine's configuration: the request, call and concurrency limits, continuation after a failed stream.
    fn engine_config(&self) -> EngineConfig {
        EngineConfig::default()
            .max_requests(self.max_requests)
            .max_calls_per_response(Some(self.max_calls_per_response))
            .max_in_flight(Some(self.max_in_flight))
            .continue_after_failed_stream((self.continue_after_failure > 0).then_some(self.continue_after_failure))
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
    /// database file they must not read, if there is one.
    fn builtin_config(&self, transcript: Option<&Path>) -> Result<BuiltinConfig, Failure> {
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
            transcript: transcript.map(Path::to_path_buf),
            read_secrets: self.read_secrets,
            fetch,
            provider_async: self.provider_async,
        })
    }
}

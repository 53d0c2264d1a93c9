//! The simulated agent of `headstart worker --scenario FILE`: a scenario's model and tools on the wall clock, as
//! `replay --clock wall` runs them, for tests and demos of a fleet; `--touch-dir` makes every tool body leave a
//! trace of each execution, and `HEADSTART_CRASH_AT` (`headstart_sim::crash_at`) makes the worker die at a named
//! instant of a session's work, for the resume suite.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use headstart::core::model::Message;
use headstart::layer::{Around, ToolMiddleware};
use headstart::store::{Layered, SessionSettings};
use headstart::{
    Arguments, DeltaStream, Engine, EngineBuilder, Hooks, Model, ModelError, ModelRequest, SessionId, Tool,
    ToolContext, ToolError, ToolResult, Toolbox, TranscriptStore,
};
use headstart_fleet::SessionSetup;
use headstart_sim::crash_at::{CrashAt, CrashPoint};
use headstart_sim::sim_model::SimModel;
use headstart_sim::sim_tools::{SimHooks, SimTool};
use headstart_sim::Scenario;

/// A scenario's tools, hooks and configuration for every session; its model for every request.
pub(super) struct ScenarioSetup {
    scenario: Scenario,
    model: Arc<dyn Model>,
    /// The touch directory and this worker's name (the line each touch appends).
    touch: Option<(PathBuf, String)>,
    /// Where the worker dies on purpose, if anywhere.
    crash: Option<CrashAt>,
}

impl ScenarioSetup {
    /// Runs `scenario`; with `touch` (a directory and the worker's name), every tool body appends the name to
    /// `DIR/<session>/<call id>` when it begins; with `crash`, the worker dies at its instant.
    pub(super) fn new(scenario: Scenario, touch: Option<(PathBuf, String)>, crash: Option<CrashAt>) -> Self {
        ScenarioSetup {
            model: Arc::new(ScenarioModel {
                model: SimModel::new(scenario.turns.clone()),
                crash: crash.clone(),
            }),
            scenario,
            touch,
            crash,
        }
    }
}

impl SessionSetup for ScenarioSetup {
    fn engine(&self, session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        let mut toolbox = Toolbox::new();
        for spec in &self.scenario.tools {
            let mut tool: Arc<dyn Tool> = Arc::new(SimTool::new(spec.clone(), None));
            if let Some((dir, worker)) = &self.touch {
                tool = Arc::new(Around::new(
                    tool,
                    Touch {
                        dir: dir.join(&session.0),
                        line: format!("{worker}\n"),
                    },
                ));
            }
            // Outside the touch: a body that dies has left its trace.
            if let Some(crash) = &self.crash {
                tool = Arc::new(Around::new(tool, crash.clone()));
            }
            let registered = toolbox.register_arc(tool);
            // Scenario loading already refused duplicate tool names, the only way registering fails.
            if let Err(error) = registered {
                eprintln!("headstart worker: {error}");
            }
        }
        let store: Arc<dyn TranscriptStore> = match &self.crash {
            Some(crash) => Arc::new(Layered::new(store, crash.clone())),
            None => store,
        };
        Engine::builder(store)
            .toolbox(toolbox)
            .hooks(Hooks::new().with(SimHooks::new(self.scenario.hooks.clone())))
            .config(self.scenario.config.engine_config())
    }

    /// The scenario's model, whatever the session was submitted with: its turns are the answers.
    fn model(&self, _session: &SessionId, _settings: &SessionSettings) -> Arc<dyn Model> {
        Arc::clone(&self.model)
    }
}

/// The scenario's model, answering from the stored context: the response after the `n`th stored assistant
/// message is the scenario's turn `n`, so a session resumed after a takeover goes on where it stopped (a response
/// cut short by a crash counts as given).
struct ScenarioModel {
    model: SimModel,
    /// Where the worker dies on purpose: `request` is checked here.
    crash: Option<CrashAt>,
}

#[async_trait]
impl Model for ScenarioModel {
    async fn stream(&self, mut request: ModelRequest) -> Result<DeltaStream, ModelError> {
        if let Some(crash) = &self.crash {
            if matches!(request.context.last(), Some(Message::ToolResult(_))) {
                crash.hit(CrashPoint::Request).await;
            }
        }
        let answered = request
            .context
            .iter()
            .filter(|message| matches!(message, Message::Assistant(_)))
            .count();
        request.request = u32::try_from(answered).unwrap_or(u32::MAX);
        self.model.stream(request).await
    }
}

/// Appends a line to `dir/<call id>` before the tool's body runs, so every execution of a call is visible (a
/// middleware of `headstart::layer`, so the tool keeps its name, schema and flags).
struct Touch {
    dir: PathBuf,
    line: String,
}

impl Touch {
    fn touch(&self, call_id: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(call_id))?;
        file.write_all(self.line.as_bytes())
    }
}

#[async_trait]
impl ToolMiddleware for Touch {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        self.touch(&context.call_id)
            .map_err(|error| ToolError::new(format!("touch failed: {error}")))?;
        next.execute(arguments, context).await
    }
}

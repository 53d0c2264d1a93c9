//! The [`Toolbox`]: the registry of tools, with each JSON Schema compiled once.

use std::collections::HashMap;
use std::sync::Arc;

use headstart_core::{ToolCall, ToolDefinition};
use jsonschema::Validator;

use crate::config::ExecutionMode;
use crate::tools::layer::ToolLayer;
use crate::tools::tool::{Arguments, Tool};

/// A tool schema that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolboxError {
    /// The tool's `parameters` is not a valid JSON Schema.
    #[error("tool {name}: invalid parameters schema: {message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// The compiler's message.
        message: String,
    },
    /// Two tools share a name.
    #[error("tool {0} is registered twice")]
    Duplicate(String),
}

struct Entry {
    tool: Arc<dyn Tool>,
    validator: Validator,
}

/// A layer the toolbox keeps, to wrap the tools registered after it too.
type SharedLayer = Arc<dyn ToolLayer + Send + Sync>;

/// The tools an agent can call, by name.
#[derive(Default, Clone)]
pub struct Toolbox {
    entries: HashMap<String, Arc<Entry>>,
    order: Vec<String>,
    /// Every layer applied so far, in order: each tool is wrapped by all of them, whenever it was registered.
    layers: Vec<SharedLayer>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.order)
            .field("layers", &self.layers.len())
            .finish()
    }
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, compiling its schema.
    pub fn register(&mut self, tool: impl Tool + 'static) -> Result<&mut Self, ToolboxError> {
        self.register_arc(Arc::new(tool))
    }

    /// Adds a shared tool, compiling its schema. The layers applied so far wrap it, as they wrap every other tool.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<&mut Self, ToolboxError> {
        let name = tool.spec().name.clone();
        if self.entries.contains_key(&name) {
            return Err(ToolboxError::Duplicate(name));
        }
        let validator =
            jsonschema::validator_for(&tool.spec().parameters).map_err(|err| ToolboxError::InvalidSchema {
                name: name.clone(),
                message: err.to_string(),
            })?;
        let tool = self.layers.iter().fold(tool, |tool, layer| layer.layer(tool));
        self.entries.insert(name.clone(), Arc::new(Entry { tool, validator }));
        self.order.push(name);
        Ok(self)
    }

    /// Builder-style [`Toolbox::register`].
    pub fn with(mut self, tool: impl Tool + 'static) -> Result<Self, ToolboxError> {
        self.register(tool)?;
        Ok(self)
    }

    /// Wraps every tool with `layer` (see [`crate::layer`]): those registered so far and those registered later
    /// alike, as tower's `ServiceBuilder` wraps whatever service it is given. A layer applied later wraps the ones
    /// applied before it, whatever the order of registrations in between.
    pub fn layer(mut self, layer: impl ToolLayer + Send + Sync + 'static) -> Self {
        for entry in self.entries.values_mut() {
            *entry = Arc::new(Entry {
                tool: layer.layer(Arc::clone(&entry.tool)),
                validator: entry.validator.clone(),
            });
        }
        self.layers.push(Arc::new(layer));
        self
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.entries.get(name).map(|entry| &entry.tool)
    }

    /// Whether a call is early, may start before the stream ends (contract §1.4): its tool is
    /// early ([`ToolSpec::early`](crate::ToolSpec::early)) or provider-async ([`ToolSpec::provider_async`](crate::ToolSpec::provider_async)), or the stream flagged the call
    /// (`"async": true` on its `toolcall_start`).
    pub fn is_early(&self, name: &str, flagged_early: bool) -> bool {
        flagged_early
            || self
                .get(name)
                .is_some_and(|tool| tool.spec().early || tool.spec().provider_async)
    }

    /// The name [`Toolbox::is_early`] had before issue 20.
    #[deprecated(note = "renamed to `Toolbox::is_early`")]
    pub fn is_early_eligible(&self, name: &str, flagged_async: bool) -> bool {
        self.is_early(name, flagged_async)
    }

    /// Validates arguments against the tool's schema; `Err` lists every violation as `<path>: <message>`.
    pub(crate) fn validate(&self, name: &str, arguments: &Arguments) -> Result<(), Vec<String>> {
        let Some(entry) = self.entries.get(name) else {
            return Ok(());
        };
        let instance = serde_json::Value::Object(arguments.clone());
        let violations: Vec<String> = entry
            .validator
            .iter_errors(&instance)
            .map(|error| {
                let path = error.instance_path().to_string();
                let path = if path.is_empty() { "/".to_owned() } else { path };
                format!("{path}: {error}")
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    /// The tools as the model sees them, in registration order.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.order
            .iter()
            .filter_map(|name| self.entries.get(name))
            .map(|entry| ToolDefinition {
                name: entry.tool.spec().name.clone(),
                description: entry.tool.spec().description.clone(),
                parameters: entry.tool.spec().parameters.clone(),
                provider_async: entry.tool.spec().provider_async,
            })
            .collect()
    }

    /// Whether a call's result may reach the model in a later request than the next (contract §3.7.5): its tool is
    /// provider-async and the provider marked the call so, letting the model go on without it. Both are needed: the
    /// marker alone is the provider's word, and a tool the application did not declare waits as usual.
    pub(crate) fn delivers_later(&self, call: &ToolCall) -> bool {
        call.provider_async && self.get(&call.name).is_some_and(|tool| tool.spec().provider_async)
    }

    /// Whether a call's tool fences its batch (contract §4.4).
    pub(crate) fn fences(&self, call: &ToolCall) -> bool {
        self.get(&call.name)
            .is_some_and(|tool| tool.spec().execution_mode == ExecutionMode::Sequential)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use schemars::JsonSchema;
    use serde::Deserialize;

    use async_trait::async_trait;

    use super::Toolbox;
    use crate::tools::error::ToolError;
    use crate::tools::output::ToolOutput;
    use crate::tools::spec::ToolSpec;
    use crate::tools::tool::{Arguments, Tool, ToolContext};
    use crate::tools::typed::tests::{arguments, ReadArgs};
    use crate::tools::typed::tool_fn;

    #[derive(Deserialize, JsonSchema)]
    struct NoArguments {}

    /// A layer that wraps a tool's text output in `<name>(…)`.
    fn wrapping(name: &'static str) -> impl Fn(Arc<dyn Tool>) -> Arc<dyn Tool> + Send + Sync + 'static {
        move |inner: Arc<dyn Tool>| -> Arc<dyn Tool> {
            let tool_name = inner.spec().name.clone();
            let wrapped = tool_fn(tool_name, move |_: NoArguments, context: ToolContext| {
                let inner = Arc::clone(&inner);
                async move {
                    let output = inner.execute(Arguments::new(), context).await?;
                    let text = headstart_core::model::joined_text(&output.content);
                    Ok(ToolOutput::text(format!("{name}({text})")))
                }
            });
            Arc::new(wrapped)
        }
    }

    fn answering(name: &'static str) -> impl Tool {
        tool_fn(name, move |_: NoArguments, _| async move { Ok(name) })
    }

    async fn output(toolbox: &Toolbox, name: &str) -> String {
        let tool = toolbox.get(name).expect("registered");
        let output = tool
            .execute(Arguments::new(), ToolContext::detached("c1"))
            .await
            .expect("runs");
        headstart_core::model::joined_text(&output.content)
    }

    #[tokio::test]
    async fn layers_wrap_every_tool_whatever_the_order_of_registration() {
        let toolbox = Toolbox::new()
            .with(answering("before"))
            .expect("registered")
            .layer(wrapping("inner"))
            .with(answering("between"))
            .expect("registered")
            .layer(wrapping("outer"))
            .with(answering("after"))
            .expect("registered");
        for name in ["before", "between", "after"] {
            assert_eq!(output(&toolbox, name).await, format!("outer(inner({name}))"));
        }
        assert_eq!(toolbox.definitions().len(), 3);
    }

    #[test]
    fn the_schema_has_defs_and_compiles_and_validates() {
        let tool = tool_fn("read", |args: ReadArgs, _| async move {
            let lines = args.lines.map_or(0, |range| range.to - range.from);
            Ok(format!("{}: {lines} lines", args.path))
        });
        let schema = tool.spec().parameters.clone();
        assert!(schema.get("$schema").is_none());
        assert!(schema["$defs"]["Range"].is_object(), "{schema}");
        let toolbox = Toolbox::new().with(tool).expect("the schema compiles");
        assert!(toolbox
            .validate("read", &arguments(serde_json::json!({"path": "a"})))
            .is_ok());
        let bad = arguments(serde_json::json!({"path": "a", "lines": {"from": "x", "to": 2}}));
        let violations = toolbox.validate("read", &bad).expect_err("a string is not a u32");
        // `Option<Range>` is an `anyOf` over the `$defs` reference and null: the reference resolved and failed.
        assert!(
            violations[0].starts_with("/lines: ") && violations[0].contains("anyOf"),
            "{violations:?}"
        );
    }

    /// An early tool.
    struct Lookup(ToolSpec);

    impl Lookup {
        fn new() -> Self {
            Lookup(ToolSpec::new("lookup").early(true))
        }
    }

    #[async_trait]
    impl Tool for Lookup {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        async fn execute(&self, _arguments: Arguments, _context: ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text("found"))
        }
    }

    #[test]
    fn a_call_is_early_when_its_tool_is_or_the_stream_says_so() {
        let toolbox = Toolbox::new().with(Lookup::new()).expect("registered");
        assert!(
            toolbox.is_early("lookup", false),
            "a tool whose spec says early is early"
        );
        assert!(
            toolbox.is_early("unknown", true),
            "the stream's flag makes any call early"
        );
        assert!(!toolbox.is_early("unknown", false));
    }
}

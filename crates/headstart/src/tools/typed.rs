//! Typed tools: arguments as a Rust type whose JSON Schema `schemars` derives, a body that uses `?` on any error.
//!
//! ```
//! use headstart::{tool_fn, ToolContext, ToolFailure, Toolbox};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! /// What to read.
//! #[derive(Deserialize, JsonSchema)]
//! struct ReadArgs {
//!     /// The file's path.
//!     path: String,
//! }
//!
//! let read = tool_fn("read_file", |args: ReadArgs, _ctx: ToolContext| async move {
//!     let text = std::fs::read_to_string(&args.path)?; // io::Error -> ToolFailure
//!     Ok(text)
//! })
//! .description("Reads a UTF-8 file")
//! .early()
//! .idempotent();
//! let toolbox = Toolbox::new().with(read)?;
//! assert_eq!(toolbox.definitions()[0].parameters["required"], serde_json::json!(["path"]));
//! # Ok::<(), headstart::ToolboxError>(())
//! ```

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::ExecutionMode;
use crate::tools::error::{ToolError, ToolFailure};
use crate::tools::output::ToolOutput;
use crate::tools::spec::ToolSpec;
use crate::tools::tool::{Arguments, Tool, ToolContext};

/// The JSON Schema of `A` as a tool's `parameters`: `schemars`' draft 2020-12 output (`$defs` included) without
/// the `$schema` key, which providers do not want inside a tool definition.
pub fn schema_for<A: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(A).to_value();
    if let Value::Object(fields) = &mut schema {
        fields.remove("$schema");
    }
    schema
}

type ConflictKeyFn<A> = Arc<dyn Fn(&A) -> Option<String> + Send + Sync>;

/// A tool made from an async closure over typed arguments; see [`tool_fn`].
pub struct ToolFn<A, F> {
    spec: ToolSpec,
    conflict_key: Option<ConflictKeyFn<A>>,
    body: F,
    _args: PhantomData<fn(A)>,
}

/// A typed tool from an async closure: `A` is deserialized from the call's arguments, and its `schemars` schema is
/// what the model sees and what calls are validated against (contract §5.2). The body returns anything that converts
/// into a [`ToolOutput`] (`String`, `&str`, `serde_json::Value`, `ToolOutput`) or a [`ToolFailure`].
///
/// By default the tool is not early, not idempotent, without timeout or conflict key; the builder methods set those.
pub fn tool_fn<A, F, Fut, O>(name: impl Into<String>, body: F) -> ToolFn<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
    O: Into<ToolOutput>,
{
    ToolFn {
        spec: ToolSpec::new(name).parameters(schema_for::<A>()),
        conflict_key: None,
        body,
        _args: PhantomData,
    }
}

impl<A, F> ToolFn<A, F> {
    /// What it does, for the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.spec.description = description.into();
        self
    }

    /// Early ([`ToolSpec::early`](crate::ToolSpec#structfield.early)): starts as soon as the call is sealed.
    pub fn early(mut self) -> Self {
        self.spec.early = true;
        self
    }

    /// Provider-async ([`ToolSpec::provider_async`](crate::ToolSpec#structfield.provider_async)): declared to the
    /// provider as a tool the model need not wait for; early too.
    pub fn provider_async(mut self) -> Self {
        self.spec.provider_async = true;
        self.spec.early = true;
        self
    }

    /// Safe to run twice ([`ToolSpec::idempotent`](crate::ToolSpec#structfield.idempotent)).
    pub fn idempotent(mut self) -> Self {
        self.spec.idempotent = true;
        self
    }

    /// Fences its batch ([`ToolSpec::execution_mode`](crate::ToolSpec#structfield.execution_mode) `Sequential`).
    pub fn sequential(mut self) -> Self {
        self.spec.execution_mode = ExecutionMode::Sequential;
        self
    }

    /// The call fails as timed out once this passes ([`ToolSpec::timeout`](crate::ToolSpec#structfield.timeout)).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.spec.timeout = Some(limit);
        self
    }

    /// Calls with equal keys run in source order ([`Tool::conflict_key`]); the key is computed from the typed
    /// arguments.
    pub fn conflict_key(mut self, key: impl Fn(&A) -> Option<String> + Send + Sync + 'static) -> Self {
        self.conflict_key = Some(Arc::new(key));
        self
    }
}

impl<A, F> fmt::Debug for ToolFn<A, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolFn")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

fn parse<A: DeserializeOwned>(arguments: Arguments) -> Result<A, serde_json::Error> {
    serde_json::from_value(Value::Object(arguments))
}

#[async_trait]
impl<A, F, Fut, O> Tool for ToolFn<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolFailure>> + Send + 'static,
    O: Into<ToolOutput>,
{
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn conflict_key(&self, arguments: &Arguments) -> Option<String> {
        let key = self.conflict_key.as_ref()?;
        // Validation already passed; arguments the type still rejects get no key (execute reports them).
        parse::<A>(arguments.clone()).ok().and_then(|args| key(&args))
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args = parse::<A>(arguments)
            .map_err(|error| ToolError::new(format!("invalid arguments for tool {}: {error}", self.spec.name)))?;
        match (self.body)(args, context).await {
            Ok(output) => Ok(output.into()),
            Err(failure) => Err(failure.into()),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde::Deserialize;

    use super::*;

    /// A nested type, so the schema has `$defs`.
    #[derive(Deserialize, JsonSchema)]
    pub(crate) struct Range {
        pub from: u32,
        pub to: u32,
    }

    /// A file and, optionally, a range of its lines (the toolbox's tests use it too).
    #[derive(Deserialize, JsonSchema)]
    pub(crate) struct ReadArgs {
        pub path: String,
        pub lines: Option<Range>,
    }

    fn context() -> ToolContext {
        ToolContext::detached("c1")
    }

    fn read_tool() -> impl Tool {
        tool_fn("read", |args: ReadArgs, _ctx| async move {
            let text = std::fs::read_to_string(&args.path)?;
            let lines = args.lines.map_or(0, |range| range.to - range.from);
            Ok(format!("{} bytes, {lines} lines", text.len()))
        })
        .early()
        .idempotent()
        .conflict_key(|args: &ReadArgs| Some(args.path.clone()))
    }

    pub(crate) fn arguments(value: Value) -> Arguments {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn flags_and_conflict_key_come_from_the_builder() {
        let tool = read_tool();
        assert!(tool.spec().early && tool.spec().idempotent && !tool.spec().provider_async);
        let declared = tool_fn("lookup", |args: ReadArgs, _ctx: ToolContext| async move {
            Ok::<_, ToolFailure>(args.path)
        })
        .provider_async();
        assert!(
            declared.spec.provider_async && declared.spec.early,
            "provider-async is early too"
        );
        assert_eq!(tool.spec().execution_mode, ExecutionMode::Parallel);
        let key = tool.conflict_key(&arguments(serde_json::json!({"path": "/etc/x"})));
        assert_eq!(key.as_deref(), Some("/etc/x"));
    }

    #[tokio::test]
    async fn question_mark_on_io_error_becomes_the_error_text() {
        let missing = "/nonexistent/headstart/typed-tool";
        let error = read_tool()
            .execute(arguments(serde_json::json!({"path": missing})), context())
            .await
            .expect_err("the file does not exist");
        let expected = std::fs::read_to_string(missing).expect_err("still missing").to_string();
        assert_eq!(error.message, expected);
    }

    #[tokio::test]
    async fn a_value_output_is_text_and_details_and_bad_arguments_fail_cleanly() {
        #[derive(Deserialize, JsonSchema)]
        struct Empty {}
        let tool = tool_fn("echo", |_: Empty, ctx: ToolContext| async move {
            Ok(serde_json::json!({"call": ctx.call_id}))
        });
        let output = tool.execute(Arguments::new(), context()).await.expect("runs");
        assert_eq!(output.details, serde_json::json!({"call": "c1"}));
        assert_eq!(
            output,
            ToolOutput::text(r#"{"call":"c1"}"#).with_details(output.details.clone())
        );
        let error = read_tool()
            .execute(arguments(serde_json::json!({"path": 3})), context())
            .await
            .expect_err("not a string");
        assert!(
            error.message.starts_with("invalid arguments for tool read: "),
            "{}",
            error.message
        );
    }
}

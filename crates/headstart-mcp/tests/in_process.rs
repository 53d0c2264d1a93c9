//! headstart-mcp against an in-process rmcp server over an in-memory pipe: listing, calling, `isError`, progress,
//! cancellation reaching the server, a server dying mid-call, and annotations ignored unless trusted — each through
//! the engine, as an agent runs them. At the end, connections that fail (one test binary for all: each costs a
//! link).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use headstart::{AgentEvent, CancellationToken, DeltaEvent, Tool, Toolbox};
use headstart_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool as McpToolDefinition, ToolAnnotations,
};
use headstart_mcp::rmcp::service::{RequestContext, RunningService};
use headstart_mcp::rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use headstart_mcp::{McpError, McpLimits, McpServer, Override, ToolPolicy};
use serde_json::{json, Value};
use support::{call, deltas, done, run, start};
use tokio::sync::Notify;

/// What the server saw.
#[derive(Default)]
struct Seen {
    /// `tools/call` requests, as `name` or `name arg`.
    calls: Mutex<Vec<String>>,
    /// A call reached a tool body (a permit is kept when nobody waits).
    started: Notify,
    /// `block` saw its request cancelled.
    cancelled: Notify,
    /// The test saw a progress update of the call (`progress` waits for it before going on).
    updated: Notify,
}

impl Seen {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("not poisoned").clone()
    }
}

/// Five tools: `lookup` (read-only), `write` (a write), `fail` (`isError`), `progress` (reports progress) and
/// `block` (runs until cancelled).
struct TestServer {
    seen: Arc<Seen>,
}

fn definition(name: &'static str, properties: Value, annotations: ToolAnnotations) -> McpToolDefinition {
    let schema = json!({"type": "object", "properties": properties});
    let schema = schema.as_object().cloned().unwrap_or_default();
    McpToolDefinition::new(name, format!("the {name} tool"), schema).annotate(annotations)
}

fn definitions() -> Vec<McpToolDefinition> {
    let read_only = || ToolAnnotations::new().read_only(true).idempotent(true);
    vec![
        definition("lookup", json!({"q": {"type": "string"}}), read_only()),
        definition(
            "write",
            json!({"path": {"type": "string"}}),
            ToolAnnotations::new().read_only(false),
        ),
        definition("fail", json!({}), read_only()),
        definition("progress", json!({"steps": {"type": "integer"}}), read_only()),
        definition(
            "block",
            json!({}),
            ToolAnnotations::new().read_only(false).idempotent(true),
        ),
    ]
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(definitions()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let argument = |key: &str| arguments.get(key).cloned().unwrap_or(Value::Null);
        let record = match arguments.values().next() {
            Some(Value::String(text)) => format!("{} {text}", request.name),
            _ => request.name.to_string(),
        };
        self.seen.calls.lock().expect("not poisoned").push(record);
        self.seen.started.notify_one();
        let result = match request.name.as_ref() {
            "lookup" => {
                let q = argument("q");
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(format!("found {}", q.as_str().unwrap_or("?")))]);
                result.structured_content = Some(json!({"q": q, "hits": 3}));
                result
            }
            "write" => CallToolResult::success(vec![ContentBlock::text("written")]),
            "fail" => CallToolResult::error(vec![ContentBlock::text("disk full")]),
            "progress" => {
                let steps = argument("steps").as_u64().unwrap_or(1);
                let token = context.meta.get_progress_token().ok_or_else(|| {
                    ErrorData::invalid_params("headstart sends a progress token with every call", None)
                })?;
                for step in 1..=steps {
                    let progress = ProgressNotificationParam::new(token.clone(), step as f64)
                        .with_total(steps as f64)
                        .with_message(format!("step {step}"));
                    let _ = context.peer.notify_progress(progress).await;
                    // Notifications are handled on tasks of their own on the client: wait until this one reached
                    // the engine's consumer, so that the result cannot overtake it (10 s bounds a lost one, which
                    // the test then reports).
                    let _ = tokio::time::timeout(Duration::from_secs(10), self.seen.updated.notified()).await;
                }
                CallToolResult::success(vec![ContentBlock::text("done")])
            }
            "block" => {
                tokio::select! {
                    () = context.ct.cancelled() => self.seen.cancelled.notify_one(),
                    () = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
                CallToolResult::success(vec![ContentBlock::text("never cancelled")])
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// A connected pair: the server's running service (dropping it stops the server), headstart's client, and the
/// link between them (aborting it cuts the connection, as a crashing server does).
struct Fixture {
    seen: Arc<Seen>,
    _server: RunningService<RoleServer, TestServer>,
    client: McpServer,
    link: tokio::task::JoinHandle<()>,
}

async fn connect() -> Fixture {
    connect_with(McpLimits::default()).await
}

async fn connect_with(limits: McpLimits) -> Fixture {
    let (client_io, mut client_end) = tokio::io::duplex(1 << 16);
    let (mut server_end, server_io) = tokio::io::duplex(1 << 16);
    let link = tokio::spawn(async move {
        let _ = tokio::io::copy_bidirectional(&mut client_end, &mut server_end).await;
    });
    let seen = Arc::new(Seen::default());
    let handler = TestServer {
        seen: Arc::clone(&seen),
    };
    let server = tokio::spawn(async move { handler.serve(server_io).await });
    let client = McpServer::connect_with_limits("test", client_io, limits)
        .await
        .expect("the handshake succeeds");
    let server = server.await.expect("the server task runs").expect("the server starts");
    Fixture {
        seen,
        _server: server,
        client,
        link,
    }
}

async fn toolbox(client: &McpServer, policy: &ToolPolicy) -> Toolbox {
    let mut toolbox = Toolbox::new();
    client.register(&mut toolbox, policy).await.expect("the tools register");
    toolbox
}

#[tokio::test]
async fn lists_tools_with_prefixed_names_schemas_and_untrusted_flags() {
    let fixture = connect().await;
    let tools = fixture
        .client
        .tools(&ToolPolicy::untrusted())
        .await
        .expect("tools/list succeeds");
    let names: Vec<&str> = tools.iter().map(|tool| tool.spec().name.as_str()).collect();
    assert_eq!(
        names,
        [
            "test__lookup",
            "test__write",
            "test__fail",
            "test__progress",
            "test__block"
        ]
    );
    let lookup = &tools[0];
    assert_eq!(lookup.mcp_name(), "lookup");
    assert_eq!(lookup.spec().description, "the lookup tool");
    assert_eq!(
        lookup.spec().parameters,
        json!({"type": "object", "properties": {"q": {"type": "string"}}})
    );
    // The server says read-only and idempotent; untrusted, that changes nothing.
    for tool in &tools {
        assert!(!tool.spec().early, "{} is async", tool.spec().name);
        assert!(!tool.spec().idempotent, "{} is idempotent", tool.spec().name);
        assert_eq!(tool.conflict_key(&Default::default()).as_deref(), Some("mcp:test"));
        assert_eq!(tool.spec().execution_mode, headstart::ExecutionMode::Parallel);
    }
    assert!(fixture.seen.calls().is_empty(), "listing calls nothing");
}

#[tokio::test]
async fn trusted_annotations_and_overrides_set_the_flags() {
    let fixture = connect().await;
    let policy = ToolPolicy::trusted().with_override("write", Override::default().sequential(true).conflict_key(None));
    let tools = fixture.client.tools(&policy).await.expect("tools/list succeeds");
    let by_name = |name: &str| tools.iter().find(|tool| tool.mcp_name() == name).expect("listed");
    let lookup = by_name("lookup");
    assert!(lookup.spec().early && lookup.spec().idempotent);
    assert_eq!(lookup.conflict_key(&Default::default()), None);
    let write = by_name("write");
    assert!(!write.spec().early && !write.spec().idempotent);
    assert_eq!(write.spec().execution_mode, headstart::ExecutionMode::Sequential);
    assert_eq!(
        write.conflict_key(&Default::default()),
        None,
        "the override removed the key"
    );
    let block = by_name("block");
    assert!(!block.spec().early);
    assert!(block.spec().idempotent, "idempotentHint counts on a trusted server");
    assert_eq!(block.conflict_key(&Default::default()).as_deref(), Some("mcp:test"));

    let typo = ToolPolicy::trusted().with_override("wrte", Override::default().early(true));
    let error = fixture
        .client
        .tools(&typo)
        .await
        .expect_err("an override of an unknown tool is refused");
    assert!(
        matches!(error, McpError::UnknownOverride { ref tool, .. } if tool == "wrte"),
        "{error}"
    );
}

#[tokio::test]
async fn calls_map_results_errors_and_structured_content() {
    let fixture = connect().await;
    let toolbox = toolbox(&fixture.client, &ToolPolicy::untrusted()).await;
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "c1", "test__lookup", json!({"q": "tokio"})))
            .chain(call(1, "c2", "test__fail", json!({})))
            .chain(call(2, "c3", "test__write", json!({"path": "/tmp/x"})))
            .chain([done()]),
    );
    let run = run(toolbox, response, CancellationToken::new(), |_| {}).await;
    assert_eq!(run.text("c1"), "found tokio");
    assert!(!run.result("c1").is_error);
    assert_eq!(
        run.result("c1").details["structured_content"],
        json!({"q": "tokio", "hits": 3})
    );
    assert!(run.result("c2").is_error, "isError becomes the call's error result");
    assert_eq!(run.text("c2"), "disk full");
    assert_eq!(run.text("c3"), "written");
    // One conflict key for the whole (untrusted) server: calls reach it in source order.
    assert_eq!(fixture.seen.calls(), ["lookup tokio", "fail", "write /tmp/x"]);
}

#[tokio::test]
async fn progress_notifications_become_updates() {
    let fixture = connect().await;
    let toolbox = toolbox(&fixture.client, &ToolPolicy::untrusted()).await;
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "p", "test__progress", json!({"steps": 3})))
            .chain([done()]),
    );
    let seen = Arc::clone(&fixture.seen);
    let run = run(toolbox, response, CancellationToken::new(), |event| {
        if matches!(event, AgentEvent::ToolExecutionUpdate { .. }) {
            seen.updated.notify_one();
        }
    })
    .await;
    assert_eq!(run.text("p"), "done");
    let updates = run.updates("p");
    let texts: Vec<Option<&str>> = updates.iter().map(|update| update.content[0].as_text()).collect();
    let steps = ["progress 1/3: step 1", "progress 2/3: step 2", "progress 3/3: step 3"];
    assert_eq!(texts, steps.map(Some), "every step, in order");
    let last = updates.last().expect("not empty");
    assert_eq!(last.content[0].as_text(), Some("progress 3/3: step 3"));
    assert_eq!(
        last.details,
        json!({"progress": 3.0, "total": 3.0, "message": "step 3"})
    );
}

#[tokio::test]
async fn cancelling_a_call_reaches_the_server() {
    let fixture = connect().await;
    let toolbox = toolbox(&fixture.client, &ToolPolicy::untrusted()).await;
    let cancel = CancellationToken::new();
    let seen = Arc::clone(&fixture.seen);
    let canceller = cancel.clone();
    tokio::spawn(async move {
        seen.started.notified().await;
        canceller.cancel();
    });
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "b", "test__block", json!({})))
            .chain([done()]),
    );
    let run = run(toolbox, response, cancel, |_| {}).await;
    assert!(run.result("b").is_error, "a cancelled call fails");
    tokio::time::timeout(Duration::from_secs(5), fixture.seen.cancelled.notified())
        .await
        .expect("the server saw notifications/cancelled for the call");
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_timeout_fails_and_the_server_is_told_to_stop() {
    let limits = McpLimits {
        call_timeout: Duration::from_secs(1),
        ..McpLimits::default()
    };
    let fixture = connect_with(limits).await;
    let toolbox = toolbox(&fixture.client, &ToolPolicy::untrusted()).await;
    assert_eq!(
        toolbox.get("test__block").and_then(|tool| tool.spec().timeout),
        Some(Duration::from_secs(6)),
        "the engine's backstop is 5 s past the call's own timeout"
    );
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "b", "test__block", json!({})))
            .chain([done()]),
    );
    let began = tokio::time::Instant::now();
    let run = run(toolbox, response, CancellationToken::new(), |_| {}).await;
    let took = began.elapsed();
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(2)).contains(&took),
        "on the paused clock the call ends at its 1 s timeout, not at the block's 30 s: {took:?}"
    );
    assert!(run.result("b").is_error);
    assert_eq!(
        run.text("b"),
        "MCP server `test`: no answer to tools/call `block` within 1 s; it was sent notifications/cancelled"
    );
    tokio::time::timeout(Duration::from_secs(5), fixture.seen.cancelled.notified())
        .await
        .expect("the server saw notifications/cancelled for the call");
}

#[tokio::test]
async fn a_server_dying_mid_call_fails_the_call() {
    let fixture = connect().await;
    let toolbox = toolbox(&fixture.client, &ToolPolicy::untrusted()).await;
    let seen = Arc::clone(&fixture.seen);
    let link = fixture.link;
    tokio::spawn(async move {
        seen.started.notified().await;
        link.abort();
    });
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "b", "test__block", json!({})))
            .chain([done()]),
    );
    let run = run(toolbox, response, CancellationToken::new(), |_| {}).await;
    assert!(run.result("b").is_error);
    assert!(run.text("b").contains("closed the connection"), "{}", run.text("b"));
}

/// The response: call `lookup`, then wait (up to `patience`) for the server to see it before saying more.
fn lookup_then_talk(
    seen: Arc<Seen>,
    patience: Duration,
) -> impl futures::Stream<Item = Result<DeltaEvent, headstart::ModelError>> + Send {
    let head = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "c1", "test__lookup", json!({"q": "early"}))),
    );
    let wait = futures::stream::once(async move {
        let _ = tokio::time::timeout(patience, seen.started.notified()).await;
        Ok(DeltaEvent::TextStart { index: 1 })
    });
    let tail = deltas([
        DeltaEvent::TextDelta {
            index: 1,
            delta: "still talking".into(),
        },
        DeltaEvent::TextEnd { index: 1 },
        done(),
    ]);
    head.chain(wait).chain(tail)
}

fn first_text(event: &AgentEvent) -> bool {
    matches!(
        event,
        AgentEvent::MessageUpdate {
            delta: DeltaEvent::TextDelta { .. },
            ..
        }
    )
}

#[tokio::test]
async fn a_trusted_read_only_tool_runs_early_and_an_untrusted_one_does_not() {
    let fixture = connect().await;
    let trusted = toolbox(&fixture.client, &ToolPolicy::trusted()).await;
    let run_trusted = run(
        trusted,
        lookup_then_talk(Arc::clone(&fixture.seen), Duration::from_secs(10)),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    assert!(
        run_trusted.started("c1") < run_trusted.position(first_text),
        "the read-only call started while the model was still talking: {:?}",
        run_trusted.names()
    );
    assert_eq!(run_trusted.text("c1"), "found early");

    let untrusted = toolbox(&fixture.client, &ToolPolicy::untrusted()).await;
    let run_untrusted = run(
        untrusted,
        lookup_then_talk(Arc::clone(&fixture.seen), Duration::from_millis(200)),
        CancellationToken::new(),
        |_| {},
    )
    .await;
    assert!(
        run_untrusted.started("c1") > run_untrusted.position(first_text),
        "untrusted, the call waited for the response to end: {:?}",
        run_untrusted.names()
    );
    assert_eq!(fixture.seen.calls(), ["lookup early", "lookup early"]);
}

#[tokio::test]
async fn registration_is_all_or_nothing() {
    let fixture = connect().await;
    let mut toolbox = Toolbox::new();
    fixture
        .client
        .register(&mut toolbox, &ToolPolicy::untrusted())
        .await
        .expect("first registration");
    let error = fixture
        .client
        .register(&mut toolbox, &ToolPolicy::untrusted())
        .await
        .expect_err("the names are taken");
    assert!(matches!(error, McpError::Toolbox { .. }), "{error}");
    assert_eq!(toolbox.len(), 5, "the failed registration left the toolbox as it was");
}

// Connection failures are typed errors with a clear message, never panics.

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let error = McpServer::stdio("gone", tokio::process::Command::new("/nonexistent/mcp-server"))
        .await
        .expect_err("nothing to start");
    assert!(matches!(error, McpError::Spawn { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("MCP server `gone`: cannot start `/nonexistent/mcp-server`"),
        "{error}"
    );
}

#[tokio::test]
async fn a_process_that_exits_at_once_fails_the_handshake() {
    let error = McpServer::stdio("quits", tokio::process::Command::new("true"))
        .await
        .expect_err("`true` speaks no MCP");
    assert!(matches!(error, McpError::Handshake { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with("MCP server `quits`: handshake failed"),
        "{error}"
    );
}

#[tokio::test]
async fn an_http_endpoint_that_refuses_fails_the_handshake() {
    // Port 9 (discard) on loopback: nothing listens there on a test machine.
    let connect = McpServer::http("nowhere", "http://127.0.0.1:9/mcp");
    let error = tokio::time::timeout(Duration::from_secs(60), connect)
        .await
        .expect("the failure is reported in time")
        .expect_err("nothing listens");
    assert!(matches!(error, McpError::Handshake { .. }), "{error:?}");
}

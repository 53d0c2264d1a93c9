//! `headstart run` and `headstart resume` end to end, offline: the binary talks to a local server
//! (`headstart_providers::replay_server`) that replays recorded provider streams one SSE event at a time, or
//! synthesized Anthropic streams calling the built-in tools, with scripted faults.
//!
//! - Each wire format's recording: the run ends as the recording does, the timeline SVG is written, and the stored
//!   responses are exactly the recorded ones (content and stop reason, converted independently).
//! - A 429 with `Retry-After: 1`: one retry, at least a second later; nothing of the failed attempt is stored.
//! - A connection reset after two early calls were committed and ran: with continuation on, the next request
//!   carries both calls and their results and the run completes; off, the run stops after one request.
//! - SIGKILL while a call runs, then `headstart resume`: the call has the interrupted result, the conversation
//!   continues, and the stored transcript is valid (`headstart_testkit::invariants`).
//! - No key: one line naming the variable, exit 2.
//! - `--response-timeout 2` against a stream of keep-alive comments: the run ends after 2 s, not retried, the
//!   response stored as failed, its error shown.
//!
//! Time bounds: lower ones (the retry waited for its `Retry-After`), and one generous upper one (the response timeout
//! ended the run within 30 s).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use headstart::core::accumulator::Accumulator;
use headstart::core::{AssistantMessage, ContentBlock, Message};
use headstart::store::StoredMessage;
use headstart::{SessionId, SqliteStore, TranscriptStore, INTERRUPTED};
use headstart_providers::replay_server::{cassette_events, Page, ReplayServer, Reply, SeenRequest};
use headstart_providers::{convert_capture, ConvertOptions, WireFormat};
use headstart_testkit::invariants::check_log;
use serde_json::{json, Value};

mod support;
use support::{
    answer, anthropic, command, page_after, result_texts, run_to_end, tool_results, tool_results_in, workdir, DELAY,
    KEY,
};

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/providers")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// The log of the only session in `db`, after checking that its model context is valid for a provider: every
/// response's calls are followed, right after it, by their results in call order.
async fn stored_log(db: &Path) -> (SqliteStore, SessionId, Vec<StoredMessage>) {
    let store = SqliteStore::open_read_only(db).expect("the database opens");
    let sessions = store.sessions().await.expect("sessions");
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = sessions[0].id.clone();
    let log = store.load_log(&session).await.expect("the log");
    let context = store.model_context(&session).await.expect("the context");
    for (at, message) in context.iter().enumerate() {
        let Message::Assistant(response) = message else {
            continue;
        };
        let calls: Vec<&str> = response.tool_calls().map(|call| call.id.as_str()).collect();
        let results: Vec<&str> = context[at + 1..]
            .iter()
            .map_while(|message| match message {
                Message::ToolResult(result) => Some(result.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(calls, results, "results after response {at}");
    }
    (store, session, log)
}

/// [`stored_log`] for a session written by one run, which also keeps every invariant of the engine
/// (`headstart_testkit::invariants`; they number requests per run, so they fit a session of one run).
async fn stored(db: &Path) -> (SessionId, Vec<StoredMessage>) {
    let (store, session, log) = stored_log(db).await;
    let runs = store.tool_runs(&session).await.expect("the runs");
    let violations = check_log(&log, &runs);
    assert!(violations.is_empty(), "{violations:?}");
    (session, log)
}

/// The stored responses: the canonical context's assistant messages (fragments merged).
fn responses(log: &[StoredMessage]) -> Vec<AssistantMessage> {
    let messages: Vec<Message> = log.iter().map(|stored| stored.message.clone()).collect();
    headstart::core::context::model_context(&messages)
        .into_iter()
        .filter_map(|message| match message {
            Message::Assistant(assistant) => Some(assistant),
            _ => None,
        })
        .collect()
}

/// The text blocks of a response, joined.
fn text_of(response: &AssistantMessage) -> String {
    response
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_recorded_conversation_is_stored_as_recorded() {
    for (name, provider, format, turns) in [
        (
            "anthropic__multi_turn_streaming_tools.yaml",
            "anthropic",
            WireFormat::Anthropic,
            4,
        ),
        (
            "openai_chat__streaming_gpt41_parallel_model.yaml",
            "openai",
            WireFormat::OpenAiChat,
            1,
        ),
        (
            "openai_responses__parallel_tool_calls.yaml",
            "openai-responses",
            WireFormat::OpenAiResponses,
            1,
        ),
        ("gemini__parallel_function_calls.yaml", "gemini", WireFormat::Gemini, 1),
    ] {
        eprintln!("--- {name}");
        let text = fixture(name);
        let replies = cassette_events(&text).unwrap().into_iter().map(Reply::Events).collect();
        let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let turns_arg = turns.to_string();
        let output = run_to_end(&mut command(
            dir.path(),
            &server,
            provider,
            &["run", "--max-requests", &turns_arg, "--timeline", "run.svg", "Go."],
        ))
        .await;
        assert!(output.status.success(), "{name}: {:?}", output.status);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("End-of-stream batching would have taken"), "{stdout}");
        let svg = std::fs::read_to_string(dir.path().join("run.svg")).expect("the timeline is written");
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{name}");
        assert_eq!(server.model_requests().len(), turns, "{name}");

        // What the recording implies: each exchange converted on its own and accumulated.
        let options = ConvertOptions::default();
        let expected: Vec<AssistantMessage> = convert_capture(format, &text, &options)
            .unwrap()
            .into_iter()
            .take(turns)
            .map(|deltas| {
                let mut accumulator = Accumulator::new();
                for delta in deltas {
                    accumulator.apply(delta.event).unwrap();
                }
                accumulator.snapshot()
            })
            .collect();
        let (_, log) = stored(&dir.path().join("headstart.db")).await;
        let got = responses(&log);
        assert_eq!(got.len(), expected.len(), "{name}");
        for (got, expected) in got.iter().zip(&expected) {
            assert_eq!(got.content, expected.content, "{name}");
            assert_eq!(got.stop_reason, expected.stop_reason, "{name}");
        }
        // The recordings call tools `headstart run` does not have: each call has its "not found" result.
        let calls: usize = got.iter().map(|response| response.tool_calls().count()).sum();
        let results = result_texts(&log);
        assert_eq!(results.len(), calls, "{name}");
        assert!(
            results.iter().all(|text| text.ends_with("not found")),
            "{name}: {results:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_after_retry_after_and_nothing_of_it_is_stored() {
    let replies = vec![
        Reply::Status {
            status: 429,
            headers: vec![("retry-after".into(), "1".into())],
            body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}).to_string(),
        },
        answer(),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &["run", "Hi"])).await;
    assert!(output.status.success());
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
    let (_, log) = stored(&dir.path().join("headstart.db")).await;
    assert_eq!(log.len(), 2, "the prompt and the one answer: {log:?}");
    assert_eq!(text_of(&responses(&log)[0]), "The notes say hello.");
}

/// A response calling `read_file` and `list_dir` (both async), cut by a reset once both were sealed.
fn reset_after_two_calls() -> Reply {
    let events = anthropic(
        Some("Reading. "),
        &[
            ("toolu_read", "read_file", json!({"path": "notes.txt"})),
            ("toolu_list", "list_dir", json!({"path": "."})),
        ],
    );
    let keep = events.iter().rposition(|e| e.contains("content_block_stop")).unwrap() + 1;
    Reply::ResetAfter { events, keep }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_after_committed_calls_continues_with_their_results() {
    let server = ReplayServer::start(vec![reset_after_two_calls(), answer()], HashMap::new(), DELAY)
        .await
        .unwrap();
    let dir = workdir();
    let output = run_to_end(&mut command(
        dir.path(),
        &server,
        "anthropic",
        &["run", "What do the notes say?"],
    ))
    .await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0], ("toolu_read".to_owned(), "hello from the notes".to_owned()));
    assert_eq!(results[1].0, "toolu_list");
    assert!(results[1].1.contains("notes.txt"), "{results:?}");
    let (_, log) = stored(&dir.path().join("headstart.db")).await;
    assert_eq!(
        responses(&log).last().map(text_of).as_deref(),
        Some("The notes say hello.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_continuation_a_reset_stops_the_run() {
    let server = ReplayServer::start(vec![reset_after_two_calls(), answer()], HashMap::new(), DELAY)
        .await
        .unwrap();
    let dir = workdir();
    let args = ["run", "--continue-after-failure", "0", "What do the notes say?"];
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &args)).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(server.model_requests().len(), 1);
    let (_, log) = stored(&dir.path().join("headstart.db")).await;
    assert_eq!(result_texts(&log)[0], "hello from the notes", "the committed calls ran");
}

/// `headstart run --fetch --fetch-allow-private PROMPT` in `dir`, killed with SIGKILL once `page_server` has the
/// fetch's request: the call is surely running when the process dies.
#[cfg(unix)]
async fn run_killed_while_fetching(
    dir: &Path,
    server: &ReplayServer,
    page_server: &ReplayServer,
    prompt: &str,
) -> std::process::ExitStatus {
    let args = ["run", "--no-progress", "--fetch", "--fetch-allow-private", prompt];
    let mut child = command(dir, server, "anthropic", &args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while page_server.requests().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the fetch never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_while_a_call_runs_is_resumed() {
    let (page_server, url) = page_after(Duration::from_secs(600)).await;
    let replies = vec![
        Reply::Events(anthropic(
            Some("Fetching. "),
            &[("toolu_fetch", "fetch_url", json!({"url": url}))],
        )),
        answer(),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let db = dir.path().join("headstart.db");
    let status = run_killed_while_fetching(dir.path(), &server, &page_server, "Fetch it.").await;
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));

    let session = {
        let store = SqliteStore::open_read_only(&db).unwrap();
        let session = store.sessions().await.unwrap()[0].id.clone();
        assert_eq!(store.unfinished_calls(&session).await.unwrap().len(), 1);
        session
    };
    let output = run_to_end(&mut command(
        dir.path(),
        &server,
        "anthropic",
        &[
            "resume",
            "headstart.db",
            "--session",
            &session.0,
            "--fetch",
            "--fetch-allow-private",
        ],
    ))
    .await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "the killed run's request and the resumed one");
    assert_eq!(
        tool_results(&requests[1]),
        [("toolu_fetch".to_owned(), INTERRUPTED.to_owned())]
    );
    // Two runs wrote this session (the killed one and the resumed one): the context check applies, the per-run
    // invariants do not.
    let (_, _, log) = stored_log(&db).await;
    assert_eq!(result_texts(&log), [INTERRUPTED]);
    assert_eq!(
        responses(&log).last().map(text_of).as_deref(),
        Some("The notes say hello.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_is_one_line_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .current_dir(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .args(["run", "--provider", "anthropic", "--model", "m", "Hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert!(
        !dir.path().join("headstart.db").exists(),
        "nothing is written without a key"
    );
}

#[test]
fn help_documents_every_flag_with_an_example() {
    for command in ["run", "resume"] {
        let (help, flags) = help_with_examples(&[command]);
        assert!(flags.len() >= 10, "{command}: {flags:?}");
        assert!(help.contains("Example"), "{command}");
    }
    let (_, flags) = help_with_examples(&["recover"]);
    assert_eq!(flags, ["session", "json", "force"]);
    let (_, flags) = help_with_examples(&["mcp", "tools"]);
    assert_eq!(flags, ["trusted", "name", "env", "timeout"]);
}

/// `headstart COMMAND… --help` and the long flags it lists (but `--help`), once each has been checked to give an
/// example.
fn help_with_examples(command: &[&str]) -> (String, Vec<String>) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args(command)
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success(), "{command:?} --help");
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut flags = Vec::new();
    for block in help.split("\n      --").skip(1) {
        let flag = block.split_whitespace().next().unwrap_or_default();
        if flag == "help" {
            continue;
        }
        assert!(block.contains("e.g."), "{command:?} --{flag} has no example:\n{block}");
        flags.push(flag.to_owned());
    }
    (help, flags)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_continues_a_stored_conversation() {
    let replies = vec![answer(), Reply::Events(anthropic(Some("Still hello."), &[]))];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let first = run_to_end(&mut command(dir.path(), &server, "anthropic", &["run", "First?"])).await;
    assert!(first.status.success());
    let (session, _) = stored(&dir.path().join("headstart.db")).await;

    let args = ["run", "--session", &session.0, "--timeline", "second.svg", "Second?"];
    let second = run_to_end(&mut command(dir.path(), &server, "anthropic", &args)).await;
    assert!(second.status.success(), "{:?}", second.status);
    let requests = server.model_requests();
    let texts: Vec<&str> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"][0]["text"].as_str())
        .collect();
    assert_eq!(texts, ["First?", "The notes say hello.", "Second?"]);
    // The summary counts this run only.
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(stdout.contains("1 model requests"), "{stdout}");

    let unknown = run_to_end(&mut command(
        dir.path(),
        &server,
        "anthropic",
        &["run", "--session", "nope", "Hi"],
    ))
    .await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no session nope"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_turn_run_with_every_built_in_tool() {
    let pages = HashMap::from([(
        "/page".to_owned(),
        Page {
            delay: Duration::from_millis(50),
            body: "the page".into(),
        },
    )]);
    let page_server = ReplayServer::start(Vec::new(), pages, DELAY).await.unwrap();
    let replies = vec![
        Reply::Events(anthropic(
            Some("Looking. "),
            &[
                ("toolu_fetch", "fetch_url", json!({"url": page_server.url("/page")})),
                ("toolu_read", "read_file", json!({"path": "notes.txt"})),
            ],
        )),
        Reply::Events(anthropic(None, &[("toolu_list", "list_dir", json!({}))])),
        answer(),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let args = [
        "run",
        "--fetch",
        "--fetch-allow-private",
        "--timeline",
        "run.svg",
        "What is here?",
    ];
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &args)).await;
    assert!(output.status.success(), "{:?}", output.status);
    assert!(dir.path().join("run.svg").exists());
    assert_eq!(server.model_requests().len(), 3);
    let (_, log) = stored(&dir.path().join("headstart.db")).await;
    let results = result_texts(&log);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results.contains(&"the page".to_owned()), "{results:?}");
    assert!(results.contains(&"hello from the notes".to_owned()), "{results:?}");
    // The listing of the working directory: the notes and the transcript database beside them.
    assert!(results[2].lines().any(|line| line == "notes.txt"), "{results:?}");
    assert_eq!(
        responses(&log).last().map(text_of).as_deref(),
        Some("The notes say hello.")
    );
}

/// Bytes a terminal acts on: C0 controls but line breaks, DEL, and the UTF-8 encodings of the C1 controls
/// (U+0080–U+009F, `C2 80`–`C2 9F`), among them the 8-bit CSI.
fn raw_controls(output: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(output);
    text.char_indices()
        .filter(|(_, c)| c.is_control() && *c != '\n')
        .map(|(at, c)| format!("U+{:04X} at {at}: {:?}", c as u32, &text[at.saturating_sub(20)..at]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_from_the_model_never_reach_the_terminal() {
    // A line that would erase itself and print a forged call, an OSC 52 clipboard write, an 8-bit CSI, and the
    // same in a tool name and in arguments.
    let forged = "Sure.\x1b[2K\r\u{2714} read_file(README.md) done\x1b]52;c;ZXZpbA==\x07 \u{9b}31mred ";
    let replies = vec![
        Reply::Events(anthropic(
            Some(forged),
            &[
                ("toolu_a", "read_file", json!({"path": "notes\x1b[8m.txt"})),
                ("toolu_b", "fetch\x1b[2K_url", json!({"url": "x"})),
            ],
        )),
        Reply::Events(anthropic(Some("Done.\x1b[?1049h"), &[])),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), Duration::ZERO)
        .await
        .unwrap();
    let dir = workdir();
    std::fs::write(dir.path().join("notes\x1b[8m.txt"), "result \x1b]0;title\x07").unwrap();
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &["run", "Go"])).await;
    assert!(output.status.success(), "{:?}", output.status);
    assert_eq!(raw_controls(&output.stdout), Vec::<String>::new());
    assert_eq!(raw_controls(&output.stderr), Vec::<String>::new());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("\\x1b[2K\\r"), "{stdout}");
    assert!(stdout.contains("fetch\\x1b[2K_url"), "{stdout}");

    // The stored text is kept as the model sent it; `inspect` shows it escaped.
    let (_, log) = stored(&dir.path().join("headstart.db")).await;
    assert_eq!(responses(&log).first().map(text_of).as_deref(), Some(forged));
    let inspect = tokio::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .current_dir(dir.path())
        .args(["inspect", "headstart.db"])
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert!(inspect.status.success(), "{inspect:?}");
    assert_eq!(raw_controls(&inspect.stdout), Vec::<String>::new());
    let shown = String::from_utf8_lossy(&inspect.stdout);
    assert!(shown.contains("\\x1b]52;c;ZXZpbA==\\x07"), "{shown}");
}

/// The peak resident memory of the largest child this test process has waited for (an upper bound on each), in
/// KiB.
fn children_peak_rss_kib() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let usage = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()), 0);
        usage.assume_init()
    };
    usage.ru_maxrss
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_in_one_response_are_bounded() {
    const CALLS: usize = 10_000;
    let ids: Vec<String> = (0..CALLS).map(|n| format!("toolu_{n}")).collect();
    let calls: Vec<(&str, &str, Value)> = ids.iter().map(|id| (id.as_str(), "list_dir", json!({}))).collect();
    let replies = vec![Reply::Events(anthropic(None, &calls)), answer()];
    let server = ReplayServer::start(replies, HashMap::new(), Duration::ZERO)
        .await
        .unwrap();
    let dir = workdir();
    let started = std::time::Instant::now();
    let output = run_to_end(&mut command(
        dir.path(),
        &server,
        "anthropic",
        &["run", "--no-progress", "List"],
    ))
    .await;
    let elapsed = started.elapsed();
    let peak_mib = children_peak_rss_kib() / 1024;
    eprintln!(
        "{CALLS} calls: {:.1} s, peak RSS of the largest child {peak_mib} MiB",
        elapsed.as_secs_f64()
    );
    assert!(output.status.success(), "{:?}", output.status);
    // Generous bounds for a busy machine, yet below what the same calls cost without the per-response limit; the
    // test prints its time and peak memory (`cargo test -p headstart-cli --test run -- --nocapture`).
    assert!(elapsed < Duration::from_secs(100), "{elapsed:?}");
    assert!(peak_mib < 400, "{peak_mib} MiB");

    let store = SqliteStore::open_read_only(dir.path().join("headstart.db")).unwrap();
    let session = store.sessions().await.unwrap()[0].id.clone();
    let runs = store.tool_runs(&session).await.unwrap();
    assert_eq!(runs.len(), CALLS);
    let started: Vec<_> = runs.iter().filter(|run| run.started_at_us.is_some()).collect();
    assert_eq!(started.len(), 128, "the default per-response limit");
    // At most 16 bodies at once (the default max_in_flight): the most intervals open at any start.
    let most_at_once = started
        .iter()
        .map(|run| {
            let at = run.started_at_us.unwrap();
            started
                .iter()
                .filter(|other| other.started_at_us.unwrap() <= at && other.ended_at_us.is_none_or(|end| end > at))
                .count()
        })
        .max()
        .unwrap();
    assert!(most_at_once <= 16, "{most_at_once} at once");
    let log = store.load_log(&session).await.unwrap();
    let refused = result_texts(&log)
        .iter()
        .filter(|text| *text == "too many tool calls in one response (the limit is 128)")
        .count();
    assert_eq!(refused, CALLS - 128);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_timeout_ends_a_stream_of_keep_alives() {
    let keep_alive = Reply::KeepAlive {
        every: Duration::from_millis(100),
    };
    let server = ReplayServer::start(vec![keep_alive], HashMap::new(), DELAY)
        .await
        .unwrap();
    let dir = workdir();
    let args = ["run", "--response-timeout", "2", "Hi"];
    let started = std::time::Instant::now();
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &args)).await;
    let took = started.elapsed();
    println!("headstart run --response-timeout 2 ended after {took:?}");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        format!("{stdout}{stderr}").contains("the response did not finish within 2 s (--response-timeout)"),
        "{stdout}\n{stderr}"
    );
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "{took:?}"
    );
    assert_eq!(server.model_requests().len(), 1, "not retried");
    // The failed response is stored as such.
    let (_, log) = stored(&dir.path().join("headstart.db")).await;
    let failed = responses(&log);
    assert_eq!(failed.len(), 1, "{log:?}");
    assert!(failed[0].stop_reason.is_abnormal(), "{:?}", failed[0]);
}

/// `--mcp` running the hostile MCP server of headstart-mcp's tests (`python3 hostile_mcp.py MODE`).
fn hostile_mcp(mode: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../headstart-mcp/tests/fixtures/hostile_mcp.py");
    format!("evil=python3 {} {mode}", script.display())
}

fn result_of<'a>(log: &'a [StoredMessage], id: &str) -> &'a headstart::core::ToolResultMessage {
    log.iter()
        .find_map(|stored| match &stored.message {
            Message::ToolResult(result) if result.tool_call_id == id => Some(result),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_mcp_server_is_held_to_its_limits_and_sees_no_api_key() {
    let replies = vec![
        Reply::Events(anthropic(
            None,
            &[
                ("toolu_hang", "evil__hang", json!({})),
                ("toolu_env", "evil__env", json!({})),
                ("toolu_flood", "evil__flood", json!({"bytes": 1024 * 1024})),
            ],
        )),
        answer(),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let mcp = hostile_mcp("tools");
    let args = [
        "run",
        "--mcp",
        &mcp,
        "--mcp-call-timeout",
        "2",
        "--mcp-env",
        "evil:HS_MCP_PASSED",
        "What is here?",
    ];
    let mut command = command(dir.path(), &server, "anthropic", &args);
    command
        .env("OPENAI_API_KEY", "sk-test-secret")
        .env("ANTHROPIC_API_KEY", "sk-ant-test-secret")
        .env("HS_MCP_PASSED", "passed-on");
    let began = std::time::Instant::now();
    let output = run_to_end(&mut command).await;
    let took = began.elapsed();
    eprintln!("the run took {took:?}");
    assert!(output.status.success(), "{:?}", output.status);
    assert!(took < Duration::from_secs(60), "{took:?}");
    let (_, log) = stored(&dir.path().join("headstart.db")).await;

    let hang = result_of(&log, "toolu_hang");
    assert!(hang.is_error);
    assert_eq!(
        hang.text(),
        "MCP server `evil`: no answer to tools/call `hang` within 2 s; it was sent notifications/cancelled"
    );

    let env: serde_json::Map<String, Value> =
        serde_json::from_str(&result_of(&log, "toolu_env").text()).expect("the environment as JSON");
    assert_eq!(
        env.get("HS_MCP_PASSED"),
        Some(&json!("passed-on")),
        "--mcp-env passes it"
    );
    for secret in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", KEY] {
        assert!(!env.contains_key(secret), "{secret} reached the server: {env:?}");
    }
    let text = serde_json::to_string(&env).unwrap();
    assert!(!text.contains("secret") && !text.contains("test-key"), "{text}");

    // 1 MiB of text: what is stored and what the model is sent stop at 256 KiB, with a note.
    let flood = result_of(&log, "toolu_flood").text();
    assert!(flood.len() <= 256 * 1024 + 100, "{} bytes stored", flood.len());
    assert!(
        flood.ends_with("the server sent 1048576 bytes]"),
        "{}",
        &flood[flood.len() - 80..]
    );
    let requests = server.model_requests();
    let sent = tool_results(&requests[1]);
    let (_, sent_flood) = sent.iter().find(|(id, _)| id == "toolu_flood").expect("sent");
    assert!(sent_flood.len() <= 256 * 1024 + 200, "{} bytes sent", sent_flood.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_that_never_answers_initialize_stops_the_run_with_one_line() {
    let server = ReplayServer::start(vec![answer()], HashMap::new(), DELAY)
        .await
        .unwrap();
    let dir = workdir();
    let mcp = hostile_mcp("silent");
    let args = ["run", "--mcp", &mcp, "--mcp-timeout", "2", "Hi"];
    let began = std::time::Instant::now();
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &args)).await;
    let took = began.elapsed();
    eprintln!("the run took {took:?}");
    assert_eq!(output.status.code(), Some(1));
    assert!(took < Duration::from_secs(30), "{took:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim_end(),
        "headstart run: MCP server `evil`: no answer to initialize within 2 s"
    );
    assert!(server.model_requests().is_empty(), "no request without the tools");
}

/// Each tool call of a request's conversation, in order, with the result that follows it there:
/// `(call id, the call's input, the result's content)`. A result answers the call of the assistant message right
/// before it, as the provider reads it.
fn calls_with_results(request: &SeenRequest) -> Vec<(String, Value, String)> {
    let messages = request.body["messages"].as_array().cloned().unwrap_or_default();
    let mut paired = Vec::new();
    for pair in messages.windows(2) {
        let (assistant, next) = (&pair[0], &pair[1]);
        if assistant["role"] != "assistant" {
            continue;
        }
        let results = tool_results_in(next);
        let calls = assistant["content"].as_array().cloned().unwrap_or_default();
        for call in calls.iter().filter(|block| block["type"] == "tool_use") {
            let id = call["id"].as_str().unwrap_or_default().to_owned();
            let result = results
                .iter()
                .find(|(result_id, _)| *result_id == id)
                .map(|(_, content)| content.clone())
                .unwrap_or_else(|| panic!("no result after call {id}: {next}"));
            paired.push((id, call["input"].clone(), result));
        }
    }
    paired
}

/// Issue 19: a backend that numbers its calls `call_0` in every response (as some do) runs to the end; every
/// request carries each `call_0` exactly as the model sent it, followed by its own result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_id_repeated_in_every_response_keeps_each_result_with_its_call() {
    let replies = vec![
        Reply::Events(anthropic(
            Some("Reading. "),
            &[("call_0", "read_file", json!({"path": "notes.txt"}))],
        )),
        Reply::Events(anthropic(None, &[("call_0", "read_file", json!({"path": "more.txt"}))])),
        Reply::Events(anthropic(None, &[("call_0", "read_file", json!({"path": "last.txt"}))])),
        answer(),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    std::fs::write(dir.path().join("more.txt"), "more notes").unwrap();
    std::fs::write(dir.path().join("last.txt"), "the last notes").unwrap();
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &["run", "Read them."])).await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4);
    let expected = [
        ("notes.txt", "hello from the notes"),
        ("more.txt", "more notes"),
        ("last.txt", "the last notes"),
    ];
    for (at, request) in requests.iter().enumerate() {
        let got = calls_with_results(request);
        let want: Vec<(String, Value, String)> = expected[..at]
            .iter()
            .map(|(path, text)| ("call_0".to_owned(), json!({"path": path}), (*text).to_owned()))
            .collect();
        assert_eq!(got, want, "request {at}");
    }
    // The stored session keeps every invariant, with its calls named by request and id.
    let (session, log) = stored(&dir.path().join("headstart.db")).await;
    assert_eq!(
        result_texts(&log),
        ["hello from the notes", "more notes", "the last notes"]
    );
    let store = SqliteStore::open_read_only(dir.path().join("headstart.db")).unwrap();
    let runs: Vec<(u32, String)> = store
        .tool_runs(&session)
        .await
        .unwrap()
        .into_iter()
        .map(|run| (run.request, run.call_id))
        .collect();
    assert_eq!(runs, [(0, "call_0".into()), (1, "call_0".into()), (2, "call_0".into())]);
}

/// Issue 19: killed while response 2's `call_0` runs, response 1 having had a `call_0` too: the resumed
/// conversation gives the interrupted result to response 2's call and keeps response 1's result with its own.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_gives_the_interrupted_result_to_the_repeated_id_of_its_own_response() {
    let (page_server, url) = page_after(Duration::from_secs(600)).await;
    let replies = vec![
        Reply::Events(anthropic(
            Some("Reading. "),
            &[("call_0", "read_file", json!({"path": "notes.txt"}))],
        )),
        Reply::Events(anthropic(None, &[("call_0", "fetch_url", json!({"url": url}))])),
        answer(),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let db = dir.path().join("headstart.db");
    run_killed_while_fetching(dir.path(), &server, &page_server, "Go.").await;

    let session = {
        let store = SqliteStore::open_read_only(&db).unwrap();
        let session = store.sessions().await.unwrap()[0].id.clone();
        let unfinished = store.unfinished_calls(&session).await.unwrap();
        let keys: Vec<(u32, &str)> = unfinished
            .iter()
            .map(|call| (call.run.request, call.run.call_id.as_str()))
            .collect();
        assert_eq!(keys, [(1, "call_0")], "response 2's call_0 was running");
        session
    };
    let output = run_to_end(&mut command(
        dir.path(),
        &server,
        "anthropic",
        &["resume", "headstart.db", "--session", &session.0],
    ))
    .await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 3, "two requests of the killed run, one resumed");
    assert_eq!(
        calls_with_results(&requests[2]),
        [
            (
                "call_0".to_owned(),
                json!({"path": "notes.txt"}),
                "hello from the notes".to_owned()
            ),
            ("call_0".to_owned(), json!({"url": url}), INTERRUPTED.to_owned()),
        ]
    );
    let (_, _, log) = stored_log(&db).await;
    assert_eq!(result_texts(&log), ["hello from the notes", INTERRUPTED]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_bounds_are_flags() {
    let calls: Vec<(String, Value)> = (0..5).map(|n| (format!("toolu_{n}"), json!({}))).collect();
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "list_dir", args.clone()))
        .collect();
    let replies = vec![Reply::Events(anthropic(None, &calls)), answer()];
    let server = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let args = ["run", "--max-calls-per-response", "2", "--max-in-flight", "1", "List"];
    let output = run_to_end(&mut command(dir.path(), &server, "anthropic", &args)).await;
    assert!(output.status.success(), "{:?}", output.status);
    let store = SqliteStore::open_read_only(dir.path().join("headstart.db")).unwrap();
    let session = store.sessions().await.unwrap()[0].id.clone();
    let mut started: Vec<(i64, i64)> = store
        .tool_runs(&session)
        .await
        .unwrap()
        .iter()
        .filter_map(|run| Some((run.started_at_us?, run.ended_at_us?)))
        .collect();
    assert_eq!(started.len(), 2, "{started:?}");
    started.sort_unstable();
    assert!(started[0].1 <= started[1].0, "one at a time: {started:?}");
    let log = store.load_log(&session).await.unwrap();
    let refused = result_texts(&log)
        .iter()
        .filter(|text| *text == "too many tool calls in one response (the limit is 2)")
        .count();
    assert_eq!(refused, 3);
}

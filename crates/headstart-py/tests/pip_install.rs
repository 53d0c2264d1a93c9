//! The package as users install it, in a fresh virtual environment (the acceptance):
//!
//! 1. `pip install "./crates/headstart-py[langchain,agents]" openai` (maturin builds the wheel, with the `dev` profile and a target
//!    folder of its own under the target folder, kept between runs; the published build is the same code);
//! 2. `python -m mypy.stubtest headstart` against what was installed: the stubs match the package users get, which
//!    has no test support; and `python -m mypy --strict -p headstart`: the stubs and the package's own Python
//!    type-check strictly;
//! 3. `tests/installed/openai_agent.py`, the README's shape with the application's own `AsyncOpenAI` client, against
//!    a replay server serving a recorded Chat Completions stream with two tool calls, one event every 100 ms: each
//!    early tool finds its own call already stored before its body goes on, starts before the response's end,
//!    and the stored transcript is the one `headstart replay` stores for the same recording;
//! 4. `examples/python/demo.py`, the README's second Python command.
//!
//! Skipped without python3 (or the package registry), unless `HEADSTART_REQUIRE_PYTHON=1` (CI).

mod support;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use headstart::core::delta_log::write_delta_log;
use headstart_providers::replay_server::{cassette_events, ReplayServer, Reply};
use headstart_providers::{convert_capture, ConvertOptions, WireFormat};
use headstart_sim::{replay_file, ReplayOptions};
use serde_json::{json, Value};

use support::{base_python, crate_dir, make_venv, or_skip, output, pip_install, workspace_dir};

const RECORDING: &str = "openai_chat__streaming_gpt41_parallel_model.yaml";

fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("headstart-pip")
}

#[test]
fn the_installed_package_runs_the_readme_agent_early_and_durably() {
    let Some(python) = or_skip("the installed-package test", installed()) else {
        return;
    };
    let stubs = output(
        Command::new(&python)
            .args(["-m", "mypy.stubtest", "headstart", "--allowlist"])
            .arg(crate_dir().join("tests/stubtest_allowlist.txt"))
            .current_dir(scratch()),
    );
    assert!(
        stubs.is_ok(),
        "stubtest against the installed package: {}",
        stubs.unwrap_err()
    );
    // The stubs and the package's own Python, type-checked as strictly as mypy checks.
    let strict = output(
        Command::new(&python)
            .args(["-m", "mypy", "--strict", "-p", "headstart"])
            .current_dir(scratch()),
    );
    assert!(
        strict.is_ok(),
        "mypy --strict over the installed package: {}",
        strict.unwrap_err()
    );

    let db = scratch().join("agent.db");
    let _ = std::fs::remove_file(&db);
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let server = runtime.block_on(serve_recording());
    let report = output(
        Command::new(&python)
            .arg(crate_dir().join("tests/installed/openai_agent.py"))
            .arg(server.url("/v1"))
            .arg(&db),
    )
    .expect("the agent script runs");
    drop(server);
    let report: Value = serde_json::from_str(&report).expect("the script prints its report as JSON");

    // Each early body found its own call in a committed message: the prefix was durable before the body began.
    let found = report["found"].as_object().expect("what each body found");
    assert_eq!(found.len(), 2, "both tools ran: {report}");
    assert!(found.values().all(|stored| stored == &json!(true)), "{report}");
    // Both calls started before the response's end (its last fragment, `stop_reason` tool_use, is stored after
    // the usage chunk and `[DONE]`, 200 ms of stream later).
    let order: Vec<&str> = report["order"]
        .as_array()
        .expect("the events")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let end = order
        .iter()
        .position(|label| label.starts_with("turn_end"))
        .expect("the response ended");
    let starts: Vec<usize> = (0..order.len())
        .filter(|&n| order[n].starts_with("tool_execution_start"))
        .collect();
    let stream_end = order
        .iter()
        .rposition(|label| *label == "message_end assistant tool_use")
        .expect("the assistant's last fragment");
    assert_eq!(starts.len(), 2, "{order:?}");
    assert!(
        starts.iter().all(|&start| start < stream_end && stream_end < end),
        "{order:?}"
    );

    assert_eq!(
        model_side(&report["messages"]),
        model_side(&replayed_transcript()),
        "the Python run stored what `headstart replay` stores for the recording"
    );

    // The README's second command: the demo, from the installed package.
    let _ = std::fs::remove_file(scratch().join("demo.db"));
    let demo = output(
        Command::new(&python)
            .arg(workspace_dir().join("examples/python/demo.py"))
            .arg("--db")
            .arg(scratch().join("demo.db")),
    )
    .expect("the demo runs");
    assert!(
        demo.contains("early execution saved") && demo.contains("(completed)"),
        "{demo}"
    );
}

/// The fresh environment with the package (and its frameworks' extras) and the SDK installed; its python.
fn installed() -> Result<PathBuf, String> {
    let (base, _) = base_python()?;
    let python = make_venv(&base, &scratch().join("venv"))?;
    let started = Instant::now();
    let target = scratch().join("target");
    // The suite's pins as constraints: the same openai and mypy, and the same versions of what they pull in.
    let pins = crate_dir().join("pytests/requirements.txt");
    // With the frameworks' extras: headstart.langchain and headstart.agents are type-checked against the
    // frameworks users get.
    let package = format!("{}[langchain,agents]", crate_dir().to_string_lossy());
    pip_install(
        &python,
        &[&package, "openai", "mypy", "-c", &pins.to_string_lossy()],
        &[
            ("CARGO_TARGET_DIR", target.as_os_str()),
            ("MATURIN_PEP517_ARGS", OsStr::new("--profile dev")),
        ],
    )?;
    eprintln!("pip install took {:.1} s", started.elapsed().as_secs_f64());
    Ok(python)
}

/// The recording served as the provider would, one SSE event every 50 ms.
async fn serve_recording() -> ReplayServer {
    let text = std::fs::read_to_string(recording()).expect("the recording reads");
    let replies = cassette_events(&text)
        .expect("the recording parses")
        .into_iter()
        .map(Reply::Events)
        .collect();
    ReplayServer::start(replies, HashMap::new(), Duration::from_millis(100))
        .await
        .expect("the replay server starts")
}

fn recording() -> PathBuf {
    workspace_dir().join("tests/fixtures/providers").join(RECORDING)
}

/// The transcript `headstart replay` stores for the recording: its first exchange as the delta log of request 0,
/// tools `alpha` and `beta` (early) answering as the script's do, and a closing answer for request 1.
fn replayed_transcript() -> Value {
    let dir = scratch().join("replay");
    std::fs::create_dir_all(&dir).expect("the replay folder");
    let text = std::fs::read_to_string(recording()).expect("the recording reads");
    let logs = convert_capture(WireFormat::OpenAiChat, &text, &ConvertOptions::default()).expect("it converts");
    let log = std::fs::File::create(dir.join("turn0.jsonl")).expect("the delta log is writable");
    write_delta_log(log, &logs[0]).expect("the delta log writes");
    let tool = |name: &str, value: &str| json!({"name": name, "async": true, "behavior": {"delay_ms": 0, "result": {"text": format!("{name} saw {value}")}}});
    let answer = [
        json!({"type": "start"}),
        json!({"type": "text_start", "index": 0}),
        json!({"type": "text_delta", "index": 0, "delta": "Done."}),
        json!({"type": "text_end", "index": 0}),
        json!({"type": "done", "stop_reason": "stop"}),
    ];
    let scenario = json!({
        "name": "installed-package",
        "prompt": "Call alpha with value red and beta with value blue.",
        "tools": [tool("alpha", "red"), tool("beta", "blue")],
        "turns": [{"log": "turn0.jsonl"}, {"events": answer}],
    });
    let path = dir.join("scenario.json");
    std::fs::write(&path, scenario.to_string()).expect("the scenario is writable");
    let outcome = replay_file(&path, &ReplayOptions::default());
    assert_eq!(outcome.exit_code, 0, "the replay ran");
    serde_json::to_value(&outcome.report).expect("the report serializes")["transcript"].clone()
}

/// What the model said in request 0 and what its calls answered, from stored messages in either shape (the store's
/// messages as `headstart.inspect` gives them, or a replay report's transcript): the assistant's blocks in order
/// (adjacent text joined) with its final stop reason, then each result's call id, tool name, text and error flag,
/// by call id (results are stored in completion order).
fn model_side(messages: &Value) -> Value {
    let messages = messages.as_array().expect("a list of messages");
    let mut blocks: Vec<Value> = Vec::new();
    let mut stop_reason = Value::Null;
    let mut results = Vec::new();
    for message in messages {
        match message["role"].as_str() {
            Some("assistant") if message["request"].as_u64().unwrap_or(0) == 0 => {
                for block in message["content"].as_array().into_iter().flatten() {
                    match (blocks.last_mut(), block["type"].as_str()) {
                        (Some(last), Some("text")) if last["type"] == "text" => {
                            let joined = format!(
                                "{}{}",
                                last["text"].as_str().unwrap_or(""),
                                block["text"].as_str().unwrap_or("")
                            );
                            last["text"] = json!(joined);
                        }
                        _ => blocks.push(block.clone()),
                    }
                }
                stop_reason = message["stop_reason"].clone();
            }
            Some("tool_result") => results.push(json!({
                "tool_call_id": message["tool_call_id"],
                "tool_name": message["tool_name"],
                "text": result_text(message),
                "is_error": message["is_error"].as_bool().unwrap_or(false),
            })),
            _ => {}
        }
    }
    results.sort_by(|a, b| a["tool_call_id"].as_str().cmp(&b["tool_call_id"].as_str()));
    json!({"assistant": blocks, "stop_reason": stop_reason, "results": results})
}

/// A result's text: the report's `text`, or the stored message's text blocks joined with `\n`.
fn result_text(message: &Value) -> String {
    if let Some(text) = message["text"].as_str() {
        return text.to_owned();
    }
    let texts: Vec<&str> = message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect();
    texts.join("\n")
}

//! Durability across a crash: a fragment that `commit_fragment` reported committed is in the file after the process
//! that committed it is killed with SIGKILL.
//!
//! The child is this test binary itself: the parent tests re-run it with `--exact child_commits_then_waits`
//! (an ignored test, so it never runs on its own) and the database path in `HEADSTART_STORE_CHILD`. The child
//! waits for its standard input to close, which the parent holds open until it kills it: a parent that fails (or is
//! killed) first takes its end of the pipe with it, and the child exits instead of waiting forever.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use headstart_core::model::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolArguments, ToolCall, Usage, UserMessage,
};
use headstart_store::{AdmittedCall, Durability, RunState, SqliteOptions, SqliteStore, TranscriptStore};

/// The database path, set only in the child.
const CHILD_ENV: &str = "HEADSTART_STORE_CHILD";
/// `full` or `normal`, set only in the child.
const DURABILITY_ENV: &str = "HEADSTART_STORE_CHILD_DURABILITY";
/// The name of the child's test function.
const CHILD_TEST: &str = "child_commits_then_waits";
/// How long the parent waits for the child's "committed" line.
const CHILD_DEADLINE: Duration = Duration::from_secs(120);

fn the_fragment() -> AssistantMessage {
    AssistantMessage {
        turn_id: "turn-killed".to_owned(),
        stop_reason: StopReason::ToolUse,
        content: vec![
            ContentBlock::text("about to be killed"),
            ContentBlock::ToolCall(ToolCall {
                id: "call_1".to_owned(),
                name: "lookup".to_owned(),
                arguments: ToolArguments::parse(r#"{"q": "durable"}"#),
                provider_async: false,
            }),
        ],
        usage: Usage::default(),
        model: None,
        error_message: None,
    }
}

/// The child: commits one fragment, reports it, and waits to be killed (or for its parent to go). Does nothing
/// unless run by a parent.
#[tokio::test]
#[ignore = "the child half of the kill-after-commit tests; they run it"]
async fn child_commits_then_waits() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let durability = match std::env::var(DURABILITY_ENV).as_deref() {
        Ok("normal") => Durability::Normal,
        _ => Durability::Full,
    };
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).expect("child: open");
    let session = store.create_session(1).await.expect("child: create session");
    store
        .append_user(&session, &UserMessage::new("go"), 2)
        .await
        .expect("child: append user");
    let admitted = [AdmittedCall {
        call_id: "call_1".to_owned(),
        tool_name: "lookup".to_owned(),
        sealed_at_us: None,
    }];
    let seq = store
        .commit_fragment(&session, 0, &the_fragment(), &admitted, 3)
        .await
        .expect("child: commit");
    let mut stdout = std::io::stdout().lock();
    // libtest has already printed "test child_commits_then_waits ... " without a newline: start a fresh line.
    writeln!(stdout, "\ncommitted {seq}").expect("child: report");
    stdout.flush().expect("child: flush");
    drop(stdout);
    // Until the parent kills this process, or closes the pipe by ending first.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// Runs the child on `path`, kills it with SIGKILL once it reports its commit, and returns the reported seq.
fn commit_in_child_and_kill(path: &Path, durability: &str) -> u64 {
    let exe = std::env::current_exe().expect("current test binary");
    let mut child = Command::new(exe)
        .args(["--exact", CHILD_TEST, "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .env(DURABILITY_ENV, durability)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let seq = loop {
        match lines_rx.recv_timeout(CHILD_DEADLINE) {
            Ok(line) => {
                if let Some(seq) = line.strip_prefix("committed ") {
                    break seq.trim().parse::<u64>().expect("the child's seq");
                }
            }
            Err(err) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("the child never reported its commit ({err}); it ended with {status:?}");
            }
        }
    };
    // `Child::kill` sends SIGKILL on unix: no destructor, no close, no checkpoint runs in the child.
    child.kill().expect("kill the child");
    let status = child.wait().expect("reap the child");
    assert_eq!(
        status.signal(),
        Some(9),
        "the child was not killed by SIGKILL: {status:?}"
    );
    seq
}

async fn fragment_survives_sigkill(durability: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("killed.db");
    let seq = commit_in_child_and_kill(&path, durability);
    assert_eq!(seq, 2);

    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("reopen after the kill");
    let sessions = store.sessions().await.expect("sessions");
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = &sessions[0].id;
    let log = store.load_log(session).await.expect("log");
    let fragment = log
        .iter()
        .find(|m| m.seq == seq)
        .expect("the committed fragment is in the file");
    assert_eq!(fragment.message, Message::Assistant(the_fragment()));
    assert_eq!(fragment.request, Some(0));
    let runs = store.tool_runs(session).await.expect("runs");
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].call_id.as_str(), runs[0].state, runs[0].fragment_seq),
        ("call_1", RunState::Admitted, seq)
    );
    let unfinished = store.unfinished_calls(session).await.expect("unfinished");
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].call.id, "call_1");
}

#[tokio::test]
async fn full_durability_fragment_survives_sigkill() {
    fragment_survives_sigkill("full").await;
}

#[tokio::test]
async fn normal_durability_fragment_survives_sigkill() {
    fragment_survives_sigkill("normal").await;
}

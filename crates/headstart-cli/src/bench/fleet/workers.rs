//! The fleet benchmark's processes (`headstart worker`, or `headstart restate serve`), each with `--metrics
//! 127.0.0.1:0`: each one's event log read line by line on a thread of its own, every line stamped with the instant
//! it arrived; killed and reaped when dropped, so none outlives the benchmark (a worker that fails to start, a
//! panic).

use std::ffi::OsString;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use headstart::store::QueueName;

/// How often an idle worker looks for work.
const POLL_MS: &str = "20";

/// What a worker's log line said, of what the benchmark follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    /// Its metrics endpoint is up: it has opened its store and is about to claim.
    Metrics(SocketAddr),
    /// It claimed this session.
    Claimed(String),
    /// It finished this session: completed, or not (the line says how).
    Finished {
        /// The session.
        session: String,
        /// `finished … completed`.
        completed: bool,
        /// The whole line, for an error message.
        line: String,
    },
    /// Its log ended: the process exited.
    Exited,
}

/// A line of worker `worker`'s log, and when it arrived.
pub(super) struct Line {
    pub(super) worker: usize,
    pub(super) seen: Seen,
    pub(super) at: Instant,
}

/// Reads `headstart worker`'s log format (`crates/headstart-cli/src/worker.rs`); `None` for lines not followed.
pub(super) fn read_line(line: &str) -> Option<Seen> {
    let mut words = line.split_whitespace();
    match (words.next()?, words.next()?) {
        ("metrics", url) => {
            let addr = url.strip_prefix("http://")?.strip_suffix("/metrics")?;
            addr.parse().ok().map(Seen::Metrics)
        }
        ("claimed", session) => Some(Seen::Claimed(session.to_owned())),
        ("finished", session) => Some(Seen::Finished {
            session: session.to_owned(),
            completed: words.next() == Some("completed"),
            line: line.to_owned(),
        }),
        _ => None,
    }
}

/// The running worker processes and the lines of their logs.
pub(super) struct Workers {
    children: Vec<Child>,
    lines: Receiver<Line>,
}

impl Workers {
    /// Starts `count` workers on `url` running `scenario`, each claiming up to `concurrency` sessions of `queue`.
    pub(super) fn start(
        url: &str,
        scenario: &Path,
        count: usize,
        concurrency: usize,
        queue: &QueueName,
    ) -> Result<Self, String> {
        Workers::spawn(url, count, |index| {
            let mut args: Vec<OsString> = ["worker", "--id", &format!("bench-{index}"), "--scenario"]
                .map(OsString::from)
                .into();
            args.push(scenario.into());
            args.extend(["--concurrency", &concurrency.to_string(), "--poll-ms", POLL_MS].map(OsString::from));
            args.extend(["--queue", queue.as_str()].map(OsString::from));
            args
        })
    }

    /// Starts `count` processes of this binary on the store `url`, process `index` with `args(index)` and
    /// `--metrics 127.0.0.1:0`.
    pub(super) fn spawn(url: &str, count: usize, args: impl Fn(usize) -> Vec<OsString>) -> Result<Self, String> {
        let bin = std::env::current_exe().map_err(|error| format!("cannot find the headstart binary: {error}"))?;
        let (sender, lines) = mpsc::channel();
        let mut workers = Workers {
            children: Vec::new(),
            lines,
        };
        for index in 0..count {
            // The store (a password with it) goes through the environment: a process's arguments are readable by
            // every local user, its environment only by its owner.
            let mut child = Command::new(&bin)
                .env("HEADSTART_STORE", url)
                .args(args(index))
                .args(["--metrics", "127.0.0.1:0"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|error| format!("cannot start a process: {error}"))?;
            if let Some(log) = child.stderr.take() {
                follow(index, log, sender.clone());
            }
            workers.children.push(child);
        }
        Ok(workers)
    }

    /// The next line of any worker's log, waiting until `deadline` at most.
    pub(super) fn next(&self, deadline: Instant) -> Result<Line, String> {
        match self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err("the workers stalled".to_owned()),
            Err(RecvTimeoutError::Disconnected) => Err("every worker's log ended".to_owned()),
        }
    }

    /// Waits until every worker's metrics endpoint is up; returns their addresses.
    pub(super) fn endpoints(&self, within: Duration) -> Result<Vec<SocketAddr>, String> {
        let deadline = Instant::now() + within;
        let mut endpoints = vec![None; self.children.len()];
        while endpoints.iter().any(Option::is_none) {
            let line = self
                .next(deadline)
                .map_err(|_| "the workers did not start in time".to_owned())?;
            match line.seen {
                Seen::Metrics(addr) => endpoints[line.worker] = Some(addr),
                Seen::Exited => return Err(format!("worker {} exited before it started", line.worker)),
                _ => {}
            }
        }
        Ok(endpoints.into_iter().flatten().collect())
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Reads worker `worker`'s log on a thread of its own until it ends.
fn follow(worker: usize, log: std::process::ChildStderr, lines: Sender<Line>) {
    std::thread::spawn(move || {
        for text in BufReader::new(log).lines() {
            let Ok(text) = text else { break };
            let at = Instant::now();
            if let Some(seen) = read_line(&text) {
                if lines.send(Line { worker, seen, at }).is_err() {
                    return;
                }
            }
        }
        let _ = lines.send(Line {
            worker,
            seen: Seen::Exited,
            at: Instant::now(),
        });
    });
}

//! Crashes on purpose at a named instant of the engine's work (`HEADSTART_CRASH_AT=<point>[:<n>]`), for the crash
//! and resume tests.
//!
//! A kill sent from outside lands a few milliseconds either side of what it aims at; the resume suite
//! (`crates/headstart-cli/tests/resume.rs`) needs each of the instants the contract's crash guarantees are about.
//! A process given `HEADSTART_CRASH_AT` aborts when it reaches the `n`th (default: first) hit of the point, with
//! no destructor run and nothing flushed: to the store and to anyone watching, a SIGKILL at exactly that instant.
//!
//! | point | the process dies |
//! |---|---|
//! | `before-seal` | before the commit of a fragment that admits calls |
//! | `after-seal` | after that commit returned, before any of its calls starts |
//! | `in-body` | inside a tool's body, once it began |
//! | `after-body` | after a body ended, before its result is written |
//! | `request` | while a request that follows tool results is built, before the model is asked |
//!
//! [`CrashAt`] is a write layer (the seal and result points), a tool middleware (`in-body`) and a check the
//! caller makes where it asks its model (`request`).
//!
//! With [`PAUSE_IN`] set to a folder, the process does not die there: the task that reached the point writes
//! `paused` in that folder and waits until a file `go` appears beside it, while the rest of the process runs on.
//! A test kills something else at exactly that instant (a Restate server, a node of a cluster), then lets the
//! process go on to meet the consequences.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use headstart::layer::ToolMiddleware;
use headstart::store::{Write, WriteFuture, WriteLayer, Written};
use headstart::{Arguments, Tool, ToolContext, ToolResult};

/// The environment variable naming the crash point.
pub const CRASH_AT: &str = "HEADSTART_CRASH_AT";
/// The environment variable that turns the crash into a pause: a folder, where `paused` is written at the point and
/// `go` is waited for.
pub const PAUSE_IN: &str = "HEADSTART_CRASH_PAUSE_IN";
/// How often a paused task looks for `go`.
const GO_EVERY: Duration = Duration::from_millis(5);

/// An instant of the engine's work to die at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Before the commit of a fragment that admits calls.
    BeforeSeal,
    /// After that commit returned, before its calls start.
    AfterSeal,
    /// Inside a tool's body.
    InBody,
    /// After a body ended, before its result is written.
    AfterBody,
    /// While a request that follows tool results is built.
    Request,
}

impl CrashPoint {
    /// Every point, in the order of a call's life.
    pub const ALL: [CrashPoint; 5] = [
        CrashPoint::BeforeSeal,
        CrashPoint::AfterSeal,
        CrashPoint::InBody,
        CrashPoint::AfterBody,
        CrashPoint::Request,
    ];

    /// The point's name in [`CRASH_AT`].
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::BeforeSeal => "before-seal",
            CrashPoint::AfterSeal => "after-seal",
            CrashPoint::InBody => "in-body",
            CrashPoint::AfterBody => "after-body",
            CrashPoint::Request => "request",
        }
    }
}

/// A [`CRASH_AT`] value that names no point or has a bad count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadCrashPoint(String);

impl std::fmt::Display for BadCrashPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = CrashPoint::ALL.iter().map(|point| point.name()).collect();
        write!(
            f,
            "{CRASH_AT}={:?}: expected <point>[:<n>] with point one of {} and n from 1",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for BadCrashPoint {}

/// Where this process dies (or pauses): a point and which of its hits (1-based). Clones count hits together.
#[derive(Debug, Clone)]
pub struct CrashAt {
    point: CrashPoint,
    nth: u32,
    hits: Arc<AtomicU32>,
    /// Pause in this folder instead of dying ([`PAUSE_IN`]).
    pause_in: Option<PathBuf>,
}

impl CrashAt {
    /// Reads `<point>[:<n>]`.
    pub fn parse(text: &str) -> Result<Self, BadCrashPoint> {
        let bad = || BadCrashPoint(text.to_owned());
        let (name, nth) = match text.split_once(':') {
            Some((name, nth)) => (name, nth.parse::<u32>().map_err(|_| bad())?),
            None => (text, 1),
        };
        let point = CrashPoint::ALL
            .into_iter()
            .find(|point| point.name() == name)
            .ok_or_else(bad)?;
        if nth == 0 {
            return Err(bad());
        }
        Ok(CrashAt {
            point,
            nth,
            hits: Arc::new(AtomicU32::new(0)),
            pause_in: None,
        })
    }

    /// This point, paused at in `folder` instead of dying ([`PAUSE_IN`]).
    pub fn pausing_in(mut self, folder: impl Into<PathBuf>) -> Self {
        self.pause_in = Some(folder.into());
        self
    }

    /// What [`CRASH_AT`] (and [`PAUSE_IN`]) say: `None` when it is unset.
    pub fn from_env() -> Result<Option<Self>, BadCrashPoint> {
        let crash = match std::env::var(CRASH_AT) {
            Ok(text) => Self::parse(&text)?,
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(text)) => {
                return Err(BadCrashPoint(text.to_string_lossy().into_owned()))
            }
        };
        Ok(Some(match std::env::var_os(PAUSE_IN) {
            Some(folder) => crash.pausing_in(folder),
            None => crash,
        }))
    }

    /// Whether this hit of `point` is the one to die at (counts the hit).
    fn due(&self, point: CrashPoint) -> bool {
        point == self.point && self.hits.fetch_add(1, Ordering::SeqCst) + 1 == self.nth
    }

    /// Aborts the process when this hit of `point` is the one; or, pausing, waits there for `go`.
    pub async fn hit(&self, point: CrashPoint) {
        if !self.due(point) {
            return;
        }
        let Some(folder) = &self.pause_in else {
            // One write, as the commit trace does: the line is there or it is not.
            eprintln!("{CRASH_AT}: aborting at {} (hit {})", point.name(), self.nth);
            std::process::abort();
        };
        eprintln!(
            "{CRASH_AT}: pausing at {} (hit {}) until {}/go",
            point.name(),
            self.nth,
            folder.display()
        );
        // Told once the task is there: a test that cannot write its folder has nothing to wait for, so this aborts
        // as an unpaused crash would rather than wait forever.
        if std::fs::write(folder.join("paused"), point.name()).is_err() {
            std::process::abort();
        }
        while !folder.join("go").exists() {
            tokio::time::sleep(GO_EVERY).await;
        }
    }
}

impl WriteLayer for CrashAt {
    fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        match write {
            Write::CommitFragment { admitted, .. } if !admitted.is_empty() => Box::pin(async move {
                self.hit(CrashPoint::BeforeSeal).await;
                let written = next.await?;
                self.hit(CrashPoint::AfterSeal).await;
                Ok(written)
            }),
            Write::AppendToolResult { .. } | Write::AppendToolResults { .. } => Box::pin(async move {
                self.hit(CrashPoint::AfterBody).await;
                next.await
            }),
            _ => next,
        }
    }
}

#[async_trait]
impl ToolMiddleware for CrashAt {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        let body = next.execute(arguments, context);
        futures::pin_mut!(body);
        // The body has begun once it was polled: die there, mid-body (or, when it needed no wait, before the engine
        // has its result).
        let first = futures::poll!(body.as_mut());
        self.hit(CrashPoint::InBody).await;
        match first {
            std::task::Poll::Ready(result) => result,
            std::task::Poll::Pending => body.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_reads_with_or_without_its_count() {
        let crash = CrashAt::parse("in-body").expect("parses");
        assert_eq!((crash.point, crash.nth), (CrashPoint::InBody, 1));
        let crash = CrashAt::parse("after-seal:3").expect("parses");
        assert_eq!((crash.point, crash.nth), (CrashPoint::AfterSeal, 3));
        for point in CrashPoint::ALL {
            assert_eq!(CrashAt::parse(point.name()).expect("parses").point, point);
        }
    }

    #[test]
    fn a_bad_point_or_count_is_refused_naming_the_points() {
        for bad in ["", "in-bodies", "in-body:0", "in-body:x", "in-body:-1", ":2"] {
            let error = CrashAt::parse(bad).expect_err(bad);
            assert!(error.to_string().contains("before-seal, after-seal"), "{error}");
        }
    }

    #[test]
    fn only_the_nth_hit_of_the_point_is_due() {
        let crash = CrashAt::parse("after-body:2").expect("parses");
        assert!(!crash.due(CrashPoint::InBody));
        assert!(!crash.due(CrashPoint::AfterBody));
        assert!(!crash.due(CrashPoint::InBody));
        assert!(crash.due(CrashPoint::AfterBody));
        assert!(!crash.due(CrashPoint::AfterBody));
    }
}

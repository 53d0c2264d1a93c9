//! [`Recorder`]: where a converter writes the events of a recording (the format is `recording`'s), apart from the
//! reading so that the converters that hold one depend on nothing that names wire formats.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::sse::SseEvent;

/// The comment that begins each recorded response, followed by its wire format's name.
pub(crate) const HEADER: &str = ": headstart-recording format=";
/// The comment before each event, followed by its time.
pub(crate) const AT: &str = ": at_ms=";

/// Where recorded responses go: a file (or any writer), shared by every converter made with it. Cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Recorder")
    }
}

/// Two recorders are equal when they write to the same place.
impl PartialEq for Recorder {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.out, &other.out)
    }
}

impl Eq for Recorder {}

impl Recorder {
    /// Creates (or truncates) the file at `path`, owner-only on unix: a recording holds what the model said.
    pub fn create(path: &Path) -> std::io::Result<Recorder> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file: File = options.open(path)?;
        Ok(Recorder::to_writer(BufWriter::new(file)))
    }

    /// Opens the file at `path` for appending (created owner-only if missing): each response a wrapper records
    /// goes after those before it.
    pub fn append(path: &Path) -> std::io::Result<Recorder> {
        let mut options = std::fs::OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file: File = options.open(path)?;
        Ok(Recorder::to_writer(BufWriter::new(file)))
    }

    /// Records into any writer.
    pub fn to_writer(out: impl Write + Send + 'static) -> Recorder {
        Recorder {
            out: Arc::new(Mutex::new(Box::new(out))),
        }
    }

    /// Begins one response in the wire format named `format`: its header line. Its events' times count from now.
    pub(crate) fn begin(&self, format: &str) -> Instant {
        self.write(&format!("{HEADER}{format}\n\n"));
        Instant::now()
    }

    /// Records one event of the response that began at `origin`.
    pub(crate) fn event(&self, origin: Instant, event: &SseEvent) {
        let at_ms = origin.elapsed().as_secs_f64() * 1000.0;
        self.write(&event_text(at_ms, event));
    }

    /// Writes and flushes one piece. A recording is a diagnostic: a failed write is logged, never fatal.
    fn write(&self, text: &str) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            tracing::warn!(%error, "could not write to the recording");
        }
    }
}

/// One event as the recording holds it: its time, its name unless `message`, its data line by line.
fn event_text(at_ms: f64, event: &SseEvent) -> String {
    let mut text = format!("{AT}{at_ms:.3}\n");
    if event.event != "message" {
        text.push_str(&format!("event: {}\n", event.event));
    }
    for line in event.data.split('\n') {
        text.push_str("data: ");
        text.push_str(line);
        text.push('\n');
    }
    text.push('\n');
    text
}

//! `read_file` and `list_dir`: confined to the working directory by the kernel, not by a check before the open.
//!
//! Every path is opened beneath a handle on the working directory with `cap-std`, which on Linux uses `openat2`
//! with `RESOLVE_BENEATH` (and elsewhere, or on older kernels, a component-by-component walk that refuses to leave
//! the directory), so a link leading out, `..` or an absolute path fails at the open itself, and swapping a path
//! component between the check and the open changes nothing. A path that is missing and a path outside read the
//! same ("no such file in the working directory"), so the tools tell nothing about the rest of the machine.
//!
//! `read_file` reads regular files only: a FIFO, device or socket is refused from its metadata before any open,
//! and the open itself is non-blocking and checked again on the handle. It reads at most the output limit plus one
//! byte, on a blocking thread that stops when the call is cancelled. It refuses the transcript's own files (compared
//! by name and by inode with the `--db` file and its `-wal`, `-shm`, `-journal` siblings) and, unless the user
//! passed `--read-secrets`, the secrets [`super::secrets`] lists. `list_dir` lists everything, secrets included.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use cap_std::fs::{Dir, OpenOptions};
use headstart::{Arguments, CancellationToken, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};

use super::secrets::{is_transcript_name, secret_rule, transcript_files};
use super::{cut_text, string_argument, MAX_OUTPUT_BYTES};

/// The most entries `list_dir` reads from one directory; the rest are left out with a note.
pub const MAX_LIST_ENTRIES: usize = 10_000;
/// The size of each read, between which cancellation is checked.
const READ_CHUNK: usize = 64 * 1024;

/// Why a file tool failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Missing, outside the working directory, behind a link leading out, or unreadable: one message for all, so
    /// that nothing outside can be told apart.
    #[error("no such file in the working directory: {0}")]
    NoSuchFile(String),
    /// The same for `list_dir`.
    #[error("no such directory in the working directory: {0}")]
    NoSuchDirectory(String),
    /// A directory given to `read_file`.
    #[error("{0} is a directory; list it with list_dir")]
    IsDirectory(String),
    /// A FIFO, device or socket.
    #[error("refused: {0} is not a regular file")]
    NotRegular(String),
    /// One of the run's transcript files.
    #[error("refused: {0} is this run's transcript")]
    Transcript(String),
    /// A secret, without `--read-secrets`.
    #[error("refused: {path} looks like a secret ({rule}); the user can allow it with --read-secrets")]
    Secret {
        /// The path as given.
        path: String,
        /// The rule it matched.
        rule: String,
    },
    /// Reading failed after the file was opened.
    #[error("reading {path} failed: {source}")]
    Read {
        /// The path as given.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl From<FileError> for ToolError {
    fn from(error: FileError) -> Self {
        ToolError::new(error.to_string())
    }
}

/// The working directory the file tools are confined to, and what they refuse in it.
#[derive(Debug)]
pub struct Workdir {
    dir: Dir,
    root: PathBuf,
    /// The transcript's files (absolute or as the user spelled them: they are the user's paths, opened ambiently).
    transcript: Vec<PathBuf>,
    transcript_name: Option<OsString>,
    read_secrets: bool,
}

impl Workdir {
    /// Confines the file tools to `root`; `transcript` is the `--db` file they must not read; `read_secrets` lifts
    /// the refusal of secrets.
    pub fn new(root: &Path, transcript: Option<&Path>, read_secrets: bool) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        Ok(Workdir {
            dir: Dir::open_ambient_dir(&root, cap_std::ambient_authority())?,
            root,
            transcript: transcript.map(transcript_files).unwrap_or_default(),
            transcript_name: transcript.and_then(Path::file_name).map(OsString::from),
            read_secrets,
        })
    }

    /// `path` relative to the root: an absolute path inside the root loses its prefix, one outside stays absolute
    /// (and fails to open beneath the root).
    fn relative<'a>(&self, path: &'a str) -> &'a Path {
        let path = Path::new(path);
        match path.strip_prefix(&self.root) {
            Ok(inside) if inside.as_os_str().is_empty() => Path::new("."),
            Ok(inside) => inside,
            Err(_) if path.as_os_str().is_empty() => Path::new("."),
            Err(_) => path,
        }
    }

    /// Refuses `path` (as given, or as resolved beneath the root) when it names a secret or the transcript.
    fn refuse_by_name(&self, given: &str, path: &Path) -> Result<(), FileError> {
        if let Some(name) = &self.transcript_name {
            if is_transcript_name(path, name) {
                return Err(FileError::Transcript(given.to_owned()));
            }
        }
        match secret_rule(path) {
            Some(rule) if !self.read_secrets => Err(FileError::Secret {
                path: given.to_owned(),
                rule,
            }),
            _ => Ok(()),
        }
    }

    /// Whether `file` is one of the transcript's files, whatever path led to it (links, hard links included).
    fn is_transcript(&self, file: &std::fs::Metadata) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            self.transcript.iter().any(|path| {
                std::fs::metadata(path).is_ok_and(|known| (known.dev(), known.ino()) == (file.dev(), file.ino()))
            })
        }
        #[cfg(not(unix))]
        {
            let _ = file;
            false
        }
    }

    /// The first `limit + 1` bytes at most of the regular file `given`, beneath the root; stops between reads
    /// once `cancel` fires. Blocking: run it on a blocking thread.
    pub fn read(&self, given: &str, limit: usize, cancel: &CancellationToken) -> Result<Vec<u8>, FileError> {
        let path = self.relative(given);
        let missing = || FileError::NoSuchFile(given.to_owned());
        self.refuse_by_name(given, path)?;
        // Metadata through the handle (following links only beneath it): a FIFO is refused before it is opened.
        let metadata = self.dir.metadata(path).map_err(|_| missing())?;
        if metadata.is_dir() {
            return Err(FileError::IsDirectory(given.to_owned()));
        }
        if !metadata.is_file() {
            return Err(FileError::NotRegular(given.to_owned()));
        }
        // A link inside the root may lead to a secret under another name.
        let resolved = self.dir.canonicalize(path).map_err(|_| missing())?;
        self.refuse_by_name(given, &resolved)?;
        let mut options = OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt;
            // Non-blocking, so that a FIFO swapped in after the check does not hang the open; no controlling tty.
            options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        }
        let file = self.dir.open_with(path, &options).map_err(|_| missing())?.into_std();
        let opened = file.metadata().map_err(|_| missing())?;
        if !opened.is_file() {
            return Err(FileError::NotRegular(given.to_owned()));
        }
        if self.is_transcript(&opened) {
            return Err(FileError::Transcript(given.to_owned()));
        }
        let mut bytes = Vec::new();
        let mut reader = file.take(limit as u64 + 1);
        let mut chunk = vec![0; READ_CHUNK];
        loop {
            if cancel.is_cancelled() {
                return Err(FileError::Cancelled);
            }
            match reader.read(&mut chunk) {
                Ok(0) => return Ok(bytes),
                Ok(read) => bytes.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(FileError::Read {
                        path: given.to_owned(),
                        source,
                    })
                }
            }
        }
    }

    /// The entries of the directory `given` beneath the root, sorted, directories with `/`; at most
    /// [`MAX_LIST_ENTRIES`] of them, and whether some were left out.
    pub fn list(&self, given: &str, cancel: &CancellationToken) -> Result<(Vec<String>, bool), FileError> {
        let missing = || FileError::NoSuchDirectory(given.to_owned());
        let dir = self.dir.open_dir(self.relative(given)).map_err(|_| missing())?;
        let mut names = Vec::new();
        for entry in dir.entries().map_err(|_| missing())? {
            if cancel.is_cancelled() {
                return Err(FileError::Cancelled);
            }
            if names.len() == MAX_LIST_ENTRIES {
                names.sort();
                return Ok((names, true));
            }
            let Ok(entry) = entry else { continue };
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok((names, false))
    }
}

/// Runs `work` on a blocking thread; returns at once with [`FileError::Cancelled`] when `cancel` fires (`work`
/// sees the same token and stops at its next check).
async fn blocking<T: Send + 'static>(
    cancel: &CancellationToken,
    work: impl FnOnce(CancellationToken) -> Result<T, FileError> + Send + 'static,
) -> Result<T, FileError> {
    let token = cancel.clone();
    let task = tokio::task::spawn_blocking(move || work(token));
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(FileError::Cancelled),
        joined = task => joined.unwrap_or(Err(FileError::Cancelled)),
    }
}

/// `read_file {path}`: a text file under the working directory.
pub struct ReadFile(pub Arc<Workdir>);

#[async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file under the working directory; `path` is relative to it. Regular files only, at most \
         256 KiB; paths outside it (links included), secrets (.env, keys, credentials) and the run's transcript \
         are refused."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string", "description": "e.g. src/main.rs"}},
               "required": ["path"]})
    }

    fn early(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = string_argument(&arguments, "path")?.to_owned();
        let workdir = Arc::clone(&self.0);
        let bytes = blocking(&context.cancel, move |cancel| {
            workdir.read(&path, MAX_OUTPUT_BYTES, &cancel)
        })
        .await?;
        Ok(ToolOutput::text(cut_text(bytes, MAX_OUTPUT_BYTES, "file")))
    }
}

/// `list_dir {path}`: the entries of a directory under the working directory, one a line, directories with `/`.
pub struct ListDir(pub Arc<Workdir>);

#[async_trait]
impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }

    fn description(&self) -> &str {
        "List a directory under the working directory (default: the working directory itself); directories end \
         with /."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string", "description": "e.g. src, or ."}}})
    }

    fn early(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = arguments.get("path").and_then(Value::as_str).unwrap_or(".").to_owned();
        let workdir = Arc::clone(&self.0);
        let (names, partial) = blocking(&context.cancel, move |cancel| workdir.list(&path, &cancel)).await?;
        let mut text = names.join("\n");
        if partial {
            text.push_str(&format!("\n[listing cut at {MAX_LIST_ENTRIES} entries]"));
        }
        Ok(ToolOutput::text(cut_text(
            text.into_bytes(),
            MAX_OUTPUT_BYTES,
            "listing",
        )))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    fn arguments(value: Value) -> Arguments {
        value.as_object().cloned().unwrap_or_default()
    }

    /// `read_file {path}` in `workdir`: the text, or the error's message.
    async fn read(workdir: &Arc<Workdir>, path: &str) -> Result<String, String> {
        ReadFile(Arc::clone(workdir))
            .execute(arguments(json!({ "path": path })), ToolContext::detached("c"))
            .await
            .map(|output| output.content.iter().filter_map(|block| block.as_text()).collect())
            .map_err(|error| error.message)
    }

    /// A working directory `work` inside a temporary one that also holds `secret.txt`.
    fn sandbox() -> (tempfile::TempDir, PathBuf) {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("work");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.txt"), "hello").unwrap();
        std::fs::write(outer.path().join("secret.txt"), "outside").unwrap();
        (outer, root)
    }

    #[tokio::test]
    async fn outside_and_missing_read_the_same() {
        let (outer, root) = sandbox();
        let workdir = Arc::new(Workdir::new(&root, None, false).unwrap());
        assert_eq!(read(&workdir, "src/a.txt").await.unwrap(), "hello");
        assert_eq!(read(&workdir, "./src//a.txt").await.unwrap(), "hello");
        let absolute = root.canonicalize().unwrap().join("src/a.txt");
        assert_eq!(read(&workdir, &absolute.display().to_string()).await.unwrap(), "hello");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("link")).unwrap();
            std::os::unix::fs::symlink(outer.path(), root.join("up")).unwrap();
            std::os::unix::fs::symlink("a.txt", root.join("src/inner")).unwrap();
        }
        let outside = outer.path().join("secret.txt").display().to_string();
        for path in [
            "../secret.txt",
            "src/../../secret.txt",
            &outside,
            "/etc/passwd",
            "/etc/no-such-file",
            "link",
            "up/secret.txt",
            "missing",
            "src/missing",
            "../missing",
        ] {
            if cfg!(not(unix)) && ["link", "up/secret.txt"].contains(&path) {
                continue;
            }
            assert_eq!(
                read(&workdir, path).await.unwrap_err(),
                format!("no such file in the working directory: {path}")
            );
        }
        #[cfg(unix)]
        assert_eq!(
            read(&workdir, "src/inner").await.unwrap(),
            "hello",
            "a link inside stays usable"
        );
        assert_eq!(
            read(&workdir, "src").await.unwrap_err(),
            "src is a directory; list it with list_dir"
        );
        let missing = ReadFile(Arc::clone(&workdir))
            .execute(arguments(json!({})), ToolContext::detached("c"))
            .await
            .unwrap_err();
        assert!(missing.message.contains("\"path\" is required"), "{missing}");

        let list = |path: &'static str| {
            let workdir = Arc::clone(&workdir);
            async move {
                ListDir(workdir)
                    .execute(arguments(json!({ "path": path })), ToolContext::detached("c"))
                    .await
            }
        };
        let listed = list(".").await.unwrap();
        let expected = if cfg!(unix) { "link\nsrc/\nup" } else { "src/" };
        assert_eq!(listed, ToolOutput::text(expected));
        for path in ["..", "/etc", "up", "nowhere"] {
            assert_eq!(
                list(path).await.unwrap_err().message,
                format!("no such directory in the working directory: {path}")
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_component_swapped_for_a_link_out_never_escapes() {
        let (_outer, root) = sandbox();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/passwd"), "inside").unwrap();
        let workdir = Workdir::new(&root, None, false).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        let flipper = {
            let (stop, flips, root) = (Arc::clone(&stop), Arc::clone(&flips), root.clone());
            // `sub` is in turn the directory, missing, a link to /etc, missing: every state the check and the
            // open might see.
            std::thread::spawn(move || {
                let (real, sub) = (root.join("real"), root.join("sub"));
                // Each state held a moment, so that reads meet both the directory and the link.
                let hold = || std::thread::sleep(Duration::from_micros(50));
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::rename(&real, &sub);
                    hold();
                    let _ = std::fs::rename(&sub, &real);
                    let _ = std::os::unix::fs::symlink("/etc", &sub);
                    hold();
                    let _ = std::fs::remove_file(&sub);
                    flips.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        while flips.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let cancel = CancellationToken::new();
        let (mut inside, mut refused, mut escaped) = (0, 0, 0);
        // At least 1,000 reads, and on until the flipper has flipped 1,000 times meanwhile (a busy machine may
        // leave it waiting), so the two surely overlapped.
        let first = flips.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(120);
        while inside + refused < 1000 || flips.load(Ordering::Relaxed) - first < 1000 {
            assert!(Instant::now() < deadline, "the flipper never ran");
            match workdir.read("sub/passwd", MAX_OUTPUT_BYTES, &cancel) {
                Ok(bytes) if bytes == b"inside" => inside += 1,
                Ok(_) => escaped += 1,
                Err(FileError::NoSuchFile(_)) => refused += 1,
                Err(other) => panic!("unexpected: {other}"),
            }
            if escaped > 0 {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        flipper.join().unwrap();
        let flips = flips.load(Ordering::Relaxed) - first;
        eprintln!(
            "{} reads during {flips} flips: {inside} inside, {refused} refused, {escaped} escaped",
            inside + refused + escaped
        );
        assert_eq!(escaped, 0);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn fifos_and_devices_are_refused_without_blocking() {
        let (_outer, root) = sandbox();
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
        std::os::unix::fs::symlink("pipe", root.join("to-pipe")).unwrap();
        let workdir = Arc::new(Workdir::new(&root, None, false).unwrap());
        let started = Instant::now();
        for (path, expected) in [
            ("pipe", "refused: pipe is not a regular file"),
            ("to-pipe", "refused: to-pipe is not a regular file"),
            ("zero", "no such file in the working directory: zero"),
            ("/dev/zero", "no such file in the working directory: /dev/zero"),
        ] {
            let error = tokio::time::timeout(Duration::from_secs(10), read(&workdir, path))
                .await
                .unwrap_or_else(|_| panic!("{path} blocked"));
            assert_eq!(error.unwrap_err(), expected);
        }
        eprintln!("four refusals in {:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_huge_sparse_file_is_cut_in_bounded_time() {
        let (_outer, root) = sandbox();
        let file = std::fs::File::create(root.join("huge")).unwrap();
        file.set_len(3 << 30).unwrap();
        let workdir = Arc::new(Workdir::new(&root, None, false).unwrap());
        let started = Instant::now();
        let text = read(&workdir, "huge").await.unwrap();
        let took = started.elapsed();
        eprintln!(
            "read_file of a 3 GiB sparse file: {took:?}, {} bytes returned",
            text.len()
        );
        assert!(took < Duration::from_secs(30), "{took:?}");
        assert!(text.ends_with("\n[file cut at 262144 bytes]"));
        assert_eq!(text.len(), MAX_OUTPUT_BYTES + "\n[file cut at 262144 bytes]".len());
    }

    #[tokio::test]
    async fn a_cancelled_read_returns_cancelled() {
        let (_outer, root) = sandbox();
        let workdir = Arc::new(Workdir::new(&root, None, false).unwrap());
        let context = ToolContext::detached("c");
        context.cancel.cancel();
        let error = ReadFile(workdir)
            .execute(arguments(json!({"path": "src/a.txt"})), context)
            .await
            .unwrap_err();
        assert_eq!(error.message, "cancelled");
    }

    #[tokio::test]
    async fn the_transcript_is_refused_under_every_spelling() {
        let (_outer, root) = sandbox();
        let db = root.join("headstart.db");
        for file in transcript_files(&db) {
            std::fs::write(file, "SQLite format 3").unwrap();
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("headstart.db", root.join("notes.txt")).unwrap();
            std::os::unix::fs::symlink("../headstart.db-wal", root.join("src/log")).unwrap();
            std::fs::hard_link(&db, root.join("copy")).unwrap();
        }
        // The database named relatively to the process, as `--db` is.
        let workdir = Arc::new(Workdir::new(&root, Some(&db), true).unwrap());
        for path in [
            "headstart.db",
            "./headstart.db",
            "src/../headstart.db",
            "HEADSTART.DB",
            "headstart.db-wal",
            "headstart.db-shm",
            "headstart.db-journal",
            "notes.txt",
            "src/log",
            "copy",
        ] {
            if cfg!(not(unix)) && ["notes.txt", "src/log", "copy"].contains(&path) {
                continue;
            }
            let error = read(&workdir, path).await.unwrap_err();
            // A case-insensitive file system may open HEADSTART.DB; on others it is refused by name.
            assert_eq!(error, format!("refused: {path} is this run's transcript"));
        }
        assert_eq!(read(&workdir, "src/a.txt").await.unwrap(), "hello");
    }

    #[tokio::test]
    async fn secrets_are_refused_unless_allowed_and_listed_all_the_same() {
        let (_outer, root) = sandbox();
        std::fs::write(root.join(".env"), "OPENAI_API_KEY=sk-test").unwrap();
        std::fs::create_dir(root.join(".aws")).unwrap();
        std::fs::write(root.join(".aws/credentials"), "[default]").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(".env", root.join("harmless.txt")).unwrap();
        let guarded = Arc::new(Workdir::new(&root, None, false).unwrap());
        for (path, rule) in [
            (".env", ".env"),
            (".aws/credentials", "files under .aws/"),
            ("harmless.txt", ".env"),
        ] {
            if cfg!(not(unix)) && path == "harmless.txt" {
                continue;
            }
            assert_eq!(
                read(&guarded, path).await.unwrap_err(),
                format!("refused: {path} looks like a secret ({rule}); the user can allow it with --read-secrets")
            );
        }
        // Refused before the file system is asked: a missing secret reads the same as a present one.
        assert!(read(&guarded, "nope/.env")
            .await
            .unwrap_err()
            .contains("looks like a secret"));
        let listed = ListDir(Arc::clone(&guarded))
            .execute(arguments(json!({})), ToolContext::detached("c"))
            .await
            .unwrap();
        let listed: String = listed.content.iter().filter_map(|block| block.as_text()).collect();
        assert!(listed.lines().any(|line| line == ".env"), "{listed}");

        let allowed = Arc::new(Workdir::new(&root, None, true).unwrap());
        assert_eq!(read(&allowed, ".env").await.unwrap(), "OPENAI_API_KEY=sk-test");
        assert_eq!(read(&allowed, ".aws/credentials").await.unwrap(), "[default]");
    }

    #[tokio::test]
    async fn a_listing_stops_at_its_entry_limit() {
        let (_outer, root) = sandbox();
        let many = root.join("many");
        std::fs::create_dir(&many).unwrap();
        for n in 0..=MAX_LIST_ENTRIES {
            std::fs::File::create(many.join(format!("f{n:05}"))).unwrap();
        }
        let workdir = Arc::new(Workdir::new(&root, None, false).unwrap());
        let listed = ListDir(workdir)
            .execute(arguments(json!({"path": "many"})), ToolContext::detached("c"))
            .await
            .unwrap();
        let listed: String = listed.content.iter().filter_map(|block| block.as_text()).collect();
        assert_eq!(listed.lines().count(), MAX_LIST_ENTRIES + 1);
        assert!(listed.ends_with(&format!("[listing cut at {MAX_LIST_ENTRIES} entries]")));
    }
}

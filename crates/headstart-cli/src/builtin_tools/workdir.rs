//! The working directory `read_file` and `list_dir` see: confined by the kernel, not by a check before the open.
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

use cap_std::fs::{Dir, OpenOptions};
use headstart::{CancellationToken, ToolError};

use super::secrets::{is_transcript_name, secret_rule, transcript_files};

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

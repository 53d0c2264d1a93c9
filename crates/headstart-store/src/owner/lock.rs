//! Session ownership on one machine: an OS lock (`flock` on unix, `LockFileEx` on Windows) on a per-session lock
//! file beside the database, `<db>.owners/<session>.lock`.
//!
//! The lock is the truth: the operating system releases it when its process exits or crashes, so a process killed
//! with SIGKILL frees its sessions at once. The file's contents (a [`ProcessRecord`] in JSON) only name the owner
//! in refusals.
//!
//! A holder deletes its lock file when it lets go, and a forced takeover deletes the live holder's file before
//! locking a new one; so whoever locks a file checks that the path still leads to the file it locked, and starts
//! again when it does not (the classic lock-file protocol). Lock files of crashed processes stay behind, unlocked:
//! the next process to take the session reuses them.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use fs4::FileExt;
use fs4::TryLockError;

use super::holder::{decide, Holder, ProcessRecord, Refusal, Take};
use crate::types::SessionId;

/// The namespace of the lock file names of session ids that are not plain (the bytes of `"headstart\0owners"`).
const LOCK_NAME_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6865_6164_7374_6172_7400_6f77_6e65_7273);

/// The longest session id used as a lock file name as it is.
const MAX_PLAIN_ID: usize = 64;

/// The most bytes of a lock file read for its record: a record is under 400 bytes, and the file may hold anything.
const MAX_RECORD_BYTES: u64 = 4096;

/// How many times [`SessionLocks::take`] starts again when the lock file it locked was deleted meanwhile (its
/// holder let go, or was taken over) before giving up.
const MAX_ATTEMPTS: usize = 8;

/// Why a process could not take a session.
#[derive(Debug, thiserror::Error)]
pub enum OwnershipError {
    /// Someone alive holds it (the message names the owner).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The lock file could not be created, locked or written.
    #[error("cannot lock {path}: {message}")]
    Lock {
        /// The lock file (or its directory).
        path: String,
        /// Why.
        message: String,
    },
}

fn lock_error(path: &Path, error: impl std::fmt::Display) -> OwnershipError {
    OwnershipError::Lock {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

/// The lock files of one SQLite database's sessions: the directory `<db>.owners` beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLocks {
    dir: PathBuf,
}

/// The name of `session`'s lock file: `<id>.lock` for a plain id (ASCII letters, digits, `-` and `_`, at most 64
/// characters: every id the store creates), else `~<UUIDv5 of the id>.lock`, so that no id read from a database
/// can name a path outside the directory, and no two ids share a file.
pub fn lock_file_name(session: &SessionId) -> String {
    let id = session.0.as_str();
    let plain = !id.is_empty()
        && id.len() <= MAX_PLAIN_ID
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        format!("{id}.lock")
    } else {
        format!("~{}.lock", uuid::Uuid::new_v5(&LOCK_NAME_NAMESPACE, id.as_bytes()))
    }
}

impl SessionLocks {
    /// The lock files of the sessions of the database at `db`: `<db>.owners/`.
    pub fn beside(db: &Path) -> Self {
        let mut dir = db.as_os_str().to_owned();
        dir.push(".owners");
        SessionLocks {
            dir: PathBuf::from(dir),
        }
    }

    /// The directory of the lock files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lock file of `session`.
    pub fn path_of(&self, session: &SessionId) -> PathBuf {
        self.dir.join(lock_file_name(session))
    }

    /// Takes `session` for the calling process, which holds it until the returned lock is dropped (or the process
    /// ends). Refused ([`OwnershipError::Refused`], naming the owner) while another live process holds it, unless
    /// `force`: the holder's lock file is then deleted, and the caller locks a new one (the holder keeps a lock on
    /// a file nobody looks at any more). `now_us` is the record's "since".
    pub fn take(&self, session: &SessionId, force: bool, now_us: i64) -> Result<SessionLock, OwnershipError> {
        create_private_dir(&self.dir).map_err(|error| lock_error(&self.dir, error))?;
        let path = self.path_of(session);
        let mut taken_over = None;
        for _ in 0..MAX_ATTEMPTS {
            let file = open_lock_file(&path).map_err(|error| lock_error(&path, error))?;
            match FileExt::try_lock(&file) {
                Ok(()) => {
                    if !still_at(&file, &path).map_err(|error| lock_error(&path, error))? {
                        continue;
                    }
                    write_record(&file, &ProcessRecord::current(now_us)).map_err(|error| lock_error(&path, error))?;
                    let taken = taken_over.take().map_or(Take::Free, Take::TakeOver);
                    return Ok(SessionLock { file, path, taken });
                }
                Err(TryLockError::WouldBlock) => {
                    let holder = Holder::Process(read_record(&file));
                    if let Take::TakeOver(record) = decide(session, Some(&holder), force, now_us)? {
                        match std::fs::remove_file(&path) {
                            Ok(()) => {}
                            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                            Err(error) => return Err(lock_error(&path, format!("cannot take it over: {error}"))),
                        }
                        taken_over = Some(record);
                    }
                }
                Err(TryLockError::Error(error)) => return Err(lock_error(&path, error)),
            }
        }
        Err(lock_error(
            &path,
            "the lock file kept being replaced while this process tried to lock it",
        ))
    }
}

/// A process's hold on a session ([`SessionLocks::take`]): released, and its lock file deleted, when dropped.
#[derive(Debug)]
pub struct SessionLock {
    file: File,
    path: PathBuf,
    taken: Take,
}

impl SessionLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the session was taken: free, or over from a process (`--force`).
    pub fn taken(&self) -> &Take {
        &self.taken
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Deleted while still locked, and only if it is still this lock's file: after a forced takeover the path
        // leads to the new owner's file, which must stay. (A takeover landing between the check and the deletion
        // would lose the new owner's file: only a forced takeover of a live process can race this way.)
        if still_at(&self.file, &self.path).unwrap_or(false) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates `dir` (and its parents), readable by the owner only where permissions exist.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Opens (creating it if needed, never truncating it) the lock file at `path`, readable by the owner only where
/// permissions exist.
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Whether `path` still leads to `file` (it was not deleted, or replaced by another process's lock file).
#[cfg(unix)]
fn still_at(file: &File, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let held = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(current) => Ok(current.dev() == held.dev() && current.ino() == held.ino()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// Elsewhere an open file cannot be deleted, so the path still leads to it while it is open.
#[cfg(not(unix))]
fn still_at(_file: &File, path: &Path) -> std::io::Result<bool> {
    Ok(path.exists())
}

fn write_record(mut file: &File, record: &ProcessRecord) -> std::io::Result<()> {
    let text = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&text)
}

/// The record in a lock file, if it holds one (it may be empty: its owner has not written it yet; or anything at
/// all: the file is outside the database's control).
fn read_record(file: &File) -> Option<ProcessRecord> {
    let mut bytes = Vec::new();
    let mut reader = file;
    reader.seek(SeekFrom::Start(0)).ok()?;
    reader.take(MAX_RECORD_BYTES).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice::<ProcessRecord>(&bytes)
        .ok()
        .map(ProcessRecord::cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locks() -> (tempfile::TempDir, SessionLocks) {
        let dir = tempfile::tempdir().expect("tempdir");
        let locks = SessionLocks::beside(&dir.path().join("headstart.db"));
        (dir, locks)
    }

    #[test]
    fn lock_files_sit_beside_the_database_and_hostile_ids_stay_inside() {
        let (dir, locks) = locks();
        assert_eq!(locks.dir(), dir.path().join("headstart.db.owners"));
        let plain = SessionId::from("0192f3a4-7b1c-7000-8000-0000000000aa");
        assert_eq!(
            locks.path_of(&plain),
            locks.dir().join("0192f3a4-7b1c-7000-8000-0000000000aa.lock")
        );
        for hostile in ["../../etc/passwd", "", "a/b", "..", &"x".repeat(65), "é"] {
            let name = lock_file_name(&SessionId::from(hostile));
            assert!(name.starts_with('~') && name.ends_with(".lock"), "{hostile:?}: {name}");
            assert!(!name.contains('/') && !name.contains(".."), "{name}");
            assert_eq!(name, lock_file_name(&SessionId::from(hostile)), "stable");
        }
        assert_ne!(
            lock_file_name(&SessionId::from("a/b")),
            lock_file_name(&SessionId::from("a/c"))
        );
    }

    #[test]
    fn a_held_session_is_refused_naming_its_owner_and_freed_on_drop() {
        let (_dir, locks) = locks();
        let session = SessionId::from("s1");
        let lock = locks.take(&session, false, 1_000_000).expect("free");
        assert_eq!(lock.taken(), &Take::Free);
        // A second handle in this process stands for another process: flock locks belong to open files.
        let refused = locks.take(&session, false, 2_000_000).expect_err("held");
        let OwnershipError::Refused(refusal) = refused else {
            panic!("{refused:?}")
        };
        let Holder::Process(Some(record)) = &refusal.holder else {
            panic!("{refusal:?}")
        };
        assert_eq!((record.pid, record.since_us), (std::process::id(), 1_000_000));
        assert!(
            refusal.to_string().starts_with("session s1 is running in process "),
            "{refusal}"
        );
        drop(lock);
        assert!(!locks.path_of(&session).exists(), "the lock file is deleted on release");
        let again = locks.take(&session, false, 3_000_000).expect("free again");
        assert_eq!(again.taken(), &Take::Free);
    }

    #[test]
    fn a_lock_file_left_behind_unlocked_is_free() {
        let (_dir, locks) = locks();
        let session = SessionId::from("s1");
        // What a crashed owner leaves: its file and record, no lock.
        std::fs::create_dir_all(locks.dir()).expect("dir");
        std::fs::write(
            locks.path_of(&session),
            r#"{"pid": 4242, "host": "gone", "since_us": 5}"#,
        )
        .expect("record");
        let lock = locks.take(&session, false, 7).expect("a dead owner's session is free");
        assert_eq!(lock.taken(), &Take::Free);
        let written: ProcessRecord =
            serde_json::from_slice(&std::fs::read(lock.path()).expect("read")).expect("a record");
        assert_eq!((written.pid, written.since_us), (std::process::id(), 7));
    }

    #[test]
    fn force_takes_a_held_session_over_and_the_old_holder_leaves_the_new_file_alone() {
        let (_dir, locks) = locks();
        let session = SessionId::from("s1");
        let old = locks.take(&session, false, 1).expect("free");
        let new = locks.take(&session, true, 2).expect("forced");
        let Take::TakeOver(Some(record)) = new.taken() else {
            panic!("{:?}", new.taken())
        };
        assert_eq!(record.since_us, 1);
        // The old holder lets go: the new owner's file stays, and stays locked.
        drop(old);
        assert!(new.path().exists());
        assert!(matches!(
            locks.take(&session, false, 3),
            Err(OwnershipError::Refused(_))
        ));
        drop(new);
        assert!(locks.take(&session, false, 4).is_ok());
    }

    #[test]
    fn a_hostile_record_names_nobody_but_the_lock_still_counts() {
        let (_dir, locks) = locks();
        let session = SessionId::from("s1");
        let lock = locks.take(&session, false, 1).expect("free");
        std::fs::write(lock.path(), vec![b'{'; 100_000]).expect("garbage");
        let refused = locks.take(&session, false, 2).expect_err("held");
        assert!(
            matches!(&refused, OwnershipError::Refused(r) if r.holder == Holder::Process(None)),
            "{refused:?}"
        );
    }
}

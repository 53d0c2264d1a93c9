//! The file tools: confinement beneath the working directory, refused secrets, FIFOs and transcripts, cut
//! output, cancellation.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::path::PathBuf;

use super::*;
use crate::builtin_tools::secrets::transcript_files;

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

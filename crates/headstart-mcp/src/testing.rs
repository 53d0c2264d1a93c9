//! Test support (feature `testing`): the reference server `@modelcontextprotocol/server-everything`, installed
//! with npm into a cache folder once, for the interop tests, the CLI's tests and the example's test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The version of `@modelcontextprotocol/server-everything` the interop tests run against.
pub const SERVER_EVERYTHING_VERSION: &str = "2026.8.31";

/// Set to `1` to make a missing node, npm or package a test failure instead of a skip (CI sets it).
pub const REQUIRE_ENV: &str = "HEADSTART_REQUIRE_MCP";

/// The server's entry point (`…/dist/index.js`, started as `node <entry> stdio`), installed under `cache` with npm
/// unless it is there already; `Err` says why it cannot be had.
pub fn server_everything(cache: &Path) -> Result<PathBuf, String> {
    // The server runs on node whether or not it is installed already.
    runs("node")?;
    let dir = cache.join(format!("server-everything-{SERVER_EVERYTHING_VERSION}"));
    let entry = entry_in(&dir);
    if entry.is_file() {
        return Ok(entry);
    }
    runs("npm")?;
    std::fs::create_dir_all(cache).map_err(|error| format!("cannot create {}: {error}", cache.display()))?;
    // Installed beside and renamed into place, so that tests running at once never see half an installation.
    let staging = tempdir_in(cache)?;
    let package = format!("@modelcontextprotocol/server-everything@{SERVER_EVERYTHING_VERSION}");
    let output = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&staging)
        .arg(&package)
        .output()
        .map_err(|error| format!("cannot run npm: {error}"))?;
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "`npm install {package}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    if std::fs::rename(&staging, &dir).is_err() {
        // Another test installed it first; theirs is as good.
        let _ = std::fs::remove_dir_all(&staging);
    }
    if entry.is_file() {
        Ok(entry)
    } else {
        Err(format!("npm installed {package}, but {} is missing", entry.display()))
    }
}

/// [`server_everything`] for a test: the entry point, or `None` after printing why the test is skipped; with
/// `HEADSTART_REQUIRE_MCP=1`, a panic instead.
pub fn server_everything_or_skip(cache: &Path) -> Option<PathBuf> {
    match server_everything(cache) {
        Ok(entry) => Some(entry),
        Err(why) if std::env::var(REQUIRE_ENV).is_ok_and(|value| value == "1") => {
            panic!("the MCP interop test cannot run, and {REQUIRE_ENV}=1 requires it: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED: the MCP interop test cannot run: {why} (set {REQUIRE_ENV}=1 to make this a failure)");
            None
        }
    }
}

fn runs(program: &str) -> Result<(), String> {
    match Command::new(program).arg("--version").output() {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(format!("`{program} --version` failed with {}", output.status)),
        Err(error) => Err(format!("`{program}` cannot be run: {error}")),
    }
}

fn entry_in(dir: &Path) -> PathBuf {
    dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

fn tempdir_in(cache: &Path) -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    let dir = cache.join(format!(".installing-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    Ok(dir)
}

//! What the Python tests share: where things are, running a command, a virtual environment, and the skip rule.

#![allow(dead_code)] // each test binary uses its part

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to `1` to make a missing python3 or a failed installation a test failure instead of a skip.
pub const REQUIRE_ENV: &str = "HEADSTART_REQUIRE_PYTHON";

/// This crate's folder.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's folder.
pub fn workspace_dir() -> PathBuf {
    crate_dir().join("../..")
}

/// The python3 virtual environments are made from (`HEADSTART_PYTHON`, default `python3`), and its version line.
pub fn base_python() -> Result<(String, String), String> {
    let base = std::env::var("HEADSTART_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let version = output(Command::new(&base).arg("--version"))?;
    Ok((base, version.trim().to_owned()))
}

/// A new virtual environment at `dir` (whatever was there is removed); its python.
pub fn make_venv(base: &str, dir: &Path) -> Result<PathBuf, String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|error| format!("cannot remove the old environment: {error}"))?;
    }
    output(Command::new(base).args(["-m", "venv"]).arg(dir))?;
    Ok(dir.join("bin/python"))
}

/// `pip install --quiet` of `what` into the environment of `python`.
pub fn pip_install(python: &Path, what: &[&str], env: &[(&str, &OsStr)]) -> Result<String, String> {
    let mut command = Command::new(python);
    command
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(what);
    for (name, value) in env {
        command.env(name, value);
    }
    output(&mut command)
}

/// `value`, or, when the Python tests cannot run, `None` after printing why; a panic instead when
/// `HEADSTART_REQUIRE_PYTHON=1` (CI) requires them.
pub fn or_skip<T>(what: &str, value: Result<T, String>) -> Option<T> {
    headstart_testkit::skip::or_skip(REQUIRE_ENV, what, value)
}

pub use headstart_testkit::command::output;

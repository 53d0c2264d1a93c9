// The addon: the Node-API library cargo built from this crate. `npm install` puts it beside the package as
// `headstart.<platform>-<arch>.node` (scripts/build.mjs); HEADSTART_NODE_ADDON names another file (the test suite
// loads the library `cargo test` has just built).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));

/** The addon's file name on this platform. */
export const addonName = `headstart.${process.platform}-${process.arch}.node`;

function load() {
  const path = process.env.HEADSTART_NODE_ADDON || join(here, "..", addonName);
  if (!existsSync(path)) {
    throw new Error(
      `headstart's native addon is missing (${path}): install the package with npm from a checkout ` +
        "(npm install --install-links ./crates/headstart-node builds it with cargo), or set HEADSTART_NODE_ADDON. " +
        "npm 12 skips the build script of a dependency the project has not allowed: " +
        "`npm approve-scripts headstart`, then `npm rebuild headstart`",
    );
  }
  // dlopen, not require: the test suite's library keeps cargo's name (`libheadstart_node.so`).
  const addon = { exports: {} };
  process.dlopen(addon, path);
  return addon.exports;
}

/** The addon's exports: openStore, NativeStore, NativeEngine, NativeResponse. */
export const native = load();

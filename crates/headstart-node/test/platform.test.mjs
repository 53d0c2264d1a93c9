// Which addon a machine needs (napi-rs's platform names), and the refusal of an addon of another version.
import { test } from "node:test";
import assert from "node:assert/strict";
import { addonFile, assertSameVersion, platformName, platformPackage } from "../node_modules/headstart/lib/platform.js";
import { native } from "../node_modules/headstart/lib/native.js";

test("platform names follow napi-rs: libc on Linux, msvc on Windows, nothing more on macOS", () => {
  const cases = [
    [{ platform: "linux", arch: "x64", glibc: "2.36" }, "linux-x64-gnu"],
    [{ platform: "linux", arch: "arm64", glibc: undefined }, "linux-arm64-musl"],
    [{ platform: "darwin", arch: "arm64" }, "darwin-arm64"],
    [{ platform: "win32", arch: "x64" }, "win32-x64-msvc"],
  ];
  for (const [machine, name] of cases) assert.equal(platformName(machine), name);
  assert.equal(addonFile("linux-x64-gnu"), "headstart.linux-x64-gnu.node");
  assert.equal(platformPackage("darwin-arm64"), "headstart-darwin-arm64");
  // This machine: the suite runs on glibc Linux.
  assert.match(platformName(), /^linux-(x64|arm64)-gnu$/);
});

test("an addon of another version is refused, naming both versions and the way out", () => {
  assert.doesNotThrow(() => assertSameVersion("0.1.0", "0.1.0", "/x.node"));
  assert.throws(
    () => assertSameVersion("0.1.0", "0.2.0", "/x.node"),
    (error) =>
      error.message.includes("headstart 0.2.0") &&
      error.message.includes("version 0.1.0") &&
      error.message.includes("/x.node") &&
      error.message.includes("npm install headstart@0.2.0"),
  );
  assert.throws(() => assertSameVersion(undefined, "0.2.0", "/x.node"), /version \(unknown\)/);
});

test("the loaded addon says it is the package's version", async () => {
  const { readFile } = await import("node:fs/promises");
  const manifest = JSON.parse(await readFile(new URL("../node_modules/headstart/package.json", import.meta.url), "utf8"));
  assert.equal(native.version(), manifest.version);
});

test("without an addon, importing the package names the platform and how to build from source", async () => {
  const { spawnSync } = await import("node:child_process");
  // The staged package has no addon beside it and no platform package is installed; only HEADSTART_NODE_ADDON
  // gives the suite one.
  const env = { ...process.env };
  delete env.HEADSTART_NODE_ADDON;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", "await import('headstart')"], {
    cwd: new URL("..", import.meta.url),
    env,
    encoding: "utf8",
  });
  assert.notEqual(child.status, 0);
  assert.match(child.stderr, new RegExp(`native addon for ${platformName()} is missing`));
  assert.match(child.stderr, new RegExp(`prebuilt package ${platformPackage(platformName())}`));
  assert.match(child.stderr, /npm install --install-links path\/to\/headstart\/crates\/headstart-node/);
  assert.match(child.stderr, /npm approve-scripts headstart/);
});

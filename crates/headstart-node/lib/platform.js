// Which addon this machine needs, and whether an addon is this package's own. napi-rs's layout: the addon of
// platform P is `headstart.P.node`, shipped in the npm package `headstart-P` (an optional dependency of the root
// package that npm installs only where its os/cpu/libc match), or built from source beside the package.

/**
 * The platform's name as napi-rs writes it: `linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`, `win32-x64-msvc`.
 * @param {{ platform: string, arch: string, glibc?: string | undefined }} [machine] defaults to this process
 * @returns {string}
 */
export function platformName(machine = thisMachine()) {
  const { platform, arch } = machine;
  if (platform === "linux") return `${platform}-${arch}-${machine.glibc ? "gnu" : "musl"}`;
  if (platform === "win32") return `${platform}-${arch}-msvc`;
  return `${platform}-${arch}`;
}

/** @returns {{ platform: string, arch: string, glibc: string | undefined }} */
function thisMachine() {
  /** @type {{ header?: { glibcVersionRuntime?: string } }} */
  const report = process.platform === "linux" ? /** @type {any} */ (process.report?.getReport()) ?? {} : {};
  return { platform: process.platform, arch: process.arch, glibc: report.header?.glibcVersionRuntime };
}

/**
 * The addon's file name for a platform.
 * @param {string} platform
 */
export function addonFile(platform) {
  return `headstart.${platform}.node`;
}

/**
 * The npm package that ships the prebuilt addon for a platform.
 * @param {string} platform
 */
export function platformPackage(platform) {
  return `headstart-${platform}`;
}

/**
 * Refuses an addon built as another version than the package's: a platform package left from another release, or a
 * stale build beside the package, may not speak this package's protocol.
 * @param {string | undefined} addonVersion what the addon says it is (undefined: it predates saying so)
 * @param {string} packageVersion
 * @param {string} path where the addon was loaded from
 */
export function assertSameVersion(addonVersion, packageVersion, path) {
  if (addonVersion === packageVersion) return;
  throw new Error(
    `headstart ${packageVersion} found its native addon at version ${addonVersion ?? "(unknown)"} (${path}); ` +
      `install the platform package of the same version (npm install headstart@${packageVersion}), ` +
      "or rebuild from source (npm rebuild headstart)",
  );
}

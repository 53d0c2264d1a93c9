// A crashed session for the tests that resume one: `crash-child.mjs` runs a pi loop whose two early tools
// (`charge`, and `lookup`, idempotent) record their effect and never finish, and is killed with SIGKILL once both
// have started.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { tmpdir } from "node:os";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = process.env.HEADSTART_SCRATCH ?? tmpdir();
mkdirSync(root, { recursive: true });

/** The lines of the file at `path` (none when it does not exist). */
export function lines(path) {
  return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
}

/** Polls `check` (it may return a promise) until it is true; a bound on the wait, not a timing the test depends on. */
export async function until(check, what, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((done) => setTimeout(done, 20));
  }
}

/**
 * Runs the crash child until both tools have started, then kills it; its folder, store, effects file and session.
 * The child is killed when test `t` ends, pass or fail.
 */
export async function crashedSession(t) {
  const dir = mkdtempSync(join(root, "crash-"));
  const store = join(dir, "agent.db");
  const effects = join(dir, "effects.txt");
  const child = spawn(process.execPath, [join(here, "crash-child.mjs"), store, effects], {
    stdio: ["ignore", "pipe", "inherit"],
    env: process.env,
  });
  t.after(() => child.kill("SIGKILL"));
  let out = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  await until(() => lines(effects).length === 2, "both early tools' effects");
  const session = /session (\S+)/.exec(out)?.[1];
  if (!session) throw new Error(`the child did not say its session: ${out}`);
  child.kill("SIGKILL");
  await new Promise((done) => (child.exitCode !== null || child.signalCode !== null ? done() : child.once("exit", done)));
  return { dir, store, effects, session };
}

// What the Node benchmarks share: the command line, medians, on-time sleeps, the corpus's scenarios (tests/scenarios)
// and their ideals, the engine's own replay of each on the virtual clock.
import { readFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { tmpdir } from "node:os";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** The command line's `--name value` pairs. */
export const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);

/** Where the scenarios are: `--scenarios DIR`, or the corpus of this checkout. */
export const SCENARIOS = args.scenarios ?? join(here, "../../../tests/scenarios");

/** The four scenarios the benchmarks run. */
export const SCENARIO_FILES = ["01-two-async-overlap.json", "03-sync-blocks-later-async.json", "05-sequential-mode.json", "06-per-tool-sequential.json"];

export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
export const percentile = (values, p) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))];

/**
 * Resolves at `deadline` (a `performance.now()` time), on time: a timer to just before it, then a check on each turn
 * of the event loop. Node's timers fire 0.5 to 1.5 ms late; a chain of three of them would put more of Node's lateness
 * into a scenario's figure than the loop under test adds, and both loops would carry it.
 */
export function sleepUntil(deadline) {
  return new Promise((done) => {
    const check = () => (performance.now() >= deadline ? done() : setImmediate(check));
    const early = deadline - performance.now() - 2;
    if (early > 0) setTimeout(check, early);
    else check();
  });
}

/** Scenario `file`, and each of its turns' events (a turn's delta log read from its file). */
export function scenarioTurns(file) {
  const scenario = JSON.parse(readFileSync(join(SCENARIOS, file), "utf8"));
  const turns = scenario.turns.map((turn) =>
    turn.log
      ? readFileSync(join(SCENARIOS, turn.log), "utf8").split("\n").filter(Boolean).map((line) => JSON.parse(line))
      : turn.events,
  );
  return { scenario, turns };
}

/** What a tool of a scenario does for call `id`: its behaviour, with the call's own over it. */
export function behaviorOf(spec, id) {
  return { ...spec.behavior, ...(spec.by_call?.[id] ?? {}) };
}

/**
 * The ideal of scenario `file` as a loop runs it: given on the command line (`--<option> 01=450,...`), or the engine's
 * replay on the virtual clock of the scenario as `adjust` (which edits a copy in place) makes it, when HEADSTART_CLI
 * names the `headstart` binary; NaN otherwise.
 */
export function idealOf(file, { option = "ideal", adjust } = {}) {
  const given = Object.fromEntries((args[option] ?? "").split(",").filter(Boolean).map((pair) => pair.split("=")));
  const key = file.slice(0, 2);
  if (given[key]) return Number(given[key]);
  if (!process.env.HEADSTART_CLI) return NaN;
  const dir = mkdtempSync(join(tmpdir(), "headstart-replay-"));
  let scenarioFile = join(SCENARIOS, file);
  if (adjust) {
    const scenario = JSON.parse(readFileSync(scenarioFile, "utf8"));
    adjust(scenario);
    for (const turn of scenario.turns) if (turn.log) turn.log = join(SCENARIOS, turn.log);
    scenarioFile = join(dir, file);
    writeFileSync(scenarioFile, JSON.stringify(scenario));
  }
  const out = join(dir, "report.json");
  execFileSync(process.env.HEADSTART_CLI, ["replay", scenarioFile, "--report", out], { stdio: "ignore" });
  return JSON.parse(readFileSync(out, "utf8")).end_ms ?? NaN;
}

/** A scenario with no tool early: every call in the batch after its response. */
export function allBatch(scenario) {
  for (const spec of scenario.tools ?? []) spec.async = false;
}

/** `ms` beside `ideal`: how far over it. */
export function overIdeal(ms, ideal) {
  return Number.isNaN(ideal) ? `${ms.toFixed(0).padStart(4)}` : `${ms.toFixed(1).padStart(6)} (+${(ms - ideal).toFixed(1)} over ${ideal.toFixed(0)})`;
}

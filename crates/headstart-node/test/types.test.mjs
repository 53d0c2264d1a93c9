// The package's types (index.d.ts, pi.d.ts, simulated.d.ts), checked as a TypeScript user would meet them: `tsc`
// with `strict` over test/types/use.ts, against pi-agent-core's and pi-ai's own declarations. And the package's
// JavaScript itself, checked (`checkJs`, `strict`) against those declarations: its JSDoc names their types.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

test("the package's types check with tsc --strict against pi-agent-core's", () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const out = spawnSync(process.execPath, [tsc, "-p", join(here, "types")], { encoding: "utf8" });
  assert.equal(out.status, 0, `tsc found errors:\n${out.stdout}${out.stderr}`);
});

test("the package's JavaScript checks with tsc (checkJs, strict) against its declarations", () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const out = spawnSync(process.execPath, [tsc, "-p", join(here, "types", "tsconfig.checkjs.json")], { encoding: "utf8" });
  assert.equal(out.status, 0, `tsc found errors in the package's JavaScript:\n${out.stdout}${out.stderr}`);
});

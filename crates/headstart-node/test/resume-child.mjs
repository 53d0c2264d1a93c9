// A process that resumes a crashed session (the crash test starts several at once on one copy): `lookup` (pi's
// `replay: "safe"`) may run again and records its effect in a file outside every process; `charge` must not run.
import { appendFileSync } from "node:fs";
import { Type } from "typebox";
import { resume } from "headstart/pi";

const [store, session, effects] = process.argv.slice(2);
const parameters = Type.Object({ text: Type.String() });
const tools = [
  {
    name: "charge",
    label: "charge",
    description: "",
    parameters,
    executionMode: "early",
    execute: () => {
      throw new Error("charge ran again after the crash");
    },
  },
  {
    name: "lookup",
    label: "lookup",
    description: "",
    parameters,
    executionMode: "early",
    replay: "safe",
    execute: async () => {
      appendFileSync(effects, "lookup recovery\n");
      // Slow enough that the other resumers, started together, arrive while this one still holds the session.
      await new Promise((done) => setTimeout(done, 1500));
      return { content: [{ type: "text", text: "balance: 10" }], details: {} };
    },
  },
];
try {
  const { recovered } = await resume({ store, storeSessionId: session, tools, policy: "rerun_idempotent" });
  console.log(JSON.stringify({ recovered }));
} catch (error) {
  const message = error instanceof Error ? error.message : String(error);
  // Only another owner's refusal is an answer; any other failure fails the test.
  if (!/is running in|is held by/.test(message)) throw error;
  console.log(JSON.stringify({ refused: message }));
}

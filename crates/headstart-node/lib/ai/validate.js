// A call's input, checked exactly as the AI SDK checks it before it runs a call (its own schema helpers: the tool's
// `inputSchema` through `asSchema`, empty input as `{}`). What passes is the input `execute` gets (a schema's
// transforms and defaults applied).

import { asSchema } from "ai";
import { safeParseJSON, safeValidateTypes } from "@ai-sdk/provider-utils";

/**
 * The input of a call of `tool` whose input text is `text`: `{ success: true, value }`, or `{ success: false, error }`.
 * @param {{ inputSchema?: unknown }} tool
 * @param {string} text
 * @returns {Promise<{ success: true, value: unknown } | { success: false, error: Error }>}
 */
export async function validateInput(tool, text) {
  const schema = asSchema(/** @type {any} */ (tool.inputSchema));
  const checked = text.trim() === "" ? await safeValidateTypes({ value: {}, schema }) : await safeParseJSON({ text, schema });
  return checked.success ? { success: true, value: checked.value } : { success: false, error: checked.error };
}

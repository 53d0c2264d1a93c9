// Where a tool call's streamed JSON input is whole: its top-level object has closed. Read incrementally, a piece at a
// time (each piece costs its own length), by the rule the engine's Chat Completions parser seals a call by (contract
// §2.15(a)): the top-level object has closed, and only whitespace follows; input that does not begin with `{` never
// completes this way.

/** The state of one call's streamed input text. */
export class ObjectEnd {
  #depth = 0;
  #inString = false;
  #escaped = false;
  /** `undefined` before the first character that is not whitespace; then whether it was `{`. */
  #object;
  /** The top-level object has closed. */
  closed = false;
  /** Something other than whitespace came after it (no valid input does that). */
  trailing = false;

  /** Reads the next piece of the input text. */
  feed(piece) {
    for (let i = 0; i < piece.length; i++) {
      const c = piece.charCodeAt(i);
      if (this.closed) {
        if (!isSpace(c)) this.trailing = true;
        continue;
      }
      if (this.#object === undefined) {
        if (isSpace(c)) continue;
        this.#object = c === 0x7b;
      }
      if (!this.#object) return;
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (c === 0x5c) this.#escaped = true;
        else if (c === 0x22) this.#inString = false;
      } else if (c === 0x22) {
        this.#inString = true;
      } else if (c === 0x7b || c === 0x5b) {
        this.#depth++;
      } else if ((c === 0x7d || c === 0x5d) && --this.#depth === 0) {
        this.closed = true;
      }
    }
  }
}

function isSpace(c) {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

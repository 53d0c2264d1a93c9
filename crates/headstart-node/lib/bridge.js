// The JavaScript end of the engine's bridge (crates/headstart-node/src/bridge.rs): the engine sends letters (run
// this call, ask this hook, abort that one) as JSON; each is handled here and answered through `engine.settle`.
// Nothing thrown here may reach the addon: every failure becomes an `{error}` answer.

/** A message of an error, of anything thrown. */
export function messageOf(error) {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A dispatcher for an engine: `handlers.call(letter, { signal, onUpdate, answer })`, `handlers.before(letter)`,
 * `handlers.after(letter)` each return (a promise of) the answer's value; a handler may give it sooner with
 * `answer(value)`, at once, without the promise turns (the first answer counts). `getEngine()` gives the engine once
 * built.
 */
export function createDispatcher(getEngine, handlers) {
  const running = new Map();
  const answer = (id, body) => {
    const engine = getEngine();
    if (!engine) return;
    let text;
    try {
      text = JSON.stringify(body);
    } catch (error) {
      // The engine names what was expected of the answer.
      text = JSON.stringify({ unreadable: `a value JSON cannot hold (${messageOf(error)})` });
    }
    engine.settle(id, text ?? JSON.stringify({ ok: null }));
  };
  return (text) => {
    let letter;
    try {
      letter = JSON.parse(text);
    } catch {
      return;
    }
    const { id, kind } = letter;
    if (kind === "abort") {
      running.get(id)?.abort(new DOMException("The tool call was cancelled", "AbortError"));
      return;
    }
    const handler = handlers[kind];
    if (!handler) {
      answer(id, { error: `no handler for ${kind}` });
      return;
    }
    const controller = new AbortController();
    running.set(id, controller);
    let answered = false;
    const respond = (body) => {
      if (answered) return;
      answered = true;
      answer(id, body);
    };
    const onUpdate = (partial) => {
      try {
        getEngine()?.update(id, JSON.stringify(partial ?? null));
      } catch {
        // A partial result that cannot be serialized is not sent; the call goes on.
      }
    };
    const answerNow = (value) => respond({ ok: value ?? null });
    Promise.resolve()
      .then(() => handler(letter, { signal: controller.signal, onUpdate, answer: answerNow }))
      .then(answerNow, (error) => respond({ error: messageOf(error) }))
      .finally(() => running.delete(id));
  };
}

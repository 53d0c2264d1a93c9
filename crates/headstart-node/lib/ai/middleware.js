// The language-model middleware (`wrapLanguageModel`'s) that makes each model call of a chat one response of its
// session: `wrapStream` reads the model's stream into the engine as it comes, and hands each part on unchanged;
// `wrapGenerate` (`generateText`, no stream) gives the engine the whole result at once and returns it unchanged.

/**
 * The middleware of `chat`.
 * @param {import("./chat.js").Chat} chat
 */
export function headstartMiddleware(chat) {
  return {
    specificationVersion: "v4",
    /** @param {{ doStream: () => PromiseLike<any>, params: any }} options */
    wrapStream: async ({ doStream, params }) => {
      const response = chat.respond(params);
      let inner;
      try {
        inner = await doStream();
      } catch (error) {
        response.failed(error);
        throw error;
      }
      return { ...inner, stream: response.pipe(inner.stream) };
    },
    /** @param {{ doGenerate: () => PromiseLike<any>, params: any }} options */
    wrapGenerate: async ({ doGenerate, params }) => {
      const response = chat.respond(params);
      let result;
      try {
        result = await doGenerate();
      } catch (error) {
        response.failed(error);
        throw error;
      }
      response.feedWhole(result);
      return result;
    },
  };
}

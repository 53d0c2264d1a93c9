// headstart for Node.js: streaming early execution for LLM agents. See README.md beside this file.
export { Engine } from "./lib/engine.js";
export { tool } from "./lib/tool.js";
export { inspect, openStore } from "./lib/store.js";
export { FORMATS } from "./lib/feed.js";

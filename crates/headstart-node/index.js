// headstart for Node.js: streaming early execution for LLM agents. See README.md beside this file.
export { Engine, tool, inspect, openStore } from "./lib/engine.js";
export { FORMATS } from "./lib/feed.js";

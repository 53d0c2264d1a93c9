// Stores: opened once per location, durability and access in a process; what one holds (`inspect`); the store of
// those given none.

import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { native } from "./native.js";

const stores = new Map();

/**
 * The open store at `location` (a SQLite path or a PostgreSQL URL), opened once per location, durability and
 * access in this process.
 */
export function openStore(location, { durability = "full", write = true } = {}) {
  if (typeof location !== "string" || location === "") {
    throw new TypeError("a store is a SQLite file path or a postgresql:// URL (a non-empty string)");
  }
  const key = `${write ? "w" : "r"}:${durability}:${location}`;
  let opened = stores.get(key);
  if (!opened) {
    opened = native.openStore(location, write, durability);
    stores.set(key, opened);
    opened.catch(() => stores.delete(key));
  }
  return opened;
}

/** What a store holds: its sessions with their messages, tool runs and figures (`headstart inspect --json`). */
export async function inspect(store, session) {
  const opened = await openStore(store, { write: false });
  return JSON.parse(await opened.inspect(session ?? null));
}

/** The file of `ephemeralStore`, once made. */
let ephemeral;

/**
 * The store of loops and chats given none: one SQLite file for the process, in memory where the machine has a memory
 * file system (`/dev/shm`), removed when the process exits. (SQLite's own `:memory:` cannot hold the store: it needs
 * a write-ahead log.)
 */
export function ephemeralStore() {
  if (!ephemeral) {
    const folder = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
    ephemeral = join(folder, `headstart-${process.pid}-${randomUUID()}.db`);
    process.once("exit", () => {
      for (const suffix of ["", "-wal", "-shm"]) rmSync(ephemeral + suffix, { force: true });
    });
  }
  return ephemeral;
}

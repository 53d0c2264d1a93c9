//! Every SQL statement of the SQLite store, and the schema migrations.
//!
//! Nothing outside this module writes SQL text. Statements take positional parameters (`?1`, `?2`, …) documented
//! next to each constant; state names are the stored names of [`RunState`](crate::RunState).

// ---------------------------------------------------------------------------------------------------------------
// Connection setup
// ---------------------------------------------------------------------------------------------------------------

/// Switches to write-ahead logging; returns the resulting mode (`wal`, or `memory` for in-memory databases).
pub(super) const SET_JOURNAL_MODE_WAL: &str = "PRAGMA journal_mode = WAL";

/// `Durability::Full`: the WAL is synced on every commit (survives power loss).
pub(super) const SET_SYNCHRONOUS_FULL: &str = "PRAGMA synchronous = FULL";

/// `Durability::Normal`: in WAL mode, a commit survives a crash of the process, not necessarily of the machine.
pub(super) const SET_SYNCHRONOUS_NORMAL: &str = "PRAGMA synchronous = NORMAL";

/// Copies what the WAL holds into the database file without waiting for readers or writers (`checkpoint.rs`).
pub(super) const CHECKPOINT_PASSIVE: &str = "PRAGMA wal_checkpoint(PASSIVE)";

/// Enforces the schema's foreign keys (off by default in SQLite, per connection).
pub(super) const ENABLE_FOREIGN_KEYS: &str = "PRAGMA foreign_keys = ON";

/// Makes a connection refuse every write (read-only stores).
pub(super) const ENABLE_QUERY_ONLY: &str = "PRAGMA query_only = ON";

/// Lets a connection write again (the `SqliteStore::set_query_only` test hook).
pub(super) const DISABLE_QUERY_ONLY: &str = "PRAGMA query_only = OFF";

/// Reads something from the file so that a file that is not a database fails early: the number of schema objects
/// (tables, indexes, views, triggers).
pub(super) const PROBE: &str = "SELECT COUNT(*) FROM sqlite_master";

/// The header's user version (applications mark their files with it; headstart leaves it 0).
pub(super) const USER_VERSION: &str = "PRAGMA user_version";

/// The header's application id (applications mark their files with it; headstart leaves it 0).
pub(super) const APPLICATION_ID: &str = "PRAGMA application_id";

/// Caps the database at `pages` pages (a per-connection limit; returns the effective limit, which is never below
/// the current size). The test hook behind `SqliteOptions::max_page_count`.
pub(super) fn set_max_page_count(pages: u64) -> String {
    format!("PRAGMA max_page_count = {}", pages.min(i64::MAX as u64))
}

// ---------------------------------------------------------------------------------------------------------------
// Schema version and migrations
// ---------------------------------------------------------------------------------------------------------------

/// `1` when the `schema_version` table exists.
pub(super) const SCHEMA_VERSION_TABLE_EXISTS: &str =
    "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version')";

/// How many tables the database holds (besides SQLite's own): a database without `schema_version` must hold none
/// before headstart will create its schema in it.
pub(super) const COUNT_TABLES: &str =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'";

/// The bookkeeping table, created before the migrations run. One row; `version` = how many migrations are applied.
pub(super) const CREATE_SCHEMA_VERSION: &str = "CREATE TABLE IF NOT EXISTS schema_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
)";

/// The applied version (no row = 0).
pub(super) const SELECT_SCHEMA_VERSION: &str = "SELECT version FROM schema_version WHERE id = 1";

/// `?1` = the new version.
pub(super) const SET_SCHEMA_VERSION: &str = "INSERT INTO schema_version (id, version) VALUES (1, ?1)
    ON CONFLICT (id) DO UPDATE SET version = excluded.version";

/// The migrations, in order: schema version N is the first N steps applied. Append only; never edit a step that
/// has shipped.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: sessions, messages, tool runs.
    "CREATE TABLE sessions (
        ordinal       INTEGER PRIMARY KEY,              -- creation order, ties of created_at_us
        id            TEXT NOT NULL UNIQUE,
        created_at_us INTEGER NOT NULL
    );
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq        INTEGER NOT NULL CHECK (seq >= 1),   -- per session, from 1, gapless
        role       TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool_result')),
        request    INTEGER CHECK (request IS NULL OR (role = 'assistant' AND request >= 0)),
        turn_id    TEXT CHECK (turn_id IS NULL OR role = 'assistant'),
        at_us      INTEGER NOT NULL,
        body       TEXT NOT NULL,                       -- serde_json of headstart_core::model::Message
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE tool_runs (
        session_id     TEXT NOT NULL REFERENCES sessions (id),
        call_id        TEXT NOT NULL,
        admission      INTEGER NOT NULL CHECK (admission >= 1),   -- per session admission order, from 1
        tool_name      TEXT NOT NULL,
        request        INTEGER NOT NULL CHECK (request >= 0),
        fragment_seq   INTEGER NOT NULL,
        state          TEXT NOT NULL
                       CHECK (state IN ('admitted', 'started', 'finished', 'cancelled', 'skipped')),
        outcome        TEXT,
        admitted_at_us INTEGER NOT NULL,
        started_at_us  INTEGER,
        ended_at_us    INTEGER,
        result_seq     INTEGER,
        PRIMARY KEY (session_id, call_id),
        UNIQUE (session_id, admission),
        FOREIGN KEY (session_id, fragment_seq) REFERENCES messages (session_id, seq),
        FOREIGN KEY (session_id, result_seq) REFERENCES messages (session_id, seq)
    );",
    // 2: the work queue of a fleet (contract §7.5): state, owner, epoch (the fencing token) and lease expiry (µs on
    // the database's clock). Existing sessions become 'unqueued': driven by their creator, never claimed.
    "ALTER TABLE sessions ADD COLUMN state TEXT NOT NULL DEFAULT 'unqueued'
        CHECK (state IN ('unqueued', 'pending', 'running', 'completed', 'failed'));
    ALTER TABLE sessions ADD COLUMN owner TEXT;
    ALTER TABLE sessions ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0);
    ALTER TABLE sessions ADD COLUMN lease_expires_at_us INTEGER;
    ALTER TABLE sessions ADD COLUMN failure TEXT;
    CREATE INDEX sessions_claimable ON sessions (ordinal) WHERE state IN ('pending', 'running');",
    // 3: a call id is unique per response, not per session (contract §7.2.2): a run is keyed by (session, request,
    // call id), and a tool result stores the request whose call it answers. SQLite alters neither a primary key nor
    // a CHECK, so both tables are rebuilt: new tables are filled, the old ones dropped (runs first: nothing refers
    // to them), and the new ones renamed, which also renames the runs' references to `messages_v3`. Results of
    // admitted calls get their run's request; a result of a never-admitted call keeps NULL (ids were unique per
    // session before this step, so the context pairs it by id alone).
    "CREATE TABLE messages_v3 (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq        INTEGER NOT NULL CHECK (seq >= 1),   -- per session, from 1, gapless
        role       TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool_result')),
        request    INTEGER CHECK (request IS NULL OR (role IN ('assistant', 'tool_result') AND request >= 0)),
        turn_id    TEXT CHECK (turn_id IS NULL OR role = 'assistant'),
        at_us      INTEGER NOT NULL,
        body       TEXT NOT NULL,                       -- serde_json of headstart_core::model::Message
        PRIMARY KEY (session_id, seq)
    );
    INSERT INTO messages_v3 (session_id, seq, role, request, turn_id, at_us, body)
        SELECT m.session_id, m.seq, m.role,
            CASE WHEN m.role = 'tool_result'
                THEN (SELECT r.request FROM tool_runs AS r WHERE r.session_id = m.session_id AND r.result_seq = m.seq)
                ELSE m.request END,
            m.turn_id, m.at_us, m.body
        FROM messages AS m;
    CREATE TABLE tool_runs_v3 (
        session_id     TEXT NOT NULL REFERENCES sessions (id),
        call_id        TEXT NOT NULL,
        admission      INTEGER NOT NULL CHECK (admission >= 1),   -- per session admission order, from 1
        tool_name      TEXT NOT NULL,
        request        INTEGER NOT NULL CHECK (request >= 0),
        fragment_seq   INTEGER NOT NULL,
        state          TEXT NOT NULL
                       CHECK (state IN ('admitted', 'started', 'finished', 'cancelled', 'skipped')),
        outcome        TEXT,
        admitted_at_us INTEGER NOT NULL,
        started_at_us  INTEGER,
        ended_at_us    INTEGER,
        result_seq     INTEGER,
        PRIMARY KEY (session_id, request, call_id),
        UNIQUE (session_id, admission),
        FOREIGN KEY (session_id, fragment_seq) REFERENCES messages_v3 (session_id, seq),
        FOREIGN KEY (session_id, result_seq) REFERENCES messages_v3 (session_id, seq)
    );
    INSERT INTO tool_runs_v3 (session_id, call_id, admission, tool_name, request, fragment_seq, state, outcome,
            admitted_at_us, started_at_us, ended_at_us, result_seq)
        SELECT session_id, call_id, admission, tool_name, request, fragment_seq, state, outcome,
            admitted_at_us, started_at_us, ended_at_us, result_seq
        FROM tool_runs;
    DROP TABLE tool_runs;
    DROP TABLE messages;
    ALTER TABLE messages_v3 RENAME TO messages;
    ALTER TABLE tool_runs_v3 RENAME TO tool_runs;",
    // 4: what a session was submitted with beyond its prompt (`SessionQueue::submit_with`): its own system prompt
    // and model, NULL for the worker's own. Existing sessions have neither.
    "ALTER TABLE sessions ADD COLUMN system_prompt TEXT;
    ALTER TABLE sessions ADD COLUMN model TEXT;",
    // 5: when each call was sealed (µs, the engine's clock), written with its admission (contract §7.2). Runs
    // admitted before this step have none.
    "ALTER TABLE tool_runs ADD COLUMN sealed_at_us INTEGER;",
    // 6: queues and retries (issue 44): the queue a session waits in (existing sessions: `default`); how many times a
    // worker released it because its model's provider was down; and, after such a release, the instant (the
    // database's clock, µs) before which no worker claims it.
    "ALTER TABLE sessions ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
    ALTER TABLE sessions ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0);
    ALTER TABLE sessions ADD COLUMN not_before_us INTEGER;
    CREATE INDEX sessions_claimable_by_queue ON sessions (queue, ordinal) WHERE state IN ('pending', 'running');",
];

// ---------------------------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------------------------

/// `?1` = session id → `1` when it exists.
pub(super) const SESSION_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1)";

/// `?1` = session id. Columns: state, owner, epoch (the fence a write checks, `backend::LeaseRow`).
pub(super) const SESSION_LEASE: &str = "SELECT state, owner, epoch FROM sessions WHERE id = ?1";

/// `?1` = id, `?2` = created_at_us, `?3` = state (`unqueued`, or `pending` for a submitted session), `?4` =
/// system prompt, `?5` = model (the submitted settings, NULL when not given), `?6` = queue.
pub(super) const INSERT_SESSION: &str =
    "INSERT INTO sessions (id, created_at_us, state, system_prompt, model, queue) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// Columns: id, created_at_us, message count, state, owner, epoch, lease_expires_at_us, failure, system_prompt,
/// model, queue, attempts, not_before_us (`backend::SessionRow`). Oldest first (creation time, then creation
/// order).
pub(super) const LIST_SESSIONS: &str = "SELECT s.id, s.created_at_us,
        (SELECT COUNT(*) FROM messages AS m WHERE m.session_id = s.id),
        s.state, s.owner, s.epoch, s.lease_expires_at_us, s.failure, s.system_prompt, s.model,
        s.queue, s.attempts, s.not_before_us
    FROM sessions AS s
    ORDER BY s.created_at_us, s.ordinal";

/// A number that changes when another connection commits to the file.
pub(super) const DATA_VERSION: &str = "PRAGMA data_version";

/// `?1` = state (NULL: any), `?2` = limit, `?3` = offset. The columns of [`LIST_SESSIONS`], newest first: one page
/// of the listing, the message counts counted for that page only.
pub(super) const LIST_SESSIONS_PAGE: &str = "SELECT s.id, s.created_at_us,
        (SELECT COUNT(*) FROM messages AS m WHERE m.session_id = s.id),
        s.state, s.owner, s.epoch, s.lease_expires_at_us, s.failure, s.system_prompt, s.model,
        s.queue, s.attempts, s.not_before_us
    FROM sessions AS s
    WHERE ?1 IS NULL OR s.state = ?1
    ORDER BY s.created_at_us DESC, s.ordinal DESC
    LIMIT ?2 OFFSET ?3";

/// `?1` = session id. The columns of [`LIST_SESSIONS`] for that session alone.
pub(super) const ONE_SESSION: &str = "SELECT s.id, s.created_at_us,
        (SELECT COUNT(*) FROM messages AS m WHERE m.session_id = s.id),
        s.state, s.owner, s.epoch, s.lease_expires_at_us, s.failure, s.system_prompt, s.model,
        s.queue, s.attempts, s.not_before_us
    FROM sessions AS s
    WHERE s.id = ?1";

/// `?1` = state (NULL: any). How many sessions [`LIST_SESSIONS_PAGE`] pages through.
pub(super) const COUNT_SESSIONS: &str = "SELECT COUNT(*) FROM sessions WHERE ?1 IS NULL OR state = ?1";

// ---------------------------------------------------------------------------------------------------------------
// The work queue (contract §7.5). A claim runs in a write (`BEGIN IMMEDIATE`) transaction, which SQLite serializes with
// every other writer of the file, in this process or another: no two claimers can pick the same session, so no
// `SKIP LOCKED` is needed.
// ---------------------------------------------------------------------------------------------------------------

/// The database's clock: µs since the Unix epoch (millisecond resolution).
pub(super) const NOW_US: &str = "SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER)";

/// `?1` = now (µs), `?2` = limit, `?3` = the queues (a JSON array of names). Columns: id, owner. Claimable sessions
/// of those queues, oldest first: pending ones whose backoff has passed, or running ones with an expired lease. The
/// first condition repeats the partial indexes' so that SQLite can use them.
pub(super) const CLAIMABLE: &str = "SELECT id, owner FROM sessions
    WHERE state IN ('pending', 'running')
        AND queue IN (SELECT value FROM json_each(?3))
        AND ((state = 'pending' AND (not_before_us IS NULL OR not_before_us <= ?1))
            OR (state = 'running' AND lease_expires_at_us <= ?1))
    ORDER BY ordinal
    LIMIT ?2";

/// `?1` session id, `?2` owner, `?3` lease expiry (µs). Returns the new epoch and the session's settings
/// (system_prompt, model, queue) and attempts. A retried session keeps its last error until it ends.
pub(super) const CLAIM_SESSION: &str = "UPDATE sessions
    SET state = 'running', owner = ?2, epoch = epoch + 1, lease_expires_at_us = ?3, not_before_us = NULL,
        failure = CASE WHEN attempts > 0 THEN failure END
    WHERE id = ?1
    RETURNING epoch, system_prompt, model, queue, attempts";

/// `?1` session id. Columns: the owner when the session is `running`, else NULL (`SessionQueue::take_over`'s
/// previous owner).
pub(super) const RUNNING_OWNER: &str = "SELECT CASE WHEN state = 'running' THEN owner END FROM sessions WHERE id = ?1";

/// `?1` session id, `?2` owner, `?3` epoch, `?4` new lease expiry (µs). Returns the expiry when the lease is still
/// held, no row otherwise.
pub(super) const RENEW_LEASE: &str = "UPDATE sessions SET lease_expires_at_us = ?4
    WHERE id = ?1 AND owner = ?2 AND epoch = ?3 AND state = 'running'
    RETURNING lease_expires_at_us";

/// `?1` session id, `?2` owner, `?3` epoch, `?4` new state, `?5` failure reason (a retry's: its last error), `?6`
/// attempts to add (1 for a retry), `?7` the retry's backoff from now (µs; NULL otherwise), `?8` now (µs). Changes
/// one row when the lease is held, none otherwise. A released session (`pending`) loses its owner; a finished one
/// keeps it, for inspection.
pub(super) const FINISH_SESSION: &str = "UPDATE sessions
    SET state = ?4, owner = CASE WHEN ?4 = 'pending' THEN NULL ELSE owner END, lease_expires_at_us = NULL,
        failure = ?5, attempts = attempts + ?6, not_before_us = ?8 + ?7
    WHERE id = ?1 AND owner = ?2 AND epoch = ?3 AND state = 'running'";

// ---------------------------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------------------------

/// `?1` = session id → the next sequence number (only meaningful inside a write transaction).
pub(super) const NEXT_SEQ: &str = "SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?1";

/// `?1` session id, `?2` seq, `?3` role, `?4` request, `?5` turn_id, `?6` at_us, `?7` body.
pub(super) const INSERT_MESSAGE: &str = "INSERT INTO messages (session_id, seq, role, request, turn_id, at_us, body)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// `?1` = session id, `?2` = the last seq already read (0: the whole log). Columns: seq, role, request, at_us, body;
/// in write order. A range of the primary key, so its cost follows the rows returned.
pub(super) const LOAD_LOG: &str = "SELECT seq, role, request, at_us, body FROM messages
    WHERE session_id = ?1 AND seq > ?2
    ORDER BY seq";

// ---------------------------------------------------------------------------------------------------------------
// Tool runs
// ---------------------------------------------------------------------------------------------------------------

/// `?1` session id, `?2` request, `?3` call id. Columns: state, result_seq.
pub(super) const RUN_STATE: &str =
    "SELECT state, result_seq FROM tool_runs WHERE session_id = ?1 AND request = ?2 AND call_id = ?3";

/// `?1` = session id → the next admission number (only meaningful inside a write transaction).
pub(super) const NEXT_ADMISSION: &str = "SELECT COALESCE(MAX(admission), 0) + 1 FROM tool_runs WHERE session_id = ?1";

/// `?1` session id, `?2` call id, `?3` admission, `?4` tool name, `?5` request, `?6` fragment seq,
/// `?7` admitted_at_us, `?8` sealed_at_us (NULL when unknown).
pub(super) const INSERT_ADMITTED_RUN: &str = "INSERT INTO tool_runs
        (session_id, call_id, admission, tool_name, request, fragment_seq, state, admitted_at_us, sealed_at_us)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'admitted', ?7, ?8)";

/// `?1` session id, `?2` request, `?3` call id, `?4` started_at_us. Only moves `admitted → started`.
pub(super) const MARK_STARTED: &str = "UPDATE tool_runs SET state = 'started', started_at_us = ?4
    WHERE session_id = ?1 AND request = ?2 AND call_id = ?3 AND state = 'admitted'";

/// `?1` session id, `?2` request, `?3` call id, `?4` state, `?5` outcome, `?6` ended_at_us, `?7` result seq,
/// `?8` started_at_us (kept if one is already stored). Only ends a run that has not ended.
pub(super) const END_RUN: &str = "UPDATE tool_runs
    SET state = ?4, outcome = ?5, ended_at_us = ?6, result_seq = ?7,
        started_at_us = COALESCE(started_at_us, ?8)
    WHERE session_id = ?1 AND request = ?2 AND call_id = ?3 AND state IN ('admitted', 'started')
        AND result_seq IS NULL";

/// `?1` = session id, `?2` = the first request wanted (0: all). The run columns read by `RawRun` (call_id,
/// tool_name, request, fragment_seq, state, outcome, admitted_at_us, started_at_us, ended_at_us, result_seq,
/// sealed_at_us), in admission order. A range of the run key (session, request, call id), then a sort of the rows
/// found, so its cost follows the runs returned.
pub(super) const TOOL_RUNS: &str = "SELECT call_id, tool_name, request, fragment_seq, state, outcome,
        admitted_at_us, started_at_us, ended_at_us, result_seq, sealed_at_us
    FROM tool_runs
    WHERE session_id = ?1 AND request >= ?2
    ORDER BY admission";

/// `?1` = session id. The run columns of [`TOOL_RUNS`] followed by the owning fragment's body (NULL if missing),
/// for runs that are admitted or started and have no result, in admission order.
pub(super) const UNFINISHED_RUNS: &str = "SELECT r.call_id, r.tool_name, r.request, r.fragment_seq, r.state,
        r.outcome, r.admitted_at_us, r.started_at_us, r.ended_at_us, r.result_seq, r.sealed_at_us, m.body
    FROM tool_runs AS r
    LEFT JOIN messages AS m ON m.session_id = r.session_id AND m.seq = r.fragment_seq
    WHERE r.session_id = ?1 AND r.state IN ('admitted', 'started') AND r.result_seq IS NULL
    ORDER BY r.admission";

/// The statements of the engine's write path (a fragment commit, a start mark, a result) and of the group commit,
/// prepared when the store opens so that the first commit of a process, on the path from a call's seal to its start,
/// does not parse SQL. Together with the reads of the agent loop they fit [`STATEMENT_CACHE_CAPACITY`].
pub(super) const HOT_PATH: &[&str] = &[
    "BEGIN IMMEDIATE",
    "SAVEPOINT job",
    "RELEASE job",
    "COMMIT",
    SESSION_EXISTS,
    SESSION_LEASE,
    NEXT_SEQ,
    INSERT_MESSAGE,
    NEXT_ADMISSION,
    INSERT_ADMITTED_RUN,
    MARK_STARTED,
    RUN_STATE,
    END_RUN,
    LOAD_LOG,
];

/// Prepared statements the connection keeps (rusqlite's default, 16, is fewer than the statements one agent run
/// uses, so the least recently used were parsed again and again).
pub(super) const STATEMENT_CACHE_CAPACITY: usize = 64;

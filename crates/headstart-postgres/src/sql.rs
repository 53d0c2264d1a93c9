//! Every SQL statement of the PostgreSQL store, and the schema migrations.
//!
//! Nothing outside this module writes SQL text. Every table lives in the schema [`SCHEMA`] (`headstart`), named in
//! full in each statement, so the store never depends on a connection's `search_path` and shares a database with
//! other applications' tables. Statements take positional parameters (`$1`, `$2`, …), documented next to each
//! constant and cast to their types where PostgreSQL could not infer them. Times are `bigint` microseconds: the
//! caller's clock for transcript times, the database's clock ([`NOW_US`]) for leases.

/// The schema holding every table of the store.
pub(crate) const SCHEMA: &str = "headstart";

// ---------------------------------------------------------------------------------------------------------------
// Connection setup
// ---------------------------------------------------------------------------------------------------------------

/// The session's `synchronous_commit` level and the server's encoding.
pub(crate) const SETTINGS: &str = "SELECT current_setting('synchronous_commit'), current_setting('server_encoding')";

/// Raises a connection's commits to a durable, replicated level (run when the level found is below `on`).
pub(crate) const SYNCHRONOUS_COMMIT_ON: &str = "SET synchronous_commit = on";

/// `Durability::Normal`: a transaction that admits no call commits without waiting for the flush (it survives a
/// crash of the database server process only once the WAL writer flushed it, within about 3 × `wal_writer_delay`).
pub(crate) const RELAX_COMMIT: &str = "SET LOCAL synchronous_commit = off";

// ---------------------------------------------------------------------------------------------------------------
// Schema version and migrations
// ---------------------------------------------------------------------------------------------------------------

/// Serializes migrations across every process connecting at once: a transaction-level advisory lock on this key
/// (the bytes of "headstrt").
pub(crate) const LOCK_MIGRATIONS: &str = "SELECT pg_advisory_xact_lock(7522537984318632052)";

/// `true` when the `schema_version` table exists. Read from the catalog with the statement's snapshot (not with
/// `to_regclass`, whose cached catalog view can miss a table another process created while this one waited for
/// [`LOCK_MIGRATIONS`]).
pub(crate) const SCHEMA_VERSION_TABLE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
    WHERE schemaname = 'headstart' AND tablename = 'schema_version')";

/// How many tables the `headstart` schema holds: one without `schema_version` must hold none before the store
/// creates its tables in it.
pub(crate) const COUNT_TABLES: &str = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'headstart'";

/// Creates the schema and the bookkeeping table. One row; `version` = how many migrations are applied.
pub(crate) const CREATE_SCHEMA_VERSION: &str = "CREATE SCHEMA IF NOT EXISTS headstart;
    CREATE TABLE IF NOT EXISTS headstart.schema_version (
        id      INTEGER PRIMARY KEY CHECK (id = 1),
        version BIGINT NOT NULL
    )";

/// The applied version (no row = 0).
pub(crate) const SELECT_SCHEMA_VERSION: &str = "SELECT version FROM headstart.schema_version WHERE id = 1";

/// `$1` = the new version.
pub(crate) const SET_SCHEMA_VERSION: &str = "INSERT INTO headstart.schema_version (id, version) VALUES (1, $1)
    ON CONFLICT (id) DO UPDATE SET version = excluded.version";

/// The migrations, in order: schema version N is the first N steps applied. Append only; never edit a step that
/// has shipped.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: sessions with their place in the fleet's work queue, messages, tool runs: the concepts of the SQLite
    // store's schema (versions 1 and 2). Bodies are `text`, not `jsonb`: they must read back byte for byte.
    "CREATE TABLE headstart.sessions (
        id                  TEXT PRIMARY KEY,
        ordinal             BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,   -- creation order, ties of created_at_us
        created_at_us       BIGINT NOT NULL,
        state               TEXT NOT NULL DEFAULT 'unqueued'
                            CHECK (state IN ('unqueued', 'pending', 'running', 'completed', 'failed')),
        owner               TEXT,
        epoch               BIGINT NOT NULL DEFAULT 0 CHECK (epoch >= 0),    -- the fencing token: claims so far
        lease_expires_at_us BIGINT,                                           -- the database's clock
        failure             TEXT
    );
    CREATE INDEX sessions_claimable ON headstart.sessions (ordinal) WHERE state IN ('pending', 'running');
    CREATE INDEX sessions_by_creation ON headstart.sessions (created_at_us, ordinal);
    CREATE TABLE headstart.messages (
        session_id TEXT NOT NULL REFERENCES headstart.sessions (id),
        seq        BIGINT NOT NULL CHECK (seq >= 1),                         -- per session, from 1, gapless
        role       TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool_result')),
        request    BIGINT CHECK (request IS NULL OR (role = 'assistant' AND request >= 0)),
        turn_id    TEXT CHECK (turn_id IS NULL OR role = 'assistant'),
        at_us      BIGINT NOT NULL,
        body       TEXT NOT NULL,                                            -- serde_json of the message
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE headstart.tool_runs (
        session_id     TEXT NOT NULL REFERENCES headstart.sessions (id),
        call_id        TEXT NOT NULL,
        admission      BIGINT NOT NULL CHECK (admission >= 1),              -- per session admission order
        tool_name      TEXT NOT NULL,
        request        BIGINT NOT NULL CHECK (request >= 0),
        fragment_seq   BIGINT NOT NULL,
        state          TEXT NOT NULL
                       CHECK (state IN ('admitted', 'started', 'finished', 'cancelled', 'skipped')),
        outcome        TEXT,
        admitted_at_us BIGINT NOT NULL,
        started_at_us  BIGINT,
        ended_at_us    BIGINT,
        result_seq     BIGINT,
        PRIMARY KEY (session_id, call_id),
        UNIQUE (session_id, admission),
        FOREIGN KEY (session_id, fragment_seq) REFERENCES headstart.messages (session_id, seq),
        FOREIGN KEY (session_id, result_seq) REFERENCES headstart.messages (session_id, seq)
    );",
    // 2: a call id is unique per response, not per session (contract §7.2.2): a run is keyed by (session, request,
    // call id), and a tool result stores the request whose call it answers (results of admitted calls get their
    // run's request; a result of a never-admitted call keeps NULL: ids were unique per session before this step,
    // so the context pairs it by id alone). The SQLite store's version 3.
    // Version 1's check on `request` involves two columns, so PostgreSQL named it after the table alone
    // (`messages_check`, or with a number); it is found by what it checks.
    "DO $$
    DECLARE
        old_check TEXT;
    BEGIN
        SELECT conname INTO STRICT old_check FROM pg_catalog.pg_constraint
            WHERE conrelid = 'headstart.messages'::regclass AND contype = 'c'
                AND pg_catalog.pg_get_constraintdef(oid) LIKE '%request >= 0%';
        EXECUTE format('ALTER TABLE headstart.messages DROP CONSTRAINT %I', old_check);
    END $$;
    ALTER TABLE headstart.messages ADD CONSTRAINT messages_request_check
        CHECK (request IS NULL OR (role IN ('assistant', 'tool_result') AND request >= 0));
    UPDATE headstart.messages AS m SET request = r.request
        FROM headstart.tool_runs AS r
        WHERE m.role = 'tool_result' AND r.session_id = m.session_id AND r.result_seq = m.seq;
    ALTER TABLE headstart.tool_runs DROP CONSTRAINT tool_runs_pkey,
        ADD CONSTRAINT tool_runs_pkey PRIMARY KEY (session_id, request, call_id);",
    // 3: what a session was submitted with beyond its prompt (`SessionQueue::submit_with`): its own system prompt
    // and model, NULL for the worker's own. Existing sessions have neither. The SQLite store's version 4.
    "ALTER TABLE headstart.sessions ADD COLUMN system_prompt TEXT, ADD COLUMN model TEXT;",
    // 4: when each call was sealed (µs, the engine's clock), written with its admission (contract §7.2). Runs
    // admitted before this step have none. The SQLite store's version 5.
    "ALTER TABLE headstart.tool_runs ADD COLUMN sealed_at_us BIGINT;",
    // 5: queues and retries (issue 44): the queue a session waits in (existing sessions: `default`); how many times a
    // worker released it because its model's provider was down; and, after such a release, the instant (the
    // database's clock, µs) before which no worker claims it. The SQLite store's version 6.
    "ALTER TABLE headstart.sessions ADD COLUMN queue TEXT NOT NULL DEFAULT 'default',
        ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        ADD COLUMN not_before_us BIGINT;
    CREATE INDEX sessions_claimable_by_queue ON headstart.sessions (queue, ordinal)
        WHERE state IN ('pending', 'running');",
];

// ---------------------------------------------------------------------------------------------------------------
// Wake-ups
// ---------------------------------------------------------------------------------------------------------------

/// The name of the queue's notification channel, as a literal for `concat!`.
macro_rules! channel {
    () => {
        "headstart_queue"
    };
}

/// The channel on which the queue announces a session that became claimable (`pending <id> <queue>` when
/// submitted, `pending <id>` when released at a shutdown) or ended (`completed <id>`, `failed <id>`).
pub(crate) const CHANNEL: &str = channel!();

/// `$1` = payload. Sent on its own, right after the change it announces committed (see `PgStore`'s design notes):
/// a transaction that writes nothing commits without waiting for a flush, so it holds PostgreSQL's notification
/// lock only for an instant.
pub(crate) const NOTIFY: &str = concat!("SELECT pg_notify('", channel!(), "', $1::text)");

/// Run by the wake-up listener on its own connection.
pub(crate) const LISTEN: &str = concat!("LISTEN ", channel!());

/// The listener's heartbeat: a query with nothing but a comment, answered by the server without touching anything
/// (and shown in `pg_stat_activity`, where an empty one would look like a connection that never ran a query).
pub(crate) const HEARTBEAT: &str = "/* headstart-listener heartbeat */";

// ---------------------------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------------------------

/// `$1` = session id → `true` when it exists.
pub(crate) const SESSION_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM headstart.sessions WHERE id = $1)";

/// `$1` = session id. Columns: state, owner, epoch (the fence a write checks, `backend::LeaseRow`). Every write to
/// a session starts here: the row lock makes the session's writes take turns (so `MAX(seq) + 1` is gapless) and
/// keeps a claim from changing owner or epoch until the write commits: a claimer skips a locked row
/// ([`CLAIM`]), a write that comes after a claim waits for it and then sees the new epoch.
pub(crate) const LOCK_SESSION: &str = "SELECT state, owner, epoch FROM headstart.sessions WHERE id = $1 FOR UPDATE";

/// `$1` = session id. Columns: state, owner, epoch, read without a lock (why a finish was refused).
pub(crate) const SESSION_LEASE: &str = "SELECT state, owner, epoch FROM headstart.sessions WHERE id = $1";

/// `$1` = id, `$2` = created_at_us, `$3` = state (`unqueued`, or `pending` for a submitted session), `$4` =
/// system prompt, `$5` = model (the submitted settings, NULL when not given), `$6` = queue.
pub(crate) const INSERT_SESSION: &str =
    "INSERT INTO headstart.sessions (id, created_at_us, state, system_prompt, model, queue)
    VALUES ($1::text, $2::bigint, $3::text, $4::text, $5::text, $6::text)";

/// Columns: id, created_at_us, message count, state, owner, epoch, lease_expires_at_us, failure, system_prompt,
/// model, queue, attempts, not_before_us (`backend::SessionRow`). Oldest first (creation time, then creation
/// order).
pub(crate) const LIST_SESSIONS: &str = "SELECT s.id, s.created_at_us,
        (SELECT COUNT(*) FROM headstart.messages AS m WHERE m.session_id = s.id),
        s.state, s.owner, s.epoch, s.lease_expires_at_us, s.failure, s.system_prompt, s.model,
        s.queue, s.attempts, s.not_before_us
    FROM headstart.sessions AS s
    ORDER BY s.created_at_us, s.ordinal";

/// `$1` = state (NULL: any), `$2` = limit, `$3` = offset. The columns of [`LIST_SESSIONS`], newest first: one page
/// of the listing (`sessions_by_creation` read backwards), the message counts counted for that page only.
pub(crate) const LIST_SESSIONS_PAGE: &str = "SELECT s.id, s.created_at_us,
        (SELECT COUNT(*) FROM headstart.messages AS m WHERE m.session_id = s.id),
        s.state, s.owner, s.epoch, s.lease_expires_at_us, s.failure, s.system_prompt, s.model,
        s.queue, s.attempts, s.not_before_us
    FROM headstart.sessions AS s
    WHERE $1::text IS NULL OR s.state = $1::text
    ORDER BY s.created_at_us DESC, s.ordinal DESC
    LIMIT $2::bigint OFFSET $3::bigint";

/// `$1` = session id. The columns of [`LIST_SESSIONS`] for that session alone.
pub(crate) const ONE_SESSION: &str = "SELECT s.id, s.created_at_us,
        (SELECT COUNT(*) FROM headstart.messages AS m WHERE m.session_id = s.id),
        s.state, s.owner, s.epoch, s.lease_expires_at_us, s.failure, s.system_prompt, s.model,
        s.queue, s.attempts, s.not_before_us
    FROM headstart.sessions AS s
    WHERE s.id = $1::text";

/// `$1` = state (NULL: any). How many sessions [`LIST_SESSIONS_PAGE`] pages through.
pub(crate) const COUNT_SESSIONS: &str =
    "SELECT COUNT(*) FROM headstart.sessions WHERE $1::text IS NULL OR state = $1::text";

// ---------------------------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------------------------

/// `$1` session id, `$2` role, `$3` request, `$4` turn_id, `$5` at_us, `$6` body. Appends at the next sequence
/// number (the caller holds the session's row lock) and returns it.
pub(crate) const INSERT_MESSAGE: &str = "INSERT INTO headstart.messages
        (session_id, seq, role, request, turn_id, at_us, body)
    SELECT $1::text, COALESCE(MAX(seq), 0) + 1, $2::text, $3::bigint, $4::text, $5::bigint, $6::text
    FROM headstart.messages WHERE session_id = $1::text
    RETURNING seq";

/// `$1` = session id, `$2` = the last seq already read (0: the whole log). Columns: seq, role, request, at_us, body
/// (`backend::MessageRow`); in write order. A range of the primary key, so its cost follows the rows returned.
pub(crate) const LOAD_LOG: &str = "SELECT seq, role, request, at_us, body FROM headstart.messages
    WHERE session_id = $1 AND seq > $2
    ORDER BY seq";

// ---------------------------------------------------------------------------------------------------------------
// Tool runs
// ---------------------------------------------------------------------------------------------------------------

/// `$1` session id, `$2` request, `$3` call id. Columns: state, result_seq.
pub(crate) const RUN_STATE: &str = "SELECT state, result_seq FROM headstart.tool_runs
    WHERE session_id = $1::text AND request = $2::bigint AND call_id = $3::text";

/// `$1` session id, `$2` request, `$3` call ids. Columns: call_id, state: the calls of `$3` already admitted in
/// request `$2`.
pub(crate) const ADMITTED_AMONG: &str = "SELECT call_id, state FROM headstart.tool_runs
    WHERE session_id = $1::text AND request = $2::bigint AND call_id = ANY($3::text[])";

/// `$1` session id, `$2` call ids, `$3` tool names, `$7` seal times (µs, NULL when unknown) (the three the same
/// length, admission order), `$4` request, `$5` fragment seq, `$6` admitted_at_us. Numbers the runs after the
/// session's last admission.
pub(crate) const INSERT_ADMITTED_RUNS: &str = "INSERT INTO headstart.tool_runs
        (session_id, call_id, admission, tool_name, request, fragment_seq, state, admitted_at_us, sealed_at_us)
    SELECT $1::text, c.call_id, n.last + c.ord, c.tool_name, $4::bigint, $5::bigint, 'admitted', $6::bigint,
        c.sealed_at_us
    FROM unnest($2::text[], $3::text[], $7::bigint[]) WITH ORDINALITY AS c (call_id, tool_name, sealed_at_us, ord)
    CROSS JOIN (SELECT COALESCE(MAX(admission), 0) AS last FROM headstart.tool_runs WHERE session_id = $1::text) AS n";

/// `$1` session id, `$2` request, `$3` call id, `$4` started_at_us. Only moves `admitted → started`.
pub(crate) const MARK_STARTED: &str = "UPDATE headstart.tool_runs SET state = 'started', started_at_us = $4
    WHERE session_id = $1::text AND request = $2::bigint AND call_id = $3::text AND state = 'admitted'";

/// `$1` session id, `$2` request, `$3` call id, `$4` state, `$5` outcome, `$6` ended_at_us, `$7` result seq,
/// `$8` started_at_us (kept if one is already stored). Only ends a run that has not ended.
pub(crate) const END_RUN: &str = "UPDATE headstart.tool_runs
    SET state = $4, outcome = $5, ended_at_us = $6, result_seq = $7,
        started_at_us = COALESCE(started_at_us, $8)
    WHERE session_id = $1::text AND request = $2::bigint AND call_id = $3::text
        AND state IN ('admitted', 'started') AND result_seq IS NULL";

/// `$1` = session id, `$2` = the first request wanted (0: all). The run columns (`backend::RunRow`: call_id,
/// tool_name, request, fragment_seq, state, outcome, admitted_at_us, started_at_us, ended_at_us, result_seq,
/// sealed_at_us), in admission order; the primary key (session, request, call id) bounds the rows read.
pub(crate) const TOOL_RUNS: &str = "SELECT call_id, tool_name, request, fragment_seq, state, outcome,
        admitted_at_us, started_at_us, ended_at_us, result_seq, sealed_at_us
    FROM headstart.tool_runs
    WHERE session_id = $1 AND request >= $2::bigint
    ORDER BY admission";

/// `$1` = session id. The run columns of [`TOOL_RUNS`] followed by the owning fragment's body (NULL if missing),
/// for runs that are admitted or started and have no result, in admission order.
pub(crate) const UNFINISHED_RUNS: &str = "SELECT r.call_id, r.tool_name, r.request, r.fragment_seq, r.state,
        r.outcome, r.admitted_at_us, r.started_at_us, r.ended_at_us, r.result_seq, r.sealed_at_us, m.body
    FROM headstart.tool_runs AS r
    LEFT JOIN headstart.messages AS m ON m.session_id = r.session_id AND m.seq = r.fragment_seq
    WHERE r.session_id = $1 AND r.state IN ('admitted', 'started') AND r.result_seq IS NULL
    ORDER BY r.admission";

// ---------------------------------------------------------------------------------------------------------------
// The work queue (contract §7.5)
// ---------------------------------------------------------------------------------------------------------------

/// The database's clock in µs since the Unix epoch, as a subquery (`clock_timestamp()`, not the transaction's
/// start time `now()`, so a long transaction does not shorten the leases it grants).
macro_rules! now_us {
    () => {
        "(SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint AS us)"
    };
}

/// `$1` owner, `$2` limit, `$3` lease (µs), `$4` queues. Claims the oldest claimable sessions of those queues
/// (pending ones whose backoff has passed, or running with an expired lease), skipping rows another transaction
/// holds: a concurrent claimer, or a write of the current owner (`FOR UPDATE SKIP LOCKED`: no two claimers get one
/// session, and nobody waits). A retried session keeps its last error until it ends. Columns: id, epoch (after the
/// claim), lease_expires_at_us, previous owner, ordinal, system_prompt, model, queue, attempts.
pub(crate) const CLAIM: &str = concat!(
    "WITH now AS ",
    now_us!(),
    ",
    picked AS (
        SELECT s.id, s.owner AS previous_owner
        FROM headstart.sessions AS s, now
        WHERE s.state IN ('pending', 'running') AND s.queue = ANY($4::text[])
            AND ((s.state = 'pending' AND (s.not_before_us IS NULL OR s.not_before_us <= now.us))
                OR (s.state = 'running' AND s.lease_expires_at_us <= now.us))
        ORDER BY s.ordinal
        LIMIT $2
        FOR UPDATE OF s SKIP LOCKED
    )
    UPDATE headstart.sessions AS s
    SET state = 'running', owner = $1::text, epoch = s.epoch + 1, lease_expires_at_us = now.us + $3::bigint,
        not_before_us = NULL, failure = CASE WHEN s.attempts > 0 THEN s.failure END
    FROM picked, now
    WHERE s.id = picked.id
    RETURNING s.id, s.epoch, s.lease_expires_at_us, picked.previous_owner, s.ordinal, s.system_prompt, s.model,
        s.queue, s.attempts"
);

/// `$1` session id, `$2` owner, `$3` lease (µs). Takes the session over whatever its state and holder
/// (`SessionQueue::take_over`). Columns: epoch, lease_expires_at_us, the previous owner when it was running,
/// system_prompt, model, queue, attempts. No row: no such session.
pub(crate) const TAKE_OVER: &str = concat!(
    "WITH now AS ",
    now_us!(),
    ",
    previous AS (
        SELECT s.id, CASE WHEN s.state = 'running' THEN s.owner END AS owner
        FROM headstart.sessions AS s
        WHERE s.id = $1::text
        FOR UPDATE
    )
    UPDATE headstart.sessions AS s
    SET state = 'running', owner = $2::text, epoch = s.epoch + 1, lease_expires_at_us = now.us + $3::bigint,
        not_before_us = NULL, failure = CASE WHEN s.attempts > 0 THEN s.failure END
    FROM previous, now
    WHERE s.id = previous.id
    RETURNING s.epoch, s.lease_expires_at_us, previous.owner, s.system_prompt, s.model, s.queue, s.attempts"
);

/// `$1` session ids, `$2` owners, `$3` epochs (same length), `$4` lease (µs). Extends each lease still held.
/// Columns: id, epoch, lease_expires_at_us of the renewed ones.
pub(crate) const RENEW: &str = concat!(
    "WITH now AS ",
    now_us!(),
    "
    UPDATE headstart.sessions AS s SET lease_expires_at_us = now.us + $4::bigint
    FROM unnest($1::text[], $2::text[], $3::bigint[]) AS l (id, owner, epoch), now
    WHERE s.id = l.id AND s.owner = l.owner AND s.epoch = l.epoch AND s.state = 'running'
    RETURNING s.id, s.epoch, s.lease_expires_at_us"
);

/// `$1` session id, `$2` owner, `$3` epoch, `$4` new state, `$5` failure reason (a retry's: its last error), `$6`
/// attempts to add (1 for a retry), `$7` the retry's backoff from now (µs; NULL otherwise). Changes one row when the
/// lease is held, none otherwise. A released session (`pending`) loses its owner; a finished one keeps it, for
/// inspection.
pub(crate) const FINISH: &str = concat!(
    "WITH now AS ",
    now_us!(),
    "
    UPDATE headstart.sessions AS s
    SET state = $4::text, owner = CASE WHEN $4::text = 'pending' THEN NULL ELSE s.owner END,
        lease_expires_at_us = NULL, failure = $5::text, attempts = s.attempts + $6::bigint,
        not_before_us = now.us + $7::bigint
    FROM now
    WHERE s.id = $1 AND s.owner = $2 AND s.epoch = $3 AND s.state = 'running'"
);

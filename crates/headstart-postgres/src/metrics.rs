//! The store's metric, recorded through the `metrics` facade (docs/fleet.md lists every metric of
//! the workspace): an application that installs a recorder receives it with no headstart code.

use ::metrics::{counter, describe_counter};

/// Counter: SQL statements the store sent inside its operations' transactions, counted client-side: `BEGIN`, each
/// statement of the operation, the `SET LOCAL` of a relaxed commit, `COMMIT`. Not counted: a statement's `Parse`
/// the first time a connection prepares it, and what a new connection runs once (settings, the schema check).
pub const STATEMENTS: &str = "headstart_store_statements_total";

/// Registers the description of the store's metric with the installed recorder. Optional: the metric is recorded
/// either way. (It is not set to zero here: a process whose store is not PostgreSQL never shows it.)
pub fn describe() {
    describe_counter!(
        STATEMENTS,
        "SQL statements the PostgreSQL store sent in its operations' transactions (BEGIN and COMMIT included)."
    );
}

/// `count` statements were sent.
pub(crate) fn sent(count: u64) {
    counter!(STATEMENTS).increment(count);
}

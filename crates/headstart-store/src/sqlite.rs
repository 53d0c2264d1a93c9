//! SQLite implementation (being written).
use crate::types::Durability;

/// Options for opening a [`SqliteStore`].
#[derive(Debug, Clone, Default)]
pub struct SqliteOptions {
    /// Durability of each commit.
    pub durability: Durability,
}

/// The SQLite transcript store.
pub struct SqliteStore;

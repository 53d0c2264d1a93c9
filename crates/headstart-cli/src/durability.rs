//! `--durability full|normal`, shared by the commands that open a SQLite store.

use clap::ValueEnum;
use headstart::store::Durability;

/// The SQLite durability a command's store uses.
#[derive(Clone, Copy, ValueEnum)]
pub enum DurabilityArg {
    /// fsync on every commit.
    Full,
    /// Survives a process crash, not a power loss.
    Normal,
}

impl From<DurabilityArg> for Durability {
    fn from(arg: DurabilityArg) -> Self {
        match arg {
            DurabilityArg::Full => Durability::Full,
            DurabilityArg::Normal => Durability::Normal,
        }
    }
}

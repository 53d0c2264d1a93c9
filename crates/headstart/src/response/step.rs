//! What the driver's loop hands to the driver: a [`Step`], and what an accepted delta leads to, a [`FollowUp`].

use headstart_core::{DeltaEvent, ModelError};

use crate::response::runner::RunnerEvent;
use crate::response::write_queue::Written;

/// What woke the driver. The rare, large variants are boxed: a step is moved a few times per model delta, and a
/// small one keeps the per-delta path cheap.
pub(super) enum Step {
    /// A burst of model deltas was handled in place and the stream may have more: let the others run first.
    Burst,
    /// A model delta was accumulated and needs the store next.
    FollowUp(FollowUp),
    /// A result write ended.
    Written(Box<Written>),
    /// A call was prepared, published an update, or returned.
    Tool(Box<RunnerEvent>),
    /// The caller cancelled the run.
    Cancelled,
    /// The model stream's next item, or its end (`None`).
    Model(Option<Result<DeltaEvent, ModelError>>),
}

/// What an accepted delta leads to that needs the store.
pub(super) enum FollowUp {
    /// The delta broke the protocol (contract §2): end the response as `error` with this message.
    Fail(String),
    /// The response ended (`done`/`error`).
    End,
    /// A sealed call triggers a prefix commit up to this index (contract §3.1).
    Commit(usize),
}

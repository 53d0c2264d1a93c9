//! Building blocks for store implementations: everything about a write or a stored row that does not depend on the
//! database, so that every backend validates, encodes, fences and reports the same way. Using a store needs none
//! of it.
//!
//! A backend reads rows in its own types, hands the raw values to these functions, and gets the record types and
//! the [`StoreError`](crate::StoreError)s every backend must give (their wording included: the conformance suite
//! checks it).

mod messages;
mod op;
mod queue;
mod runs;
#[cfg(test)]
mod tests;

pub use self::messages::{decode, encode, encode_results, seq_u64, EncodedMessage, EncodedResult, MessageRow};
pub use self::op::{read_only, Op};
pub use self::queue::{
    attempts_u32, check_fence, check_owner, duration_us, end_state, finish_refused, lease_lost, limit_i64, new_session,
    queue_names, stored_settings, ClaimedRow, EndColumns, LeaseRow, NewSession, SessionRow,
};
pub use self::runs::{already_admitted, check_admissions, check_result, owning_call, RunRow};

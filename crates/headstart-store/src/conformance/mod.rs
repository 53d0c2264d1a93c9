//! The conformance suite: what every [`TranscriptStore`](crate::TranscriptStore) and
//! [`SessionQueue`](crate::SessionQueue) must do, as async test cases that run on any backend.
//!
//! A backend's test file describes how to get a fresh database ([`Fixture`]) and expands
//! [`conformance_tests!`](crate::conformance_tests), which generates one `#[tokio::test]` per case, so each case
//! shows (and fails) as its own test:
//!
//! ```ignore
//! async fn fixture() -> Option<MyFixture> { /* a fresh, empty database; None: skip (say why, loudly) */ }
//! headstart_store::conformance_tests!(fixture());
//! ```
//!
//! The calling crate needs `tokio` (features `macros`, `rt-multi-thread`) among its dev-dependencies. Each case is
//! also a public function here, taking the fixture. A new case is added both as a function and to the list in
//! [`conformance_tests!`](crate::conformance_tests).
//!
//! The cases were the SQLite store's tests; the SQLite-only ones (file permissions, WAL, pragmas, group commit,
//! kill-after-commit) stay with it.

pub mod before_call_keys;
pub mod before_settings;
mod calls;
mod claims;
mod concurrency;
pub mod data;
mod faults;
mod fencing;
mod fixture;
mod listing;
mod queues;
mod support;
mod transcript;

pub use self::calls::{
    a_call_id_repeated_by_another_response_is_another_call, duplicate_admission_is_a_conflict_and_stores_nothing,
    many_results_are_written_in_one_transaction_or_not_at_all,
    results_for_missing_or_ended_runs_are_conflicts_and_store_nothing,
};
pub use self::claims::{
    an_expired_lease_makes_the_session_claimable_again, claims_take_claimable_sessions_oldest_first_up_to_the_limit,
    concurrent_claimers_never_share_a_session, finish_completes_fails_or_releases,
    submit_makes_a_pending_session_with_its_prompt, submitted_settings_are_listed_and_claimed_with_the_session,
};
pub use self::concurrency::{concurrent_sessions_lose_nothing, concurrent_writes_to_one_session_keep_seqs_gapless};
pub use self::faults::{
    a_fault_between_fragment_and_runs_stores_neither, an_undecodable_body_names_its_session_and_seq,
    another_connection_lists_unfinished_calls_and_settles_them,
};
pub use self::fencing::{
    a_later_claim_fences_every_write_of_the_earlier_owner, a_take_over_fences_the_earlier_holder_at_once,
    writes_without_the_lease_are_refused,
};
pub use self::fixture::Fixture;
pub use self::listing::{
    a_session_created_under_an_id_is_listed_and_the_id_is_not_reused,
    sessions_page_lists_newest_first_filtered_and_counted,
};
pub use self::queues::{a_claim_takes_only_sessions_of_its_queues, a_retry_waits_its_backoff_and_counts_its_attempts};
pub use self::transcript::{
    message_bodies_round_trip_byte_for_byte, result_carries_a_start_time_that_mark_started_never_wrote,
    round_trip_keeps_write_order_runs_and_unfinished_calls, seal_times_round_trip_with_their_runs,
    sessions_are_uuidv7_listed_oldest_first_with_message_counts, unknown_session_is_no_session,
};

/// Generates one `#[tokio::test]` per conformance case. `$fixture` is an expression evaluated in each test, a
/// future of `Option<F>` where `F: Fixture`; `None` skips the case (the fixture says why).
#[macro_export]
macro_rules! conformance_tests {
    ($fixture:expr) => {
        $crate::conformance_tests!(@cases $fixture;
            round_trip_keeps_write_order_runs_and_unfinished_calls,
            result_carries_a_start_time_that_mark_started_never_wrote,
            seal_times_round_trip_with_their_runs,
            duplicate_admission_is_a_conflict_and_stores_nothing,
            a_call_id_repeated_by_another_response_is_another_call,
            results_for_missing_or_ended_runs_are_conflicts_and_store_nothing,
            many_results_are_written_in_one_transaction_or_not_at_all,
            unknown_session_is_no_session,
            sessions_are_uuidv7_listed_oldest_first_with_message_counts,
            sessions_page_lists_newest_first_filtered_and_counted,
            a_session_created_under_an_id_is_listed_and_the_id_is_not_reused,
            message_bodies_round_trip_byte_for_byte,
            concurrent_sessions_lose_nothing,
            concurrent_writes_to_one_session_keep_seqs_gapless,
            a_fault_between_fragment_and_runs_stores_neither,
            an_undecodable_body_names_its_session_and_seq,
            another_connection_lists_unfinished_calls_and_settles_them,
            submit_makes_a_pending_session_with_its_prompt,
            submitted_settings_are_listed_and_claimed_with_the_session,
            claims_take_claimable_sessions_oldest_first_up_to_the_limit,
            a_later_claim_fences_every_write_of_the_earlier_owner,
            a_take_over_fences_the_earlier_holder_at_once,
            an_expired_lease_makes_the_session_claimable_again,
            writes_without_the_lease_are_refused,
            finish_completes_fails_or_releases,
            concurrent_claimers_never_share_a_session,
            a_claim_takes_only_sessions_of_its_queues,
            a_retry_waits_its_backoff_and_counts_its_attempts,
        );
    };
    (@cases $fixture:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if let Some(fixture) = $fixture.await {
                    $crate::conformance::$case(&fixture).await;
                }
            }
        )*
    };
}

//! Every mode of `headstart bench` runs to completion at a small size, so that no later change of a default (the
//! per-response call cap that once broke `bench admission`'s 200-call chain) can break one unseen. Only completion
//! and the shape of each report are asserted: speed is the benchmarks' to print, never a test's to assert.

use headstart_bench::admission::{self, AdmissionOptions};
use headstart_bench::deltas::{self, DeltaVariant, DeltasOptions};
use headstart_bench::history::{self, HistoryOptions};
use headstart_bench::overlap::{self, OverlapOptions, ResponseSpec};
use headstart_bench::scheduler::{self, SchedulerOptions};
use headstart_bench::sessions::{self, SessionsOptions};
use headstart_providers::WireFormat;

#[test]
fn admission_runs_a_chain_longer_than_the_per_response_call_cap() {
    let calls = headstart::DEFAULT_MAX_CALLS_PER_RESPONSE + 22;
    let report = admission::run(&AdmissionOptions {
        calls,
        ..AdmissionOptions::default()
    })
    .expect("bench admission completes");
    assert_eq!(report.samples, calls);
    assert!(report.admission_p50_us > 0.0 && report.admission_p50_us <= report.admission_p99_us);
    assert!(report.sequential_gap_p50_us > 0.0);
    assert!(report.table().contains("sequential"));
}

#[test]
fn overlap_runs_each_contender() {
    let report = overlap::run(&OverlapOptions {
        runs: 1,
        response: ResponseSpec::tiny(),
        ..OverlapOptions::default()
    })
    .expect("bench overlap completes");
    assert_eq!(report.runs, 1);
    assert!(report.early_ms > 0.0 && report.batch_ms > 0.0 && report.lower_bound_ms > 0.0);
    assert!(report.commit_floor_ms > 0.0, "the floor was sampled");
}

#[test]
fn deltas_runs_both_variants() {
    for variant in [DeltaVariant::Text, DeltaVariant::Args] {
        let report = deltas::run(&DeltasOptions {
            n: 2_000,
            n_small: 200,
            runs: 1,
            variant,
            deltas_per_call: 20,
            ..DeltasOptions::default()
        })
        .expect("bench deltas completes");
        assert_eq!((report.n, report.n_small), (2_000, 200));
        assert!(report.engine_ns_per_delta > 0.0 && report.ratio > 0.0);
    }
}

#[test]
fn sessions_and_scheduler_run() {
    let report = sessions::run(&SessionsOptions {
        sessions: 20,
        token_ms: 1,
        tool_ms: 1,
        workers: Some(1),
        ..SessionsOptions::default()
    })
    .expect("bench sessions completes");
    assert_eq!(report.sessions, 20);
    assert!(report.calls > 0);
    let report = scheduler::run(&SchedulerOptions {
        calls: 1_000,
        ..SchedulerOptions::default()
    });
    assert_eq!(report.calls, 1_000);
}

#[test]
fn history_runs_a_session_on_both_sqlite_durabilities_and_every_context_matches_the_store() {
    let report = history::run(
        &HistoryOptions {
            rounds: 40,
            bytes: 300,
            result_bytes: 60,
            window: 10,
            verify: true,
            wire: Some(WireFormat::OpenAiChat),
            dir: None,
        },
        Vec::new(),
    )
    .expect("bench history completes, every request's context equal to a fresh read");
    let stores: Vec<&str> = report.rows.iter().map(|row| row.store.as_str()).collect();
    assert_eq!(stores, ["sqlite normal", "sqlite full"]);
    assert!(report.verified);
    for row in &report.rows {
        assert!(
            row.first_ms > 0.0 && row.last_ms > 0.0 && row.history_kib > 10.0,
            "{row:?}"
        );
    }
    for row in &report.rows {
        assert!(row.body_ms.is_some() && row.whole_body_ms.is_some(), "{row:?}");
    }
    assert!(report.table().contains("verified") && report.table().contains("request body"));
}

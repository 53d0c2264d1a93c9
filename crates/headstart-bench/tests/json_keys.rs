//! Each mode runs with tiny parameters and its JSON has exactly the keys issue 6 lists. No timing is asserted:
//! these machines are shared and noisy, and the figures are for `headstart bench`, not for tests.

use headstart_bench::admission::{self, AdmissionOptions};
use headstart_bench::deltas::{self, DeltaVariant, DeltasOptions};
use headstart_bench::overlap::{self, OverlapOptions, ResponseSpec};
use headstart_bench::sessions::{self, SessionsOptions};
use headstart_bench::Durability;
use serde_json::Value;

fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().expect("one JSON object").keys().cloned().collect();
    keys.sort();
    keys
}

fn sorted(keys: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = keys.iter().map(|key| (*key).to_owned()).collect();
    keys.sort();
    keys
}

fn numbers_are_finite(value: &Value) {
    for (key, field) in value.as_object().expect("one JSON object") {
        if let Some(number) = field.as_f64() {
            assert!(number.is_finite() && number >= 0.0, "{key} = {number}");
        }
    }
}

#[test]
fn overlap_json_has_exactly_its_keys() {
    let report = overlap::run(&OverlapOptions {
        runs: 1,
        response: ResponseSpec::tiny(),
        ..OverlapOptions::default()
    })
    .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        keys(&json),
        sorted(&[
            "early_ms",
            "batch_ms",
            "lower_bound_ms",
            "speedup",
            "overhead_ms",
            "commit_floor_ms"
        ])
    );
    numbers_are_finite(&json);
    assert_eq!(report.admitted_calls, 2);
    assert!(report.table().contains("speedup"));
}

#[test]
fn deltas_json_has_exactly_its_keys_for_both_variants() {
    for variant in [DeltaVariant::Text, DeltaVariant::Args] {
        let report = deltas::run(&DeltasOptions {
            n: 200,
            n_small: 20,
            runs: 1,
            variant,
            deltas_per_call: 10,
            ..DeltasOptions::default()
        })
        .unwrap();
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            keys(&json),
            sorted(&["n", "raw_ns_per_delta", "engine_ns_per_delta", "ratio", "growth"])
        );
        assert_eq!(json["n"], 200);
        numbers_are_finite(&json);
        assert!(report.table().contains("growth"));
        // The floor is in the table only, and was measured.
        assert!(report.table().contains("floor ns/delta"));
        assert!(report.floor_ns_per_delta > 0.0 && report.floor_small_ns_per_delta > 0.0);
    }
}

#[test]
fn admission_json_has_exactly_its_keys() {
    for durability in [Durability::Normal, Durability::Full] {
        let report = admission::run(&AdmissionOptions {
            calls: 4,
            calls_per_response: 2,
            durability,
            ..AdmissionOptions::default()
        })
        .unwrap();
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            keys(&json),
            sorted(&[
                "durability",
                "floor_p50_us",
                "floor_p99_us",
                "admission_p50_us",
                "admission_p99_us",
                "sequential_gap_p50_us",
                "sequential_gap_p99_us"
            ])
        );
        let name = match durability {
            Durability::Full => "full",
            Durability::Normal => "normal",
        };
        assert_eq!(json["durability"], name);
        numbers_are_finite(&json);
        assert_eq!(report.samples, 4);
        assert!(report.row_bytes > 0);
    }
}

#[test]
fn sessions_json_has_exactly_its_keys() {
    let report = sessions::run(&SessionsOptions {
        sessions: 3,
        token_ms: 1,
        tool_ms: 1,
        ..SessionsOptions::default()
    })
    .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        keys(&json),
        sorted(&["sessions", "wall_ms", "calls_per_s", "commits_per_s", "peak_rss_mb"])
    );
    numbers_are_finite(&json);
    assert_eq!(report.sessions, 3);
    assert_eq!(report.calls, 6);
    assert_eq!(report.commits, 30);
}

#[test]
fn provider_async_runs_each_contender_and_reports_its_runs() {
    let report = headstart_bench::provider_async::run(&headstart_bench::provider_async::ProviderAsyncOptions {
        runs: 1,
        pace_ms: 1,
        commentary: 3,
        slow_ms: 60,
        quick_ms: 5,
    })
    .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(keys(&json), sorted(&["options", "contenders"]));
    let contenders: Vec<&str> = json["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|contender| contender["contender"].as_str().unwrap())
        .collect();
    assert_eq!(contenders, ["batching", "early", "provider-async"]);
    for contender in json["contenders"].as_array().unwrap() {
        let [run] = contender["runs"].as_array().unwrap().as_slice() else {
            panic!("one run: {contender}")
        };
        assert_eq!(
            keys(run),
            sorted(&[
                "tool_round_ms",
                "model_idle_ms",
                "overlap",
                "research_delivered_ms",
                "total_ms",
                "requests"
            ])
        );
        numbers_are_finite(run);
    }
    // Only the provider-async loop asks a third time, to deliver the slow result.
    let requests: Vec<u64> = (json["contenders"].as_array().unwrap().iter())
        .map(|contender| contender["runs"][0]["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(requests, [2, 2, 3]);
}

//! The engine's metrics through the `metrics` facade, seen by a recorder of the test's own
//! (`metrics::with_local_recorder`): an early call and a call after the stream are counted apart, each with its
//! seal-to-start time, and every fragment commit is timed.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::metrics::{FRAGMENT_COMMIT, SEAL_TO_START, TOOL_CALLS_STARTED};
use headstart::store::SqliteStore;
use headstart::{tool_fn, CancellationToken, DeltaEvent, Engine, ToolContext, ToolFailure, Toolbox};
use headstart_testkit::fixtures::deltas::sealed_call;
use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// A metric's name and labels, as the recorder files it.
type Series = (String, Vec<(String, String)>);

fn series(key: &Key) -> Series {
    let labels = key
        .labels()
        .map(|label| (label.key().to_owned(), label.value().to_owned()))
        .collect();
    (key.name().to_owned(), labels)
}

/// Samples of one histogram.
#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(value);
    }
}

/// Counters and histograms by series; gauges are not used by the engine.
#[derive(Default)]
struct TestRecorder {
    counters: Mutex<BTreeMap<Series, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<Series, Arc<Samples>>>,
}

impl TestRecorder {
    fn counter(&self, name: &str, when: &str) -> u64 {
        let key = (name.to_owned(), vec![("when".to_owned(), when.to_owned())]);
        let counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        counters
            .get(&key)
            .map_or(0, |value| value.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn samples(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        let labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let histograms = self.histograms.lock().unwrap_or_else(PoisonError::into_inner);
        histograms
            .get(&(name.to_owned(), labels))
            .map_or_else(Vec::new, |samples| {
                samples.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
            })
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        Counter::from_arc(Arc::clone(counters.entry(series(key)).or_default()))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.histograms.lock().unwrap_or_else(PoisonError::into_inner);
        Histogram::from_arc(Arc::clone(histograms.entry(series(key)).or_default()))
    }
}

#[derive(serde::Deserialize, headstart::schemars::JsonSchema)]
struct Query {
    q: String,
}

/// One response: an early call sealed while the model streams, then a sync call, which starts after the stream.
async fn run_one_response() {
    let lookup = tool_fn("lookup", |args: Query, _ctx: ToolContext| async move {
        Ok::<_, ToolFailure>(format!("found {}", args.q))
    })
    .early();
    let save = tool_fn("save", |args: Query, _ctx: ToolContext| async move {
        Ok::<_, ToolFailure>(format!("saved {}", args.q))
    });
    let toolbox = Toolbox::new()
        .with(lookup)
        .and_then(|toolbox| toolbox.with(save))
        .expect("the schemas compile");
    let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory().expect("store")))
        .toolbox(toolbox)
        .build();
    let session = engine.create_session().await.expect("a session");
    let call = |index: usize, id: &str, name: &str| sealed_call(index, id, name, serde_json::json!({"q": "tokio"}));
    let mut deltas = vec![DeltaEvent::Start {
        model: None,
        response_id: None,
    }];
    deltas.extend(call(0, "c1", "lookup"));
    deltas.extend(call(1, "c2", "save"));
    deltas.push(DeltaEvent::Done {
        stop_reason: DoneReason::ToolUse,
        usage: Usage::default(),
    });
    let mut events = engine
        .wrap_next(
            &session,
            futures::stream::iter(deltas.into_iter().map(Ok)),
            CancellationToken::new(),
        )
        .await
        .expect("wraps");
    while events.next().await.is_some() {}
}

#[test]
fn the_engine_counts_early_and_after_stream_starts_and_times_them() {
    let recorder = TestRecorder::default();
    // A current-thread runtime inside the local recorder's scope: the engine's tasks run on this thread, where
    // the recorder is installed.
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(run_one_response());
    });
    assert_eq!(recorder.counter(TOOL_CALLS_STARTED, "early"), 1);
    assert_eq!(recorder.counter(TOOL_CALLS_STARTED, "after_stream"), 1);
    for when in ["early", "after_stream"] {
        let samples = recorder.samples(SEAL_TO_START, &[("when", when)]);
        assert_eq!(samples.len(), 1, "{when}: {samples:?}");
        assert!(samples[0] >= 0.0 && samples[0].is_finite(), "{when}: {samples:?}");
    }
    // The prefix holding c1, then the terminal fragment holding c2.
    let commits = recorder.samples(FRAGMENT_COMMIT, &[]);
    assert_eq!(commits.len(), 2, "{commits:?}");
    assert!(commits.iter().all(|seconds| *seconds >= 0.0), "{commits:?}");
}

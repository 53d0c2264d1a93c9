use super::*;

const PAGE: &str = r#"# HELP headstart_sessions_claimed_total Sessions claimed.
# TYPE headstart_sessions_claimed_total counter
headstart_sessions_claimed_total 3

# TYPE headstart_sessions_finished_total counter
headstart_sessions_finished_total{end="completed"} 2
headstart_sessions_finished_total{end="failed"} 1
# TYPE headstart_sessions_running gauge
headstart_sessions_running 0
# TYPE headstart_seal_to_start_seconds histogram
headstart_seal_to_start_seconds_bucket{when="early",le="0.001"} 1
headstart_seal_to_start_seconds_bucket{when="early",le="0.01"} 3
headstart_seal_to_start_seconds_bucket{when="early",le="+Inf"} 4
headstart_seal_to_start_seconds_sum{when="early"} 0.5
headstart_seal_to_start_seconds_count{when="early"} 4
headstart_seal_to_start_seconds_bucket{when="after_stream",le="0.001"} 0
headstart_seal_to_start_seconds_bucket{when="after_stream",le="0.01"} 0
headstart_seal_to_start_seconds_bucket{when="after_stream",le="+Inf"} 2
headstart_seal_to_start_seconds_sum{when="after_stream"} 2
headstart_seal_to_start_seconds_count{when="after_stream"} 2
odd{path="a \"b\" \\ c\n",x="1",} 1.5e3 1700000000000
"#;

#[test]
fn a_well_formed_page_reads_back() {
    let page = parse(PAGE).expect("the page parses");
    assert_eq!(page.types["headstart_sessions_claimed_total"], "counter");
    assert_eq!(page.help["headstart_sessions_claimed_total"], "Sessions claimed.");
    assert_eq!(page.value("headstart_sessions_claimed_total", &[]), Some(3.0));
    assert_eq!(
        page.value("headstart_sessions_finished_total", &[("end", "failed")]),
        Some(1.0)
    );
    assert_eq!(page.sum("headstart_sessions_finished_total"), Some(3.0));
    assert_eq!(page.sum("missing"), None);
    assert_eq!(
        page.value("odd", &[("path", "a \"b\" \\ c\n"), ("x", "1")]),
        Some(1500.0)
    );
    let early = page.buckets("headstart_seal_to_start_seconds", &[("when", "early")]);
    assert_eq!(early, [(0.001, 1.0), (0.01, 3.0), (f64::INFINITY, 4.0)]);
    assert_eq!(page.buckets("headstart_seal_to_start_seconds", &[]).len(), 6);
}

#[test]
fn malformed_pages_are_refused() {
    let bad = [
        ("metric", "no value"),
        ("1metric 1", "bad name"),
        ("m{a=1} 1", "unquoted label"),
        ("m{a=\"1\" b=\"2\"} 1", "labels without a comma"),
        ("m{a=\"1\",a=\"2\"} 1", "a label twice"),
        ("m{a=\"\\x\"} 1", "unknown escape"),
        ("m{a=\"1} 1", "unclosed value"),
        ("m one", "bad value"),
        ("m 1 2 3", "text after the timestamp"),
        ("# TYPE m bogus\nm 1", "unknown type"),
        ("m 1\n# TYPE m counter", "TYPE after samples"),
        ("# TYPE m counter\n# TYPE m counter\nm 1", "TYPE twice"),
        ("# TYPE m counter\nm -1", "negative counter"),
        ("a 1\nb 1\na 2", "split family"),
        (
            "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1",
            "not cumulative",
        ),
        (
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 3",
            "+Inf differs from count",
        ),
        ("# TYPE h histogram\nh_bucket 1\nh_count 1", "bucket without le"),
    ];
    for (text, why) in bad {
        assert!(parse(text).is_err(), "{why}: {text:?} was accepted");
    }
}

#[test]
fn quantiles_interpolate_within_buckets_and_merge_repeated_bounds() {
    let buckets = [(0.001, 1.0), (0.01, 3.0), (f64::INFINITY, 4.0)];
    assert_eq!(histogram_quantile(0.5, &[]), None);
    assert_eq!(histogram_quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 0.0)]), None);
    // Rank 2 of 4 falls halfway into (0.001, 0.01].
    let median = histogram_quantile(0.5, &buckets).expect("a median");
    assert!((median - 0.0055).abs() < 1e-12, "{median}");
    // Rank 0.2 falls in the first bucket, from 0.
    let low = histogram_quantile(0.05, &buckets).expect("a quantile");
    assert!((low - 0.0002).abs() < 1e-12, "{low}");
    // In +Inf: the largest finite bound.
    assert_eq!(histogram_quantile(0.99, &buckets), Some(0.01));
    // Two processes' buckets, unsorted: added up by bound.
    let merged = [
        (f64::INFINITY, 2.0),
        (0.01, 2.0),
        (0.001, 0.0),
        (0.001, 1.0),
        (0.01, 1.0),
        (f64::INFINITY, 2.0),
    ];
    assert_eq!(histogram_quantile(0.5, &merged), histogram_quantile(0.5, &buckets));
}

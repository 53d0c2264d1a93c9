//! `examples/otel.rs` runs without a collector: the spans reach the in-process exporter through
//! `tracing-opentelemetry`, named and attributed as the GenAI semantic conventions say, and the failed OTLP export
//! ends cleanly.

#[allow(dead_code)] // its `main` is for `cargo run --example otel`
#[path = "../examples/otel.rs"]
mod otel;

#[test]
fn the_otel_example_exports_genai_spans_and_exits_cleanly_without_a_collector() {
    // Port 9 (discard) has no OTLP collector: the export fails fast.
    let (spans, export_error) = otel::run("http://127.0.0.1:9/v1/traces").expect("the example runs");
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    for name in ["invoke_agent", "chat scripted-1", "execute_tool lookup"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    assert_eq!(names.iter().filter(|name| **name == "chat scripted-1").count(), 2);
    let tool = spans
        .iter()
        .find(|span| span.name == "execute_tool lookup")
        .expect("the tool span");
    for attribute in [
        "gen_ai.operation.name=execute_tool",
        "gen_ai.tool.name=lookup",
        "gen_ai.tool.call.id=call_1",
        "gen_ai.tool.type=function",
        "headstart.early=true",
    ] {
        assert!(
            tool.attributes.iter().any(|kv| kv == attribute),
            "{attribute} in {:?}",
            tool.attributes
        );
    }
    let chat = spans
        .iter()
        .find(|span| span.name == "chat scripted-1")
        .expect("a chat span");
    for attribute in [
        "gen_ai.provider.name=scripted",
        "gen_ai.response.id=resp_0",
        "gen_ai.usage.cache_read.input_tokens=32",
    ] {
        assert!(
            chat.attributes.iter().any(|kv| kv == attribute),
            "{attribute} in {:?}",
            chat.attributes
        );
    }
    assert!(
        export_error.is_some(),
        "nothing listens on port 9, so the OTLP export reports its failure"
    );
}

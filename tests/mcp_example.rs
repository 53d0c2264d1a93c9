//! `examples/mcp_tools.rs` runs, and shows what it claims: the trusted read-only MCP tool starts while the model is
//! still talking, the write waits for the end of the response.

#[allow(dead_code)] // `main` is the example's, unused here.
#[path = "../examples/mcp_tools.rs"]
mod mcp_tools;

#[tokio::test]
async fn the_mcp_example_runs_a_read_only_tool_early() {
    let lines = mcp_tools::run().await.expect("the example runs");
    let position = |needle: &str| {
        lines
            .iter()
            .position(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in {lines:#?}"))
    };
    let search = position("tool_execution_start c1 (notes__search_notes)");
    let last_word = position("model says \"write.\"");
    let write = position("tool_execution_start c2 (notes__add_note)");
    assert!(
        search < last_word,
        "the search started while the model was talking: {lines:#?}"
    );
    assert!(
        last_word < write,
        "the write waited for the response to end: {lines:#?}"
    );
    assert!(lines[position("result c2")].contains("added \"rust is fun\""));
    assert!(lines[0].contains("notes__search_notes: early=true"), "{}", lines[0]);
}

//! JSON paths in error messages (`tools[0].by_call.c1`), from what `serde_path_to_error` records; shared by the
//! report parser here and the scenario parser of `headstart-sim`, so both name a place the same way.

use std::fmt::Write as _;

use serde_path_to_error::Segment;

/// The path through `segments`: keys joined with `.`, indices in brackets; `the top level` when there are none.
pub fn text<'a>(segments: impl IntoIterator<Item = &'a Segment>) -> String {
    let mut text = String::new();
    for segment in segments {
        // Writing to a String cannot fail.
        let _ = match segment {
            Segment::Seq { index } => write!(text, "[{index}]"),
            other if text.is_empty() => write!(text, "{other}"),
            other => write!(text, ".{other}"),
        };
    }
    if text.is_empty() {
        "the top level".to_owned()
    } else {
        text
    }
}

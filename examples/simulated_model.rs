//! The demo as a library user would write it: a simulated streaming model, two tools, a SQLite transcript,
//! and plain lines for each event. `headstart demo` is the same run with a live terminal view.
//!
//! Run with `cargo run --example simulated_model`.

use headstart::{AgentEvent, DeltaEvent};
use headstart_sim::demo;

#[tokio::main]
async fn main() -> Result<(), String> {
    let dir = std::env::temp_dir().join("headstart-example");
    std::fs::create_dir_all(&dir).map_err(|err| err.to_string())?;
    let db = dir.join("headstart.db");
    let mut text = String::new();
    let outcome = demo::run(&db, dir.clone(), |event, at_ms| match event {
        AgentEvent::MessageUpdate {
            delta: DeltaEvent::TextDelta { delta, .. },
            ..
        } => text.push_str(delta),
        AgentEvent::MessageUpdate {
            delta: DeltaEvent::TextEnd { .. },
            ..
        } => {
            println!("{:7.0} ms  model: {}", at_ms, text.trim());
            text.clear();
        }
        AgentEvent::ToolExecutionStart { call } => println!("{at_ms:7.0} ms  start {} {}", call.name, call.id),
        AgentEvent::ToolExecutionEnd {
            tool_call_id, is_error, ..
        } => {
            println!("{at_ms:7.0} ms  end   {tool_call_id} (error: {is_error})");
        }
        _ => {}
    })
    .await?;
    let savings = outcome.timeline.savings();
    println!(
        "finished in {:.0} ms; end-of-stream batching would take {:.0} ms; transcript in {}",
        savings.actual_end_ms,
        savings.batching_end_ms,
        db.display()
    );
    Ok(())
}

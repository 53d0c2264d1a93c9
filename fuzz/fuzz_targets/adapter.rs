//! Fuzzes the whole stream adapter (`Engine::wrap`): arbitrary bytes decode into a model stream (events, model
//! failures, virtual-time gaps) and engine settings, run on a paused current-thread runtime against an in-memory
//! SQLite store with a scripted toolbox of async and sync tools (ok, failing, panicking, hanging until cancelled,
//! timing out, fenced, keyed, schema-checked) and a blocking hook.
//!
//! The harness is the one the normal suite's property test uses (`tests/adapter_harness/mod.rs`); it asserts no
//! panic, the engine's invariants (`headstart_testkit::invariants::check_turn`: `turn_end` last, every admitted and
//! every stored call has exactly one result, owners stored before starts, the per-call event order), no call
//! executes before its owner is stored, and no call executes twice. A broken invariant panics, which libFuzzer
//! reports as a crash.
#![no_main]

#[path = "../../tests/adapter_harness/mod.rs"]
mod adapter_harness;

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        // Scripted tools panic on purpose (the engine catches it); keep libFuzzer's abort-on-panic hook for
        // every other panic.
        adapter_harness::quiet_scripted_panics();
    },
    |data: &[u8]| {
        let script = adapter_harness::decode(data);
        if let Err(failures) = adapter_harness::run(&script) {
            panic!("invariants broken: {failures:#?}\n{script:#?}");
        }
    }
);

//! Fuzzes the accumulator (contract §2): arbitrary bytes decode into a sequence of delta events (and model failures)
//! applied one by one. The accumulator must never panic, and must keep its documented contract:
//!
//! - a rejected event changes nothing (same position, same snapshot, same open blocks);
//! - an accepted event advances the position by one;
//! - once the response ended, every further event is rejected as "after end", and `fail` changes nothing;
//! - the snapshot always has one content block per opened block, and every tool-call block yields its call.
#![no_main]

use headstart::core::{Accumulator, Applied, DeltaEvent, DoneReason, ErrorReason, Usage, Violation};
use libfuzzer_sys::fuzz_target;

/// Reads bytes one at a time, yielding 0 once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        match self.0.split_first() {
            Some((first, rest)) => {
                self.0 = rest;
                *first
            }
            None => 0,
        }
    }

    /// A string of up to 31 bytes taken from the input (lossily decoded, so argument text can be anything).
    fn text(&mut self) -> String {
        let len = usize::from(self.next() % 32).min(self.0.len());
        let (taken, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8_lossy(taken).into_owned()
    }

    /// Mostly a small index near the blocks opened so far, sometimes anything.
    fn index(&mut self, opened: usize) -> usize {
        match self.next() {
            raw @ 0..=199 => (opened + usize::from(raw % 4)).saturating_sub(2),
            raw @ 200..=254 => usize::from(raw - 200),
            255 => usize::MAX,
        }
    }
}

enum Step {
    Event(DeltaEvent),
    Fail(ErrorReason, String),
}

fn decode(bytes: &mut Bytes<'_>, opened: usize) -> Step {
    let op = bytes.next();
    let event = match op % 14 {
        0 => DeltaEvent::Start {
            model: (op & 0x10 != 0).then(|| bytes.text()),
            response_id: (op & 0x20 != 0).then(|| bytes.text()),
        },
        1 => DeltaEvent::TextStart {
            index: bytes.index(opened),
        },
        2 => DeltaEvent::TextDelta {
            index: bytes.index(opened),
            delta: bytes.text(),
        },
        3 => DeltaEvent::TextEnd {
            index: bytes.index(opened),
        },
        4 => DeltaEvent::ThinkingStart {
            index: bytes.index(opened),
        },
        5 => DeltaEvent::ThinkingDelta {
            index: bytes.index(opened),
            delta: bytes.text(),
        },
        6 => DeltaEvent::ThinkingEnd {
            index: bytes.index(opened),
            signature: (op & 0x10 != 0).then(|| bytes.text()),
        },
        7 => DeltaEvent::ToolcallStart {
            index: bytes.index(opened),
            id: bytes.text(),
            name: bytes.text(),
            early: op & 0x10 != 0,
            provider_async: op & 0x20 != 0,
        },
        8 => DeltaEvent::ToolcallDelta {
            index: bytes.index(opened),
            delta: bytes.text(),
        },
        9 => {
            let index = bytes.index(opened);
            // The override is arbitrary JSON text when it parses, else absent.
            let arguments = if op & 0x10 != 0 {
                serde_json::from_str(&bytes.text()).ok()
            } else {
                None
            };
            DeltaEvent::ToolcallEnd { index, arguments }
        }
        10 => DeltaEvent::Done {
            stop_reason: [DoneReason::Stop, DoneReason::Length, DoneReason::ToolUse][usize::from(op >> 4) % 3],
            usage: Usage {
                input: u64::MAX,
                output: u64::from(op),
                ..Usage::default()
            },
        },
        11 => DeltaEvent::Error {
            stop_reason: if op & 0x10 != 0 {
                ErrorReason::Aborted
            } else {
                ErrorReason::Error
            },
            message: bytes.text(),
            usage: None,
        },
        12 => return Step::Fail(ErrorReason::Error, bytes.text()),
        _ => return Step::Fail(ErrorReason::Aborted, "cancelled".to_owned()),
    };
    Step::Event(event)
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = Bytes(data);
    let mut acc = Accumulator::new();
    let mut steps = 0;
    while !bytes.0.is_empty() && steps < 512 {
        steps += 1;
        let step = decode(&mut bytes, acc.len());
        let before = (acc.position(), acc.snapshot(), acc.len(), acc.ending().cloned());
        let ended = acc.ending().is_some();
        match step {
            Step::Fail(reason, message) => {
                acc.fail(reason, message);
                assert!(acc.ending().is_some(), "fail ends the response");
                if ended {
                    assert_eq!(before.3.as_ref(), acc.ending(), "fail after the end changes nothing");
                }
                assert_eq!(before.0, acc.position(), "fail is not an event");
            }
            Step::Event(event) => match acc.apply(event) {
                Ok(applied) => {
                    assert!(!ended, "an event after the end was accepted");
                    assert_eq!(acc.position(), before.0 + 1);
                    if applied == Applied::Ended {
                        assert!(acc.ending().is_some());
                    }
                }
                Err(err) => {
                    if ended {
                        assert_eq!(err.violation, Violation::AfterEnd);
                    }
                    assert_eq!(err.position, before.0);
                    let after = (acc.position(), acc.snapshot(), acc.len(), acc.ending().cloned());
                    assert_eq!(before, after, "a rejected event changed the accumulator: {err}");
                    // The message is displayable.
                    let _ = err.to_string();
                }
            },
        }
        let snapshot = acc.snapshot();
        assert_eq!(snapshot.content.len(), acc.len());
        for (index, block) in snapshot.content.iter().enumerate() {
            assert_eq!(block.as_tool_call().is_some(), acc.tool_call(index).is_some());
            assert_eq!(acc.call_name(index).is_some(), acc.tool_call(index).is_some());
        }
        assert_eq!(acc.any_open_in(0..acc.len()), (0..acc.len()).any(|i| acc.is_open(i)));
        // The snapshot serializes (it is what the store writes).
        let _ = serde_json::to_string(&snapshot);
    }
});

//! Delivered exactly once (contract §3.7.5, §7.3): the context each request was built from, rebuilt from the log,
//! begins with the context of the request before it. A request saw the log written before its first fragment, but
//! for the provider-async results marked as written while it streamed.

use headstart::core::context::ContextBuilder;
use headstart::core::{Message, ModelContext};
use headstart::store::StoredMessage;

use super::InvariantViolation;

/// The context a request saw is the canonical view of the log written before its first fragment; each must extend
/// the one before.
pub(super) fn check_delivery(log: &[StoredMessage]) -> Vec<InvariantViolation> {
    let mut violations = Vec::new();
    let mut builder = ContextBuilder::new();
    let mut previous: Option<ModelContext> = None;
    let mut last_request = None;
    for (position, stored) in log.iter().enumerate() {
        let begins_request = match &stored.message {
            Message::Assistant(_) => stored.request.filter(|&request| last_request != Some(request)),
            _ => None,
        };
        if let Some(request) = begins_request {
            last_request = Some(request);
            // What the request saw: the log before its first fragment, but for the results marked as written while
            // it streamed.
            let seen: ModelContext = (builder.context().iter())
                .filter(
                    |message| !matches!(message, Message::ToolResult(result) if result.ready_during == Some(request)),
                )
                .cloned()
                .collect();
            if let Some(before) = &previous {
                if let Some(at) = first_difference(before, &seen) {
                    violations.push(InvariantViolation::ContextRewritten { request, at });
                }
            }
            previous = Some(seen);
        }
        if builder.push(stored.request, &stored.message).is_err() {
            let prefix = &log[..=position];
            builder = ContextBuilder::from_log(prefix.iter().map(|stored| (stored.request, &stored.message)));
        }
    }
    violations
}

/// Where `later` stops beginning with `earlier`, if it does.
fn first_difference(earlier: &ModelContext, later: &ModelContext) -> Option<usize> {
    let differs = earlier.iter().zip(later.iter()).position(|(a, b)| a != b);
    differs.or_else(|| (later.len() < earlier.len()).then_some(later.len()))
}

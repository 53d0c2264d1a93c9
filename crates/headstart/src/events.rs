//! What the consumer receives: the [`AgentEvent`](crate::AgentEvent) type and the queue that carries events from the
//! engine's task to the consumer's [`EventStream`](crate::EventStream).

pub(crate) mod event;
pub(crate) mod outbox;
pub(crate) mod queue;

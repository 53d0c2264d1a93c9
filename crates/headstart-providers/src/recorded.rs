//! A converter that records every event it reads ([`crate::recording`]) before converting it: what
//! [`ConvertOptions::record`](crate::ConvertOptions::record) wraps each fresh converter in.

use std::collections::VecDeque;
use std::time::Instant;

use headstart_core::{DeltaEvent, ModelError};

use crate::converter::StreamConverter;
use crate::error::ProviderError;
use crate::recorder::Recorder;
use crate::sse::SseEvent;

/// `inner`, a converter of the wire format named `format`, recording into `recorder` each event it reads until the
/// response ended.
pub(crate) fn recorded(recorder: &Recorder, format: &str, inner: Box<dyn StreamConverter>) -> Box<dyn StreamConverter> {
    let origin = recorder.begin(format);
    Box::new(Recorded {
        inner,
        recorder: recorder.clone(),
        origin,
    })
}

struct Recorded {
    inner: Box<dyn StreamConverter>,
    recorder: Recorder,
    origin: Instant,
}

impl StreamConverter for Recorded {
    fn push(&mut self, event: &SseEvent, out: &mut VecDeque<DeltaEvent>) -> Result<(), ProviderError> {
        if !self.inner.is_ended() {
            self.recorder.event(self.origin, event);
        }
        self.inner.push(event, out)
    }

    fn finish(&mut self, out: &mut VecDeque<DeltaEvent>) {
        self.inner.finish(out);
    }

    fn fail(&mut self, error: &ModelError, out: &mut VecDeque<DeltaEvent>) {
        self.inner.fail(error, out);
    }

    fn is_ended(&self) -> bool {
        self.inner.is_ended()
    }
}

//! The bounds on what one response may hold (see the module documentation), and measuring a value against them
//! without serializing it whole.

/// The most bytes one text or thinking block, or the argument text of one tool call, may hold: 16 MiB.
pub const MAX_BLOCK_BYTES: usize = 16 * 1024 * 1024;

/// The most bytes a whole response may stream in (deltas, call ids and names, signatures, argument overrides):
/// 64 MiB.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// The most content blocks a response may open: 100,000.
pub const MAX_BLOCKS: usize = 100_000;

/// Counts serialized bytes, failing once past a limit so an oversized value is not serialized whole.
struct ByteCounter {
    bytes: usize,
    limit: usize,
}

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes = self.bytes.saturating_add(buf.len());
        if self.bytes > self.limit {
            return Err(std::io::Error::other("over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The serialized length of `value` if it is at most `limit` bytes; stops serializing once past it.
pub(super) fn serialized_len_within(value: &serde_json::Value, limit: usize) -> Option<usize> {
    let mut counter = ByteCounter { bytes: 0, limit };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.bytes)
}

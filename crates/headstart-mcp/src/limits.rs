//! [`McpLimits`]: how long, how much and how many an MCP server may take; every server is untrusted input.

use std::time::Duration;

/// What one MCP server is allowed: time for each request, and the size and number of what it sends.
///
/// Every limit holds whatever the server does; passing one is a clear error naming the server and the limit
/// ([`crate::McpError`] while connecting and listing, the call's error result during a call). The [`Default`] is
/// the safe setting headstart uses; change single fields with struct update syntax:
///
/// ```
/// use std::time::Duration;
/// use headstart_mcp::McpLimits;
///
/// let limits = McpLimits {
///     call_timeout: Duration::from_secs(600),
///     ..McpLimits::default()
/// };
/// assert_eq!(limits.list_timeout, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpLimits {
    /// The MCP handshake (`initialize`), from the start of the connection (default 30 s). Past it the connection
    /// is dropped, and a stdio server's process killed.
    pub initialize_timeout: Duration,
    /// `tools/list`, every page together (default 30 s).
    pub list_timeout: Duration,
    /// Each `tools/call` (default 120 s). Past it the call fails with an error naming the server, and the server
    /// is sent `notifications/cancelled`; its other calls go on. An [`crate::McpTool`]'s
    /// [`headstart::ToolSpec::timeout`] is this plus 5 s, a backstop for the engine.
    pub call_timeout: Duration,
    /// Pages of one `tools/list` (default 100): a server that keeps sending a `nextCursor` is refused past them.
    pub max_list_pages: usize,
    /// Tools of one server (default 512); more is refused.
    pub max_tools: usize,
    /// The largest tool definition, serialized as JSON (default 64 KiB): its input schema (sent to the model with
    /// every request), output schema, name, annotations and description. A server listing a bigger one is
    /// refused, rather than a tool quietly missing.
    pub max_tool_bytes: usize,
    /// The longest tool description (default 4 KiB); a longer one is cut at a character boundary and ends with
    /// `…`, since a description is only read by the model.
    pub max_description_bytes: usize,
    /// The most of one call's result kept, stored and sent to the model (default 256 KiB, as headstart's built-in
    /// tools): text and details together. Past it the text is cut, details that do not fit are dropped, and a
    /// last text block says so with the size the server sent. An error result's message is cut the same way.
    pub max_result_bytes: usize,
    /// The largest JSON-RPC message read from a stdio server (default 16 MiB, rmcp's own cap over streamable
    /// HTTP). A longer line closes the connection ([`crate::McpError::MessageTooLarge`], or the call's error
    /// result), so memory stays bounded while reading. Applies to [`crate::McpServer::stdio_with_limits`];
    /// rmcp's 16 MiB cap applies over HTTP.
    pub max_message_bytes: usize,
    /// The most of a stdio server's stderr copied to headstart's stderr (default 64 KiB), each line prefixed with
    /// `[mcp NAME]` and control characters replaced; the rest is read and dropped, so the server never blocks on
    /// a full pipe and cannot flood the terminal. 0 drops it all.
    pub max_stderr_bytes: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits {
            initialize_timeout: Duration::from_secs(30),
            list_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(120),
            max_list_pages: 100,
            max_tools: 512,
            max_tool_bytes: 64 * 1024,
            max_description_bytes: 4 * 1024,
            max_result_bytes: 256 * 1024,
            max_message_bytes: 16 * 1024 * 1024,
            max_stderr_bytes: 64 * 1024,
        }
    }
}

/// A duration as error messages give it: `30 s`, or `1500 ms` when it is not whole seconds.
pub(crate) fn duration_text(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// A byte count as error messages give it: `256 KiB`, `16 MiB`, or plain bytes when it is not a whole unit.
pub(crate) fn bytes_text(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut_at_boundary(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

/// Counts the bytes of a value's JSON without building it, so measuring a hostile value allocates nothing.
pub(crate) fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Values made of strings and JSON cannot fail to serialize; a failure counts what was written before it.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_people_write_them() {
        assert_eq!(duration_text(Duration::from_secs(30)), "30 s");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500 ms");
        assert_eq!(bytes_text(256 * 1024), "256 KiB");
        assert_eq!(bytes_text(16 * 1024 * 1024), "16 MiB");
        assert_eq!(bytes_text(1000), "1000 bytes");
    }

    #[test]
    fn cuts_keep_whole_characters() {
        let mut text = "é".repeat(10);
        cut_at_boundary(&mut text, 5);
        assert_eq!(text, "éé");
        let mut short = "abc".to_owned();
        cut_at_boundary(&mut short, 5);
        assert_eq!(short, "abc");
    }

    #[test]
    fn json_size_is_the_serialized_length() {
        let value = serde_json::json!({"a": [1, 2, "three"], "b": null});
        assert_eq!(json_size(&value), value.to_string().len());
    }
}

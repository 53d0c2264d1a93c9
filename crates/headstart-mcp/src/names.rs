//! Tool names as providers accept them.

/// The longest tool name OpenAI and Anthropic accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// The headstart name of MCP tool `tool` of server `server`: `{server}__{tool}`, valid for every provider.
///
/// Providers accept tool names matching `^[A-Za-z0-9_-]{1,64}$`, while MCP allows any string. So every other
/// character becomes `_`, and a name longer than 64 characters is cut to 55 and ends with `_` and 8 hex digits of
/// the FNV-1a hash of the unmangled `{server}__{tool}`, which keeps long names with a shared beginning apart.
/// Names that still collide (`a.b` and `a_b`) are refused at registration ([`crate::McpError::NameClash`]).
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("{server}__{tool}");
    let mut name: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() > MAX_TOOL_NAME_LEN {
        // Every character is ASCII now, so byte lengths are character counts.
        name.truncate(MAX_TOOL_NAME_LEN - 9);
        name.push_str(&format!("_{:08x}", fnv1a(full.as_bytes())));
    }
    name
}

/// 32-bit FNV-1a: stable across releases and platforms (std's hasher is not), so names stay put.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_replaces_invalid_characters() {
        assert_eq!(tool_name("files", "read"), "files__read");
        assert_eq!(tool_name("my server", "get.item/v2"), "my_server__get_item_v2");
        assert_eq!(
            tool_name("s", "trigger-long-running-operation"),
            "s__trigger-long-running-operation"
        );
        assert_eq!(tool_name("s", "café"), "s__caf_");
    }

    #[test]
    fn long_names_are_cut_and_stay_apart() {
        let long = "x".repeat(80);
        let a = tool_name("s", &format!("{long}a"));
        let b = tool_name("s", &format!("{long}b"));
        assert_eq!(a.len(), MAX_TOOL_NAME_LEN);
        assert_eq!(b.len(), MAX_TOOL_NAME_LEN);
        assert_ne!(a, b);
        assert!(a.starts_with("s__xxx"));
        // Stable: the same input gives the same name.
        assert_eq!(a, tool_name("s", &format!("{long}a")));
    }

    #[test]
    fn fnv1a_matches_the_reference_values() {
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
    }
}

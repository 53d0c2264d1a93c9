//! What a built-in tool returns to the model: text, cut at a bound with a note saying so.

/// The most a tool returns to the model, in bytes; longer output is cut with a note saying so.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// How many bytes at the end of `bytes` are the start of a UTF-8 character that a cut left incomplete.
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xc0 != 0x80 {
            let needed = match byte {
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf7 => 4,
                _ => 1,
            };
            return if needed > back { back } else { 0 };
        }
    }
    0
}

/// `bytes` as text (invalid UTF-8 replaced); beyond `limit` cut, at a character boundary, with the note
/// `[WHAT cut at LIMIT bytes]`.
pub fn cut_text(mut bytes: Vec<u8>, limit: usize, what: &str) -> String {
    let cut = bytes.len() > limit;
    if cut {
        bytes.truncate(limit);
        bytes.truncate(limit - incomplete_tail(&bytes));
    }
    let mut text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    };
    if cut {
        text.push_str(&format!("\n[{what} cut at {limit} bytes]"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary_with_a_note() {
        let text = "é".repeat(MAX_OUTPUT_BYTES);
        let cut = cut_text(text.into_bytes(), MAX_OUTPUT_BYTES, "file");
        assert!(
            cut.ends_with("\n[file cut at 262144 bytes]"),
            "{}",
            &cut[cut.len() - 40..]
        );
        assert!(!cut.contains('\u{fffd}'));
        assert_eq!(cut.len(), MAX_OUTPUT_BYTES + "\n[file cut at 262144 bytes]".len());
        // A cut in the middle of a character drops the character whole.
        assert_eq!(
            cut_text("aé".as_bytes().to_vec(), 2, "body"),
            "a\n[body cut at 2 bytes]"
        );
        assert_eq!(
            cut_text("a€".as_bytes().to_vec(), 3, "body"),
            "a\n[body cut at 3 bytes]"
        );
        assert_eq!(
            cut_text("a😀".as_bytes().to_vec(), 4, "body"),
            "a\n[body cut at 4 bytes]"
        );
        assert_eq!(cut_text(b"short".to_vec(), 5, "body"), "short");
        assert_eq!(cut_text(vec![b'x', 0xff], 5, "body"), "x\u{fffd}");
    }
}

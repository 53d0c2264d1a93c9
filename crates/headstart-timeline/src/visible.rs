//! Text from the model, tools and servers made safe to show, on a terminal or a page.
//!
//! Everything `headstart` prints or serves that came from outside (model text, tool names, arguments, results,
//! provider and server error messages) is hostile: an escape sequence in it could move the cursor to forge a line,
//! rewrite the window title or write the clipboard (OSC 52). [`visible`] renders every control character as a
//! visible escape (`\x1b`, `\u{9b}`), and the bidirectional-text overrides too, so that what is shown is what was
//! sent. `headstart serve` shows text the same way (the HTML escaping is its templates').

use std::borrow::Cow;
use std::fmt::Write;

/// Whether a newline is printed as itself (multi-line output) or escaped (one-line output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// `\n` stays a line break; every other control character is escaped.
    Keep,
    /// `\n` too is escaped, so the text stays on one line.
    Escape,
}

/// Characters a terminal would act on rather than show: C0 controls, DEL, C1 controls (U+0080–U+009F, among them
/// the 8-bit CSI and OSC), and the bidirectional embeddings, overrides and isolates that reorder what is displayed.
fn acts_on_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character a terminal would act on written as a visible escape: `\x1b` for ESC, `\t` for a
/// tab, `\u{9b}` for an 8-bit CSI. Borrowed, without a copy, when nothing needs escaping. Linear in the text.
pub fn visible(text: &str, lines: Lines) -> Cow<'_, str> {
    let escaped = |c: char| acts_on_terminal(c) && !(c == '\n' && lines == Lines::Keep);
    let Some(first) = text.find(escaped) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if !escaped(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// [`visible`] on one line: for labels, names and single-line messages.
pub fn one_line(text: &str) -> Cow<'_, str> {
    visible(text, Lines::Escape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "read_file(src/main.rs) — ünïcode ✓";
        assert!(matches!(visible(text, Lines::Keep), Cow::Borrowed(t) if t == text));
        assert!(matches!(one_line("two\nlines"), Cow::Owned(t) if t == "two\\nlines"));
        assert_eq!(visible("two\nlines", Lines::Keep), "two\nlines");
    }

    #[test]
    fn every_control_character_is_escaped() {
        // A cursor move that would overwrite the line, an OSC 52 clipboard write, an 8-bit CSI, DEL, a bidi override.
        let hostile = "fetch_url\x1b[2K\rread_file(README.md)\x1b]52;c;ZXZpbA==\x07\u{9b}31m\x7f\u{202e}gpj.exe";
        let shown = visible(hostile, Lines::Keep);
        assert_eq!(
            shown,
            "fetch_url\\x1b[2K\\rread_file(README.md)\\x1b]52;c;ZXZpbA==\\x07\\x9b31m\\x7f\\u{202e}gpj.exe"
        );
        assert!(!shown.chars().any(acts_on_terminal));
        for code in (0u32..0x100).chain(0x2000..0x2100) {
            let Some(c) = char::from_u32(code) else { continue };
            let shown = visible(&c.to_string(), Lines::Escape).into_owned();
            assert!(!shown.chars().any(acts_on_terminal), "U+{code:04X} shown as {shown:?}");
        }
    }

    #[test]
    fn cost_is_linear() {
        // 4 MiB of escapes in one pass: a quadratic escape once stalled the live view on long streamed text.
        let text = "\x1b".repeat(4 << 20);
        assert_eq!(visible(&text, Lines::Keep).len(), 4 * (4 << 20));
    }
}

//! The drawing primitives: an SVG document built as a string, XML escaping, and text measures and helpers.

use std::fmt::Write as _;

/// An SVG document being built.
pub(super) struct Svg {
    pub(super) out: String,
}

impl Svg {
    pub(super) fn raw(&mut self, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub(super) fn text(&mut self, x: f64, y: f64, attrs: &str, body: &str) {
        let _ = writeln!(self.out, r#"<text x="{x:.1}" y="{y:.1}" {attrs}>{body}</text>"#);
    }

    pub(super) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, attrs: &str) {
        let _ = writeln!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {attrs}/>"#
        );
    }

    /// A box as a path (`<rect>` is reserved for call bars).
    pub(super) fn box_path(&mut self, x: f64, y: f64, w: f64, h: f64, attrs: &str) {
        let _ = writeln!(
            self.out,
            r#"<path d="M{x:.1} {y:.1}h{w:.1}v{h:.1}h{:.1}z" {attrs}/>"#,
            -w
        );
    }
}

/// Escapes text for XML content and attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            ch if ch.is_control() => out.push(' '),
            ch => out.push(ch),
        }
    }
    out
}

/// Estimated width of `text` in px at `size` (generous, so labels do not collide).
pub(super) fn text_width(text: &str, size: f64) -> f64 {
    let chars = text.chars().count();
    // Label lengths are tiny; the cast cannot lose anything that matters.
    #[allow(clippy::cast_precision_loss)]
    let chars = chars as f64;
    chars * size * 0.6
}

/// Cuts `text` to at most `max` characters, ending in "…" when cut.
pub(super) fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The plural ending of a count's noun: "" for one, "s" otherwise.
pub(super) fn plural(count: usize) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_xml_text() {
        assert_eq!(escape("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
        assert_eq!(escape("x\u{1}y"), "x y");
    }
}

//! Watches a call's argument text arrive, piece by piece, and tells the moment it forms one complete JSON object.
//!
//! Pure and incremental: each piece costs O(its length), nothing is re-scanned. In valid JSON the brackets nest, so
//! the count of open brackets outside strings falls back to zero exactly at the `}` that closes the top-level
//! object, and nothing but whitespace may follow it. A text whose count reaches zero is therefore either complete
//! or malformed whatever comes next: sealing it there never cuts a valid object short.

/// Where the argument text stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ObjectState {
    /// Only whitespace so far (the arguments would be `{}`).
    #[default]
    Empty,
    /// Inside the top-level object.
    Open,
    /// The top-level object closed; only whitespace followed.
    Complete,
    /// The text does not begin with `{`: it can never be a complete object (the call will be invalid at its seal).
    NotAnObject,
}

/// Non-whitespace text arrived after the object was complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TextAfterObject;

/// The scanner of one call's argument text.
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectEnd {
    state: ObjectState,
    /// Open brackets (`{` and `[`) outside strings.
    depth: u32,
    in_string: bool,
    escaped: bool,
}

/// JSON's four whitespace characters (RFC 8259 §2); anything else after a complete object makes it invalid.
pub(crate) fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

impl ObjectEnd {
    /// Where the text read so far stands.
    pub(crate) fn state(&self) -> ObjectState {
        self.state
    }

    /// `true` while the text ends inside a string, where whitespace is content.
    pub(crate) fn in_string(&self) -> bool {
        self.in_string
    }

    /// Reads the next piece. An error means non-whitespace followed a complete object; the state stays
    /// [`ObjectState::Complete`].
    pub(crate) fn push(&mut self, piece: &str) -> Result<(), TextAfterObject> {
        for &byte in piece.as_bytes() {
            match self.state {
                ObjectState::NotAnObject => return Ok(()),
                ObjectState::Complete if is_json_whitespace(byte) => {}
                ObjectState::Complete => return Err(TextAfterObject),
                ObjectState::Empty if is_json_whitespace(byte) => {}
                ObjectState::Empty if byte == b'{' => {
                    self.state = ObjectState::Open;
                    self.depth = 1;
                }
                ObjectState::Empty => self.state = ObjectState::NotAnObject,
                ObjectState::Open => self.read_inside(byte),
            }
        }
        Ok(())
    }

    /// One byte inside the top-level object. UTF-8 continuation bytes are never ASCII, so bytes suffice.
    fn read_inside(&mut self, byte: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
            }
            return;
        }
        match byte {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth -= 1;
                if self.depth == 0 {
                    self.state = ObjectState::Complete;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_after(pieces: &[&str]) -> (ObjectState, Result<(), TextAfterObject>) {
        let mut end = ObjectEnd::default();
        let mut result = Ok(());
        for piece in pieces {
            result = result.and(end.push(piece));
        }
        (end.state(), result)
    }

    #[test]
    fn an_object_is_complete_exactly_at_its_closing_brace_however_the_text_is_split() {
        let text = r#" {"path": "a}b{\"c\"", "n": [1, {"x": []}], "s": "\\"} "#;
        let close = text.rfind('}').unwrap();
        for cut in 0..=text.len() {
            if !text.is_char_boundary(cut) {
                continue;
            }
            let mut end = ObjectEnd::default();
            end.push(&text[..cut]).unwrap();
            let expected = if cut > close {
                ObjectState::Complete
            } else if text[..cut].trim().is_empty() {
                ObjectState::Empty
            } else {
                ObjectState::Open
            };
            assert_eq!(end.state(), expected, "cut at {cut}: {:?}", &text[..cut]);
            end.push(&text[cut..]).unwrap();
            assert_eq!(end.state(), ObjectState::Complete);
        }
    }

    #[test]
    fn every_valid_object_of_a_sample_completes_only_at_its_end() {
        let samples = [
            "{}",
            r#"{"a":1}"#,
            r#"{"q":"héllo \u00e9 \"quoted\" {not a brace}"}"#,
            r#"{"deep":{"deeper":[[],[{}],{"k":"]"}]}}"#,
            "{\n  \"multi\": \"line\"\n}\n",
        ];
        for sample in samples {
            let close = sample.rfind('}').unwrap();
            let mut end = ObjectEnd::default();
            for (at, ch) in sample.char_indices() {
                let complete = end.state() == ObjectState::Complete;
                assert_eq!(complete, at > close, "{sample} at byte {at}");
                end.push(ch.encode_utf8(&mut [0; 4])).unwrap();
            }
            assert_eq!(end.state(), ObjectState::Complete, "{sample}");
            assert!(serde_json::from_str::<serde_json::Value>(sample).is_ok());
        }
    }

    #[test]
    fn whitespace_after_the_object_is_allowed_and_anything_else_is_not() {
        assert_eq!(state_after(&["{}", " \n\t\r"]), (ObjectState::Complete, Ok(())));
        assert_eq!(
            state_after(&["{}", " x"]),
            (ObjectState::Complete, Err(TextAfterObject))
        );
        assert_eq!(state_after(&["{} {}"]), (ObjectState::Complete, Err(TextAfterObject)));
    }

    #[test]
    fn text_that_is_not_an_object_never_completes() {
        assert_eq!(state_after(&["[1]", " {}"]), (ObjectState::NotAnObject, Ok(())));
        assert_eq!(state_after(&["  \"s\""]), (ObjectState::NotAnObject, Ok(())));
        assert_eq!(state_after(&["", "  "]), (ObjectState::Empty, Ok(())));
        assert_eq!(state_after(&[r#"{"a": "#]), (ObjectState::Open, Ok(())));
    }

    #[test]
    fn an_escaped_quote_split_across_pieces_stays_inside_the_string() {
        let mut end = ObjectEnd::default();
        end.push(r#"{"a": "x\"#).unwrap();
        assert!(end.in_string());
        end.push(r#"""#).unwrap();
        assert!(end.in_string(), "the quote was escaped");
        end.push(r#""}"#).unwrap();
        assert_eq!(end.state(), ObjectState::Complete);
    }
}

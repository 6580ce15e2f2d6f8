//! How much of a refused input an error echoes: enough to find it, never all of it.
//!
//! An error quotes what it refuses so its reader can find the entry at fault. Quoted whole,
//! a megabyte header name in a configuration file made a megabyte error, copied into every log
//! line and response that carries it.

use std::borrow::Cow;

/// The most characters of a refused input an error quotes.
const EXCERPT_CHARS: usize = 64;

/// `text` as an error quotes it: whole when it is at most 64 characters, else its first 64
/// characters, an ellipsis and its length in bytes, so that a long input still reads as itself
/// and its size shows how it came to be refused. Every error of plug_limit and its options that
/// quotes an input quotes it through this.
///
/// ```
/// use plug_limit_options::excerpt;
///
/// assert_eq!(excerpt("x-quota"), "x-quota");
/// let long = "é".repeat(100);
/// assert_eq!(excerpt(&long), format!("{}… (200 bytes)", "é".repeat(64)));
/// ```
#[must_use]
pub fn excerpt(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => Cow::Borrowed(text),
        // `nth` gives the byte offset of a character: a boundary, so the slice cannot split one.
        Some((end, _)) => Cow::Owned(format!("{}… ({} bytes)", &text[..end], text.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_quoted_whole_and_long_text_by_its_head_and_size() {
        assert_eq!(excerpt(""), "");
        let limit = "a".repeat(EXCERPT_CHARS);
        assert!(matches!(excerpt(&limit), Cow::Borrowed(text) if text == limit));
        let over = "a".repeat(EXCERPT_CHARS + 1);
        assert_eq!(excerpt(&over), format!("{limit}… (65 bytes)"));
        // Four-byte characters: cut between two, never inside one.
        let wide = "𝄞".repeat(1_000);
        assert_eq!(
            excerpt(&wide),
            format!("{}… (4000 bytes)", "𝄞".repeat(EXCERPT_CHARS))
        );
        let megabyte = "h".repeat(1 << 20);
        assert_eq!(
            excerpt(&megabyte).len(),
            EXCERPT_CHARS + "… (1048576 bytes)".len()
        );
    }
}

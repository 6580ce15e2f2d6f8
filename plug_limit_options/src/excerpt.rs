//! How much of a refused input an error echoes, and in what form: enough to find it, never all
//! of it, and never a byte that could forge a log line.
//!
//! An error quotes what it refuses so its reader can find the entry at fault. Quoted whole,
//! a megabyte header name in a configuration file made a megabyte error, copied into every log
//! line and response that carries it. Quoted as it came, a CR/LF, a NUL or a right-to-left
//! override in a time zone's or a header's name wrote a line of the attacker's choosing into
//! the log that carries the error.

use std::borrow::Cow;

/// The most characters of a refused input an error quotes.
const EXCERPT_CHARS: usize = 64;

/// `text` as an error quotes it: whole when it is at most 64 characters, else its first 64
/// characters, an ellipsis and its length in bytes, so that a long input still reads as itself
/// and its size shows how it came to be refused. What it quotes is escaped as
/// [`str::escape_debug`] escapes it: control characters (`\r`, `\n`, `\0`, ...), invisible
/// format characters such as the right-to-left override (`\u{202e}`) and backslashes;
/// everything else, quotes included, reads as typed. Every error of plug_limit and its options that quotes an
/// input quotes it through this.
///
/// ```
/// use plug_limit_options::excerpt;
///
/// assert_eq!(excerpt("x-quota"), "x-quota");
/// let long = "é".repeat(100);
/// assert_eq!(excerpt(&long), format!("{}… (200 bytes)", "é".repeat(64)));
/// assert_eq!(excerpt("Europe/Berlin\r\nforged: yes"), r"Europe/Berlin\r\nforged: yes");
/// ```
#[must_use]
pub fn excerpt(text: &str) -> Cow<'_, str> {
    excerpt_within(text, EXCERPT_CHARS)
}

/// [`excerpt`] of a whole message rather than one input: its first `chars` characters,
/// escaped. For a message made elsewhere that may quote an input (a Redis server's error
/// reply, which a script's refusal of an option fills), whose head says what it is about.
///
/// ```
/// use plug_limit_options::excerpt_within;
///
/// assert_eq!(excerpt_within("ERR bad\r\n", 16), r"ERR bad\r\n");
/// assert_eq!(excerpt_within("abcdef", 3), "abc… (6 bytes)");
/// ```
#[must_use]
pub fn excerpt_within(text: &str, chars: usize) -> Cow<'_, str> {
    let (head, cut) = match text.char_indices().nth(chars) {
        // `nth` gives the byte offset of a character: a boundary, so the slice cannot split one.
        Some((end, _)) => (&text[..end], true),
        None => (text, false),
    };
    let quoted = escaped(head);
    if cut {
        Cow::Owned(format!("{quoted}… ({} bytes)", text.len()))
    } else {
        quoted
    }
}

/// `text` as [`str::escape_debug`] escapes it, but for its quotes, which a message holds as
/// its own punctuation: `got '0'` stays `got '0'`.
fn escaped(text: &str) -> Cow<'_, str> {
    if text
        .split(['\'', '"'])
        .all(|piece| piece.escape_debug().eq(piece.chars()))
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for piece in text.split_inclusive(['\'', '"']) {
        match piece.strip_suffix(['\'', '"']) {
            Some(before) => {
                out.extend(before.escape_debug());
                out.push_str(&piece[before.len()..]);
            }
            None => out.extend(piece.escape_debug()),
        }
    }
    Cow::Owned(out)
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

    #[test]
    fn what_could_forge_a_line_is_escaped_and_the_rest_reads_as_typed() {
        assert_eq!(excerpt("a\r\nb"), r"a\r\nb");
        assert_eq!(excerpt("nul\0"), r"nul\0");
        assert_eq!(excerpt("\u{202e}gpj.exe"), r"\u{202e}gpj.exe");
        assert_eq!(excerpt("tab\there"), r"tab\there");
        assert_eq!(excerpt("back\\slash 'q' \"dq\""), r#"back\\slash 'q' "dq""#);
        assert!(matches!(excerpt("Europe/Berlin é 𝄞"), Cow::Borrowed(_)));
        // The cut counts the input's characters, and its length is the input's, not the
        // escaped text's.
        let lines = "\n".repeat(100);
        assert_eq!(
            excerpt(&lines),
            format!("{}… (100 bytes)", r"\n".repeat(EXCERPT_CHARS))
        );
    }
}

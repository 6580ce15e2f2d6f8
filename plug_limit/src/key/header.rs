//! Keys that need no address: one shared budget, or a header's value.

use std::any::Any;
use std::sync::Arc;

use http::header::{AsHeaderName, HeaderName};
use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

/// One budget for every client. See [`global`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

/// Counts every request against one shared key: a limit for the whole route.
///
/// # Example
///
/// ```
/// use plug_limit::key;
/// use plug_limit::key::KeyExtractor;
///
/// let (parts, ()) = http::Request::new(()).into_parts();
/// let key = key::global().extract(&parts)?;
/// assert_eq!(key.iter().collect::<Vec<_>>(), ["global"]);
/// # Ok::<(), plug_limit::key::KeyError>(())
/// ```
#[must_use]
pub const fn global() -> Global {
    Global
}

/// The key of [`Global`].
const GLOBAL: &str = "global";

impl KeyExtractor for Global {
    fn extract(&self, _parts: &Parts) -> Result<Key, KeyError> {
        Ok(Key::from(GLOBAL))
    }
}

/// Keys by the value of a request header. See [`header`].
#[derive(Debug, Clone, Copy)]
pub struct Header(&'static str);

/// Keys requests by the value of a header, such as an API key.
///
/// A request without the header, with the header on more than one line, or with a value that
/// is not visible ASCII, is a [`KeyError`]. The client writes the value: use it for keys that something checks, such as
/// an API key your app or gateway verifies, and see [`Or`](super::Or) to fall back
/// to the client IP.
///
/// # Example
///
/// ```
/// use plug_limit::key;
/// use plug_limit::key::KeyExtractor;
///
/// let request = http::Request::builder().header("x-api-key", "k-123").body(())?;
/// let key = key::header("x-api-key").extract(&request.into_parts().0)?;
/// assert_eq!(key.iter().collect::<Vec<_>>(), ["k-123"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Panics
///
/// When `name` is not a valid lower-case header name; in a `const` context this is a compile
/// error.
#[must_use]
pub const fn header(name: &'static str) -> Header {
    let bytes = name.as_bytes();
    assert!(!bytes.is_empty(), "a header name must not be empty");
    let mut i = 0;
    while i < bytes.len() {
        assert!(
            matches!(bytes[i], b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'!' | b'#'
                | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'^' | b'`' | b'|' | b'~'),
            "a header name must be lower-case token characters"
        );
        i += 1;
    }
    Header(name)
}

impl KeyExtractor for Header {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        header_key(parts, self.0, self.0)
    }
}

/// A [`Header`] with its name parsed once: a lookup by `&str` parses the name on every
/// request, about a third of a memory check's key extraction. `Header` itself holds only the
/// text, so that `key::header(..)` stays usable in constants (a `HeaderName` may hold a
/// `Bytes`, which a constant cannot refer to).
#[derive(Debug, Clone)]
struct ParsedHeader {
    name: HeaderName,
    text: &'static str,
}

impl KeyExtractor for ParsedHeader {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        header_key(parts, &self.name, self.text)
    }
}

/// The key of a request by the value of header `name` (`text`, for errors).
fn header_key(parts: &Parts, name: impl AsHeaderName, text: &'static str) -> Result<Key, KeyError> {
    header_text(parts, name, text).map(Key::from)
}

/// The value of header `name` (`text`, for errors), as a key reads it: borrowed from the
/// request.
fn header_text<'p>(
    parts: &'p Parts,
    name: impl AsHeaderName,
    text: &'static str,
) -> Result<&'p str, KeyError> {
    let mut lines = parts.headers.get_all(name).iter();
    // Not `ok_or`: the error, made and dropped on every request that has the header, cost
    // one in ten of a memory check's key extraction.
    let Some(value) = lines.next() else {
        return Err(KeyError::MissingHeader(text));
    };
    // A gateway that appends its own line after the client's would otherwise let the
    // client's line, first, choose the key.
    if lines.next().is_some() {
        return Err(KeyError::RepeatedHeader(text));
    }
    value.to_str().map_err(|_| KeyError::NotVisibleAscii(text))
}

/// The key `extractor` extracts from `parts`: borrowed from the request (or a constant) when
/// the extractor is a header's or [`Global`], whose keys are text the request already holds,
/// so that the most common keys cost no allocation; else what its
/// [`extract`](KeyExtractor::extract) returns. Either way the same text, so a key's budget
/// does not depend on which way it was read.
///
/// With `reads`, the header the stack's limit before read is not read again.
pub(crate) fn extract<'p>(
    extractor: &dyn KeyExtractor,
    parts: &'p Parts,
    reads: Option<&mut Reads<'p>>,
) -> Result<Extracted<'p>, KeyError> {
    let any: &dyn Any = extractor;
    if let Some(header) = any.downcast_ref::<ParsedHeader>() {
        return Reads::header(reads, header.text, || {
            header_text(parts, &header.name, header.text)
        });
    }
    if let Some(&Header(text)) = any.downcast_ref::<Header>() {
        return Reads::header(reads, text, || header_text(parts, text, text));
    }
    if any.is::<Global>() {
        return Ok(Extracted::Borrowed(GLOBAL));
    }
    extractor.extract(parts).map(Extracted::Owned)
}

/// What one request's check has read of its headers: a stack's limit keyed by the header
/// the limit before it read does not read it again (a read is a hash of the name, a probe and
/// the value's check: about 290 instructions). Not `Debug`: the value may be a credential.
#[derive(Default)]
pub(crate) struct Reads<'p> {
    /// The last header read to a key: its name, and its value.
    header: Option<(&'static str, &'p str)>,
}

impl<'p> Reads<'p> {
    /// The value of header `name`, as `read` reads it, unless `reads` read it before. A
    /// header is told by its name (lower-case, checked by [`header`]), never by its
    /// extractor's address: two extractors of one name read the same value, and two of
    /// another type may share an address. Only a value is kept: an error is read again, and
    /// is the same.
    #[inline]
    fn header(
        reads: Option<&mut Self>,
        name: &'static str,
        read: impl FnOnce() -> Result<&'p str, KeyError>,
    ) -> Result<Extracted<'p>, KeyError> {
        let Some(reads) = reads else {
            return read().map(Extracted::Borrowed);
        };
        if let Some((read_name, value)) = reads.header
            && read_name == name
        {
            return Ok(Extracted::Borrowed(value));
        }
        let value = read()?;
        reads.header = Some((name, value));
        Ok(Extracted::Borrowed(value))
    }
}

/// A client's key as a check counts it: an extractor's own, or text of one part borrowed
/// rather than copied into a [`Key`] (a request header's, `global()`'s, a programmatic
/// check's).
#[derive(Debug)]
pub(crate) enum Extracted<'p> {
    /// What an extractor returned.
    Owned(Key),
    /// One part, borrowed.
    Borrowed(&'p str),
}

impl Extracted<'_> {
    /// The first part: the one every built-in counts. Inline: a memory hit reads it from
    /// another module, and a call there cost it 50 instructions.
    #[inline]
    pub(crate) fn first(&self) -> &str {
        match self {
            Self::Owned(key) => key.iter().next().unwrap_or_default(),
            Self::Borrowed(text) => text,
        }
    }

    /// The parts after the first.
    #[inline]
    pub(crate) fn rest(&self) -> impl Iterator<Item = &str> {
        let rest = match self {
            Self::Owned(key) => Some(key.iter().skip(1)),
            Self::Borrowed(_) => None,
        };
        rest.into_iter().flatten()
    }
}

/// `key`, shared, as a limiter keeps it: a [`Header`] with its name parsed once.
pub(crate) fn shared(key: impl KeyExtractor) -> Arc<dyn KeyExtractor> {
    match parsed(&key) {
        Some(parsed) => Arc::new(parsed),
        None => Arc::new(key),
    }
}

/// `key` with its header name parsed, when it is a [`Header`].
fn parsed(key: &dyn Any) -> Option<ParsedHeader> {
    let &Header(text) = key.downcast_ref::<Header>()?;
    // `header` checked the name: lower-case token characters, which parse.
    let name = HeaderName::from_lowercase(text.as_bytes()).ok()?;
    Some(ParsedHeader { name, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_key_is_kept_with_its_name_parsed_and_others_as_they_are() {
        let kept = parsed(&header("x-api-key")).map(|parsed| (parsed.name, parsed.text));
        assert_eq!(
            kept,
            Some((HeaderName::from_static("x-api-key"), "x-api-key"))
        );
        assert!(parsed(&global()).is_none());
    }

    /// What `extract` reads, as text: borrowed or owned, and whether it borrowed.
    fn read(extractor: &dyn KeyExtractor, parts: &Parts) -> Result<(String, bool), KeyError> {
        Ok(match extract(extractor, parts, None)? {
            Extracted::Borrowed(text) => (text.to_owned(), true),
            Extracted::Owned(key) => (key.iter().collect::<Vec<_>>().join("|"), false),
        })
    }

    #[test]
    fn a_header_or_global_key_is_borrowed_as_the_text_its_extractor_returns() {
        let request = |lines: &[&[u8]]| {
            let mut request = http::Request::builder();
            for line in lines {
                request = request.header("x-api-key", *line);
            }
            request.body(()).expect("a request").into_parts().0
        };
        let parsed_header = shared(header("x-api-key"));
        let extractors: [&dyn KeyExtractor; 3] = [&*parsed_header, &header("x-api-key"), &global()];
        for parts in [
            request(&[b"k-123"]),
            request(&[]),
            request(&[b"k-1", b"k-2"]),
            request(&[b"caf\xc3\xa9"]),
        ] {
            for extractor in extractors {
                let owned = extractor
                    .extract(&parts)
                    .map(|key| key.iter().collect::<Vec<_>>().join("|"));
                assert_eq!(read(extractor, &parts).map(|(text, _)| text), owned);
            }
        }
        let parts = request(&[b"k-123"]);
        assert_eq!(
            read(&*parsed_header, &parts),
            Ok(("k-123".to_owned(), true))
        );
        assert_eq!(
            read(&header("x-api-key"), &parts),
            Ok(("k-123".to_owned(), true))
        );
        assert_eq!(read(&global(), &parts), Ok(("global".to_owned(), true)));
        // Any other extractor's key is its own.
        let other = |_: &Parts| Ok::<_, KeyError>("k-123");
        assert_eq!(read(&other, &parts), Ok(("k-123".to_owned(), false)));
    }

    #[test]
    fn a_stack_reads_a_header_once_and_each_header_under_its_own_name() {
        let parts = http::Request::builder()
            .header("x-a", "a-1")
            .header("x-b", "b-1")
            .header("x-twice", "t-1")
            .header("x-twice", "t-2")
            .body(())
            .expect("a request")
            .into_parts()
            .0;
        let text = |extracted: Result<Extracted<'_>, KeyError>| match extracted {
            Ok(Extracted::Borrowed(text)) => Ok(text.to_owned()),
            Ok(Extracted::Owned(key)) => Ok(key.iter().collect()),
            Err(error) => Err(error),
        };
        let parsed_a = shared(header("x-a"));
        let mut reads = Reads::default();
        let mut read =
            |extractor: &dyn KeyExtractor| text(extract(extractor, &parts, Some(&mut reads)));
        // One name, read as a parsed header or as it was written: one value.
        assert_eq!(read(&*parsed_a), Ok("a-1".to_owned()));
        assert_eq!(read(&header("x-a")), Ok("a-1".to_owned()));
        // Another name after it is read for itself, never answered with the first's value.
        assert_eq!(read(&header("x-b")), Ok("b-1".to_owned()));
        assert_eq!(read(&*parsed_a), Ok("a-1".to_owned()));
        // An error is not kept as a value: read again, it is the same error.
        assert_eq!(
            read(&header("x-twice")),
            Err(KeyError::RepeatedHeader("x-twice"))
        );
        assert_eq!(
            read(&header("x-missing")),
            Err(KeyError::MissingHeader("x-missing"))
        );
        assert_eq!(
            read(&header("x-twice")),
            Err(KeyError::RepeatedHeader("x-twice"))
        );
        assert_eq!(read(&global()), Ok("global".to_owned()));
    }
}

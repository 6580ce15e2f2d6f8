//! Keys that need no address: one shared budget, or a header's value.

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
/// use plug_limit::{KeyExtractor, key};
///
/// let (parts, ()) = http::Request::new(()).into_parts();
/// let key = key::global().extract(&parts)?;
/// assert_eq!(key.iter().collect::<Vec<_>>(), ["global"]);
/// # Ok::<(), plug_limit::KeyError>(())
/// ```
#[must_use]
pub const fn global() -> Global {
    Global
}

impl KeyExtractor for Global {
    fn extract(&self, _parts: &Parts) -> Result<Key, KeyError> {
        Ok(Key::from("global"))
    }
}

/// Keys by the value of a request header. See [`header`].
#[derive(Debug, Clone, Copy)]
pub struct Header(&'static str);

/// Keys requests by the value of a header, such as an API key.
///
/// A request without the header, with the header on more than one line, or with a value that
/// is not visible ASCII, is a [`KeyError`]. The client writes the value: use it for keys that something checks, such as
/// an API key your app or gateway verifies, and see [`first_of`](super::first_of) to fall back
/// to the client IP.
///
/// # Example
///
/// ```
/// use plug_limit::{KeyExtractor, key};
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
        let mut lines = parts.headers.get_all(self.0).iter();
        let value = lines.next().ok_or(KeyError::MissingHeader(self.0))?;
        // A gateway that appends its own line after the client's would otherwise let the
        // client's line, first, choose the key.
        if lines.next().is_some() {
            return Err(KeyError::RepeatedHeader(self.0));
        }
        let value = value
            .to_str()
            .map_err(|_| KeyError::NotVisibleAscii(self.0))?;
        Ok(Key::from(value))
    }
}

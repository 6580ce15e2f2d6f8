//! Opt: one option of a limit, as its script's `ARGV` receives it.

use std::fmt;
use std::sync::Arc;

use deadpool_redis::redis::{RedisWrite, ToRedisArgs};

/// One option handed to a limiter's Lua script as an `ARGV` entry.
///
/// `Int` and `Str` are what a [`Limit`](crate::Limit)'s `const OPTS` holds; a
/// [`RuntimeLimit`](crate::RuntimeLimit), made from configuration or per request, holds its
/// string options as `Text`, so nothing is leaked to make them `'static`.
///
/// Options compare by what the script receives: `Opt::Str("x")` equals `Opt::Text("x")`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Opt {
    /// An integer option, such as a limit or a window length in seconds.
    Int(i64),
    /// A string option, for custom scripts that take words, e.g. `multi_window`'s `"10/60"`.
    Str(&'static str),
    /// A string option known only at run time.
    Text(Arc<str>),
}

impl Opt {
    /// The option as a script reads it from its `ARGV`.
    pub(crate) fn arg(&self) -> plug_limit_options::Arg<'_> {
        match self {
            Self::Int(n) => plug_limit_options::Arg::Int(*n),
            Self::Str(text) => plug_limit_options::Arg::Str(text),
            Self::Text(text) => plug_limit_options::Arg::Str(text),
        }
    }
}

/// The most bytes of options a key holds as they are; longer ones it holds as their digest.
pub(crate) const KEY_TEXT_MAX: usize = 64;

/// `opts` as a key holds them when they are known at compile time (integers and `Opt::Str`):
/// their text comma-separated, written here once per limit instead of on every request. `None`
/// when the key holds their digest instead (a text with `,` or `:`, empty or `#`-led, or more
/// than [`KEY_TEXT_MAX`] bytes in all) or the options are made at run time (`Opt::Text`): the
/// key then writes them itself, by the same rules (`decide/keys.rs`; a test holds the two
/// together).
pub(crate) const fn key_text(opts: &[Opt]) -> Option<([u8; KEY_TEXT_MAX], usize)> {
    let mut text = [0_u8; KEY_TEXT_MAX];
    let mut len = 0;
    let mut i = 0;
    while i < opts.len() {
        if i > 0 {
            if len == KEY_TEXT_MAX {
                return None;
            }
            text[len] = b',';
            len += 1;
        }
        match &opts[i] {
            Opt::Int(n) => {
                let mut digits = [0_u8; 20];
                let mut count = 0;
                let mut rest = n.unsigned_abs();
                loop {
                    // A digit: `rest % 10` is below 10.
                    #[allow(clippy::cast_possible_truncation)]
                    let digit = (rest % 10) as u8;
                    digits[count] = b'0' + digit;
                    count += 1;
                    rest /= 10;
                    if rest == 0 {
                        break;
                    }
                }
                if *n < 0 {
                    if len == KEY_TEXT_MAX {
                        return None;
                    }
                    text[len] = b'-';
                    len += 1;
                }
                while count > 0 {
                    count -= 1;
                    if len == KEY_TEXT_MAX {
                        return None;
                    }
                    text[len] = digits[count];
                    len += 1;
                }
            }
            Opt::Str(option) => {
                let bytes = option.as_bytes();
                if bytes.is_empty() || bytes[0] == b'#' {
                    return None;
                }
                let mut j = 0;
                while j < bytes.len() {
                    if bytes[j] == b',' || bytes[j] == b':' || len == KEY_TEXT_MAX {
                        return None;
                    }
                    text[len] = bytes[j];
                    len += 1;
                    j += 1;
                }
            }
            Opt::Text(_) => return None,
        }
        i += 1;
    }
    Some((text, len))
}

impl PartialEq for Opt {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => a == b,
            (Self::Int(_), _) | (_, Self::Int(_)) => false,
            _ => self.as_str() == other.as_str(),
        }
    }
}

impl Eq for Opt {}

impl std::hash::Hash for Opt {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Self::Int(n) => (0_u8, n).hash(state),
            Self::Str(text) => (1_u8, text).hash(state),
            Self::Text(text) => (1_u8, &**text).hash(state),
        }
    }
}

impl Opt {
    /// The option's text, for a string option.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Int(_) => None,
            Self::Str(text) => Some(text),
            Self::Text(text) => Some(text),
        }
    }
}

impl From<i64> for Opt {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<u32> for Opt {
    fn from(n: u32) -> Self {
        Self::Int(i64::from(n))
    }
}

impl From<i32> for Opt {
    fn from(n: i32) -> Self {
        Self::Int(i64::from(n))
    }
}

impl From<&'static str> for Opt {
    fn from(text: &'static str) -> Self {
        Self::Str(text)
    }
}

impl From<String> for Opt {
    fn from(text: String) -> Self {
        Self::Text(text.into())
    }
}

impl From<Arc<str>> for Opt {
    fn from(text: Arc<str>) -> Self {
        Self::Text(text)
    }
}

/// A number or a string: `[20, 600, 5]` or `["10/1", "100/60"]` in a configuration file.
impl<'de> serde::Deserialize<'de> for Opt {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged, expecting = "an integer or a string")]
        enum Raw {
            Int(i64),
            Text(String),
        }
        Ok(match Raw::deserialize(deserializer)? {
            Raw::Int(n) => Self::Int(n),
            Raw::Text(text) => Self::Text(text.into()),
        })
    }
}

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Str(s) => f.write_str(s),
            Self::Text(s) => f.write_str(s),
        }
    }
}

impl ToRedisArgs for Opt {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        match self {
            Self::Int(n) => n.write_redis_args(out),
            Self::Str(s) => s.write_redis_args(out),
            Self::Text(s) => (&**s).write_redis_args(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_render_as_redis_arguments() {
        assert_eq!(Opt::Int(-3).to_redis_args(), vec![b"-3".to_vec()]);
        assert_eq!(Opt::Str("x").to_redis_args(), vec![b"x".to_vec()]);
        assert_eq!(Opt::Int(7).to_string(), "7");
        assert_eq!(Opt::Str("5/1"), Opt::from("5/1".to_owned()));
        let state = std::hash::RandomState::new();
        assert_eq!(
            std::hash::BuildHasher::hash_one(&state, Opt::Str("5/1")),
            std::hash::BuildHasher::hash_one(&state, Opt::from("5/1".to_owned()))
        );
        assert_ne!(Opt::Str("7"), Opt::Int(7));
        assert_eq!(
            Opt::from("10/60".to_owned()).to_redis_args(),
            vec![b"10/60".to_vec()]
        );
    }
}

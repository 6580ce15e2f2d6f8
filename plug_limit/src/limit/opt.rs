//! Opt: one option of a limit, as its script's `ARGV` receives it.

use std::fmt;
use std::sync::Arc;

use deadpool_redis::redis::{RedisWrite, ToRedisArgs};
use plug_limit_options::Builtin;

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

/// A built-in limit's options read ahead, when the limit is made (at compile time for a typed
/// one): the numbers its twin would read of them on each check (see
/// [`Builtin::read_ahead`](plug_limit_options::Builtin::read_ahead)), for that built-in only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ReadAhead {
    pub(crate) builtin: Builtin,
    pub(crate) values: [f64; 3],
}

impl ReadAhead {
    /// `opts` of `builtin` read ahead, when they are integers its rules take as given; `None`
    /// for a custom limiter, or options each check reads in full.
    pub(crate) const fn of(builtin: Option<Builtin>, opts: &[Opt]) -> Option<Self> {
        let Some(builtin) = builtin else {
            return None;
        };
        let mut ints = [None; 3];
        if opts.len() > ints.len() {
            return None;
        }
        let mut i = 0;
        while i < opts.len() {
            if let Opt::Int(n) = &opts[i] {
                ints[i] = Some(*n);
            }
            i += 1;
        }
        match builtin.read_ahead(ints.split_at(opts.len()).0) {
            Some(values) => Some(Self { builtin, values }),
            None => None,
        }
    }
}

/// The most bytes of options a key holds as they are; longer ones it holds as their digest.
pub(crate) const KEY_TEXT_MAX: usize = 64;

/// `opts` as a key holds them when they are known at compile time (integers and `Opt::Str`),
/// for `OptsKey`: what [`write_key_text`] writes, where it writes their text. `None`
/// when a key holds their digest instead (a text with `,` or `:`, empty or `#`-led, or more
/// than [`KEY_TEXT_MAX`] bytes in all) or the options are made at run time (`Opt::Text`),
/// which a `const fn` cannot read: [`write_key_text`] then writes them (a test holds the two
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

/// `opts` as a key holds them, appended to `key`: their text comma-separated (`10,60`), or `#`
/// and the hex SHA-1 of each option's length and text when that text could be mistaken for
/// another list's or a key's separators (see [`key_text`]), so the part never holds a `:` and
/// tells every list of options apart.
pub(crate) fn write_key_text(key: &mut String, opts: &[Opt]) {
    // Written as it goes, in one pass (most options are a few integers); taken back for the
    // digest should a text turn out not to be plain, or the whole too long.
    let start = key.len();
    let is_plain =
        |text: &str| !text.is_empty() && !text.starts_with('#') && !text.contains([',', ':']);
    for (n, opt) in opts.iter().enumerate() {
        if n > 0 {
            key.push(',');
        }
        let text = match opt {
            Opt::Int(n) => {
                key.push_str(itoa::Buffer::new().format(*n));
                continue;
            }
            Opt::Str(text) => text,
            Opt::Text(text) => &**text,
        };
        if !is_plain(text) {
            key.truncate(start);
            return write_key_digest(key, opts);
        }
        key.push_str(text);
    }
    if key.len() - start > KEY_TEXT_MAX {
        key.truncate(start);
        write_key_digest(key, opts);
    }
}

/// The options' part of a key as a digest of each option's length and text: no two lists of
/// options share one.
fn write_key_digest(key: &mut String, opts: &[Opt]) {
    use sha1::Digest as _;
    let mut hasher = sha1::Sha1::new();
    for opt in opts {
        let text = opt.to_string();
        hasher.update(itoa::Buffer::new().format(text.len()).as_bytes());
        hasher.update(b":");
        hasher.update(text.as_bytes());
    }
    push_digest(key, hasher.finalize().into());
}

/// `#` and `digest` in hex: how a key holds a part too long or too odd to hold as it is.
pub(crate) fn push_digest(key: &mut String, digest: [u8; 20]) {
    use std::fmt::Write as _;
    key.push('#');
    for byte in digest {
        // Writing to a String cannot fail.
        let _ = write!(key, "{byte:02x}");
    }
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
    use crate::limit::{LimitRef, RuntimeLimit};
    use crate::{DailyQuota, FixedWindow, LeakyBucket, TokenBucket};

    /// A built-in's options its rules take as given are read once, when the limit is made: a
    /// typed limit's at compile time, a `RuntimeLimit`'s when it is made; any others at each
    /// check.
    #[test]
    fn a_limit_reads_its_options_once_when_it_can() {
        let read = |limit: LimitRef<'_>| limit.read_ahead.copied();
        let ahead = |builtin, values| Some(ReadAhead { builtin, values });
        assert_eq!(
            read(LimitRef::of::<FixedWindow<10, 60>>()),
            ahead(Builtin::FixedWindow, [10.0, 60.0, 0.0])
        );
        assert_eq!(
            read(LimitRef::of::<TokenBucket<10, 60, 5>>()),
            ahead(Builtin::TokenBucket, [10.0, 60.0, 5.0])
        );
        let made = RuntimeLimit::new("gcra", [10, 60, 2]).expect("valid options");
        assert_eq!(read(made.as_ref()), ahead(Builtin::Gcra, [10.0, 60.0, 2.0]));
        let scoped = RuntimeLimit::from(FixedWindow::<3, 1>).scope("/a");
        assert_eq!(
            read(scoped.as_ref()),
            ahead(Builtin::FixedWindow, [3.0, 1.0, 0.0])
        );
        // leaky_bucket's window is read with its limit (their product is bounded), a quota's
        // period is a word, a number given as text (which `RuntimeLimit::new` refuses, but a
        // hand-written `Limit::OPTS` may hold), a custom script reads its own: each check
        // reads them, as before.
        assert_eq!(read(LimitRef::of::<LeakyBucket<10, 60>>()), None);
        assert_eq!(read(LimitRef::of::<DailyQuota<10>>()), None);
        let text = RuntimeLimit::unchecked("fixed_window", &[Opt::Str("10"), Opt::Int(60)]);
        assert_eq!(read(text.as_ref()), None);
        assert_eq!(ReadAhead::of(None, &[Opt::Int(10), Opt::Int(60)]), None);
        // Options a check refuses are left for the check to refuse, in its script's words.
        let refused = RuntimeLimit::unchecked("fixed_window", &[Opt::Int(0), Opt::Int(60)]);
        assert_eq!(read(refused.as_ref()), None);
        let too_many = [Opt::Int(10), Opt::Int(60), Opt::Int(1), Opt::Int(1)];
        assert_eq!(ReadAhead::of(Some(Builtin::Gcra), &too_many), None);
    }

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

    /// What a limit writes at compile time is what a key writes by itself, or a key writes a
    /// digest where a limit writes nothing.
    #[test]
    fn key_text_at_compile_time_is_the_text_a_key_writes() {
        let lists: [&'static [Opt]; 10] = [
            &[],
            &[Opt::Int(10), Opt::Int(60)],
            &[Opt::Int(-300), Opt::Int(i64::MIN), Opt::Int(i64::MAX)],
            &[Opt::Str("3/60"), Opt::Str("10/3600")],
            &[Opt::Int(3), Opt::Str("month"), Opt::Int(-300)],
            &[Opt::Str("")],
            &[Opt::Str("#x")],
            &[Opt::Str("a,b")],
            &[Opt::Str("a:b")],
            &[Opt::Str(
                "long-long-long-long-long-long-long-long-long-long-long-long-long-long",
            )],
        ];
        for opts in lists {
            let mut written = String::new();
            write_key_text(&mut written, opts);
            match key_text(opts) {
                Some((text, len)) => {
                    assert_eq!(std::str::from_utf8(&text[..len]), Ok(written.as_str()));
                }
                None => assert_eq!((written.len(), &written[..1]), (41, "#"), "{opts:?}"),
            }
        }
    }
}

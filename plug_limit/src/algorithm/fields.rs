//! The header values a native twin answers, in reply order and as its script would send them:
//! what the outcome makes its headers of.

use std::fmt;
use std::ops::Deref;

use http::HeaderValue;

/// The most header values a built-in answers (`x-ratelimit-limit`, `-reset`, `-remaining`,
/// `retry-after`).
const MAX_FIELDS: usize = 4;

/// One header value a twin answered, as its script would send it.
#[derive(Debug, Clone)]
pub(crate) enum Field {
    /// `string.format('%d', n)`.
    Int(i64),
    /// Any other text, e.g. a policy read from a script's reply: behind one thin pointer, so
    /// that a value, which a check moves several times, takes two words rather than three.
    #[allow(clippy::box_collection)]
    // the box is the point: one word, where `String` takes three
    Text(Box<String>),
    /// token_bucket's policy, `{limit} {limit};w={window};burst={burst};policy=token_bucket`
    /// as its script writes it, kept as its numbers and written only when read: formatting it
    /// on every check was most of a token-bucket hit. Equal to the same text.
    TokenBucketPolicy { limit: u32, window: u32, burst: u32 },
}

impl Field {
    /// Whether the value can be sent as a header value, as the Redis path checks a reply's.
    pub(crate) fn is_valid(&self) -> bool {
        match self {
            Self::Int(_) | Self::TokenBucketPolicy { .. } => true,
            Self::Text(text) => HeaderValue::from_str(text).is_ok(),
        }
    }
}

impl PartialEq for Field {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => a == b,
            (Self::Int(_), _) | (_, Self::Int(_)) => false,
            (Self::Text(a), Self::Text(b)) => a == b,
            // A policy is the text it writes, whichever way it was held.
            (a, b) => a.to_string() == b.to_string(),
        }
    }
}

impl Eq for Field {}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Text(text) => f.write_str(text),
            Self::TokenBucketPolicy {
                limit,
                window,
                burst,
            } => write!(
                f,
                "{limit} {limit};w={window};burst={burst};policy=token_bucket"
            ),
        }
    }
}

impl From<String> for Field {
    fn from(text: String) -> Self {
        Self::Text(Box::new(text))
    }
}

/// A twin's header values, in reply order, held inline: a reply allocates nothing for them.
/// Also where a [`Report`](super::Report) keeps which window decided, in what would otherwise
/// be padding: a report moved through a check is no larger than its values.
#[derive(Clone)]
pub(crate) struct Fields {
    items: [Field; MAX_FIELDS],
    len: u8,
    /// The last value was added by the library, not answered by the script: fixed_window's
    /// reset sent as its `retry-after`, under that name whatever the declared ones.
    retry_after_added: bool,
    window: u32,
}

impl Fields {
    /// Appends a value.
    ///
    /// # Panics
    ///
    /// Past [`MAX_FIELDS`] values: no built-in answers more.
    pub(crate) fn push(&mut self, field: Field) {
        assert!(
            self.push_checked(field).is_some(),
            "a built-in answers at most 4 header values"
        );
    }

    /// Appends a value; `None` past [`MAX_FIELDS`] values (a reply out of contract).
    pub(crate) fn push_checked(&mut self, field: Field) -> Option<()> {
        let item = self.items.get_mut(usize::from(self.len))?;
        *item = field;
        self.len += 1;
        Some(())
    }

    /// The value at `position`, to change.
    pub(crate) fn get_mut(&mut self, position: usize) -> Option<&mut Field> {
        self.items[..usize::from(self.len)].get_mut(position)
    }

    /// Keeps the first `len` values.
    pub(crate) fn truncate(&mut self, len: usize) {
        let len = self.len.min(u8::try_from(len).unwrap_or(u8::MAX));
        if len < self.len {
            self.retry_after_added = false;
        }
        self.len = len;
    }

    /// Appends `retry_after`, a value the script did not answer; `None` when there is no room.
    pub(super) fn add_retry_after(&mut self, retry_after: i64) -> Option<()> {
        self.push_checked(Field::Int(retry_after))?;
        self.retry_after_added = true;
        Some(())
    }

    /// Whether the last value was added by [`add_retry_after`](Self::add_retry_after).
    pub(super) fn retry_after_added(&self) -> bool {
        self.retry_after_added
    }

    /// The window a report says decided.
    pub(super) fn window(&self) -> u32 {
        self.window
    }

    pub(super) fn set_window(&mut self, window: u32) {
        self.window = window;
    }

    /// The values as text, as the script's reply would read.
    #[cfg(test)]
    pub(crate) fn texts(&self) -> Vec<String> {
        self.iter().map(ToString::to_string).collect()
    }
}

impl Default for Fields {
    fn default() -> Self {
        Self::from([])
    }
}

impl<const N: usize> From<[Field; N]> for Fields {
    #[inline]
    fn from(fields: [Field; N]) -> Self {
        const {
            assert!(
                N <= MAX_FIELDS,
                "a built-in answers at most 4 header values"
            )
        };
        // Each slot written once, so nothing is dropped on the way.
        let mut fields = fields.into_iter();
        let items = std::array::from_fn(|_| fields.next().unwrap_or(Field::Int(0)));
        #[allow(clippy::cast_possible_truncation)] // N <= MAX_FIELDS, checked above
        Self {
            items,
            len: N as u8,
            retry_after_added: false,
            window: 0,
        }
    }
}

impl Deref for Fields {
    type Target = [Field];

    fn deref(&self) -> &[Field] {
        &self.items[..usize::from(self.len)]
    }
}

impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..] && self.window == other.window
    }
}

impl Eq for Fields {}

impl fmt::Debug for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<const N: usize> PartialEq<[&str; N]> for Fields {
    fn eq(&self, other: &[&str; N]) -> bool {
        usize::from(self.len) == N
            && self
                .iter()
                .zip(other)
                .all(|(field, text)| field.to_string() == *text)
    }
}

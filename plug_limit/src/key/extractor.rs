//! The `KeyExtractor` trait, the `Key` it returns, and `Or`, the fallback chain its `or` makes.

use std::any::Any;
use std::net::IpAddr;

use http::request::Parts;

use super::KeyError;

/// Names the client a request is counted against.
///
/// Implemented by the extractors of [`key`](crate::key) and by any
/// `Fn(&Parts) -> Result<K, KeyError>` where `K: Into<Key>`.
///
/// # Example
///
/// ```
/// use axum::http::request::Parts;
/// use plug_limit::key;
/// use plug_limit::key::{KeyError, KeyExtractor};
///
/// fn tenant(parts: &Parts) -> Result<String, KeyError> {
///     parts
///         .uri
///         .host()
///         .map(str::to_owned)
///         .ok_or_else(|| KeyError::new("request has no host"))
/// }
///
/// // A tenant's budget, else the client IP's.
/// let key = tenant.or(key::peer_ip());
/// # let _: &dyn KeyExtractor = &key;
/// ```
pub trait KeyExtractor: Any + Send + Sync {
    /// Extracts the key from the request parts.
    ///
    /// # Errors
    ///
    /// A [`KeyError`] when the request does not carry what the key is made of. The request then
    /// follows the limiter's [`KeyFailure`](crate::KeyFailure) policy, and the error is logged
    /// at `DEBUG`.
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError>;

    /// This key, else `then`'s when this one cannot be extracted; the two never share a
    /// budget. In a constant, write [`Or::new(self, then)`](Or::new).
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::key;
    /// use plug_limit::key::KeyExtractor;
    ///
    /// // Users by the id an auth layer in front sets, everyone else by address.
    /// let key = key::header("x-user-id").or(key::peer_ip());
    /// # let _: &dyn KeyExtractor = &key;
    /// ```
    #[must_use]
    fn or<Then: KeyExtractor>(self, then: Then) -> Or<Self, Then>
    where
        Self: Sized,
    {
        Or::new(self, then)
    }
}

/// A [`Limit::KEY`](crate::Limit::KEY) constant: what it extracts.
impl KeyExtractor for &'static dyn KeyExtractor {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        (**self).extract(parts)
    }
}

impl<F, K> KeyExtractor for F
where
    F: Fn(&Parts) -> Result<K, KeyError> + Send + Sync + 'static,
    K: Into<Key>,
{
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        self(parts).map(Into::into)
    }
}

/// The key(s) a request is counted against, as returned by a [`KeyExtractor`].
///
/// Built-in limiters use one key. A custom script may take several (`KEYS[1]`, `KEYS[2]`, ...);
/// on Redis Cluster they land in one slot: every key of a request carries the hash tag the
/// library derives from its first part (braces in the parts themselves choose nothing).
///
/// # Example
///
/// ```
/// use plug_limit::key::Key;
///
/// let key = Key::many(["user-7:minute".to_owned(), "user-7:day".to_owned()]);
/// let parts: Vec<&str> = key.iter().flat_map(Key::iter).collect();
/// assert_eq!(parts, ["user-7:minute", "user-7:day"]);
/// assert_eq!(Key::from("user-7").iter().collect::<Vec<_>>(), ["user-7"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    first: String,
    rest: Vec<String>,
}

impl Key {
    /// A key made of several parts, passed to the script as `KEYS[1..]`.
    ///
    /// Returns `None` when `keys` is empty.
    #[must_use]
    pub fn many(keys: impl IntoIterator<Item = String>) -> Option<Self> {
        let mut keys = keys.into_iter();
        let first = keys.next()?;
        Some(Self {
            first,
            rest: keys.collect(),
        })
    }

    /// The parts of the key, in `KEYS` order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.first.as_str()).chain(self.rest.iter().map(String::as_str))
    }

    /// The same key with `tag` and `:` before every part, so that keys of two extractors
    /// cannot meet.
    pub(super) fn tagged(self, tag: &str) -> Self {
        let tag = |part: String| {
            let mut tagged = String::with_capacity(tag.len() + 1 + part.len());
            tagged.push_str(tag);
            tagged.push(':');
            tagged.push_str(&part);
            tagged
        };
        Self {
            first: tag(self.first),
            rest: self.rest.into_iter().map(tag).collect(),
        }
    }
}

impl From<String> for Key {
    fn from(first: String) -> Self {
        Self {
            first,
            rest: Vec::new(),
        }
    }
}

impl From<&str> for Key {
    fn from(first: &str) -> Self {
        first.to_owned().into()
    }
}

/// The whole address. [`peer_ip`](crate::key::peer_ip) and
/// [`client_ip`](crate::key::client_ip()) key IPv6 clients by prefix instead.
impl From<IpAddr> for Key {
    fn from(ip: IpAddr) -> Self {
        ip.to_string().into()
    }
}

/// One key, else another: by `first`, or by `then` when `first` cannot be extracted ("the API
/// key, else the client IP"). Made by [`KeyExtractor::or`], or in a constant (such as
/// `#[rate_limit(key = ...)]`), where a trait method cannot run, by [`Or::new`].
///
/// The two never share a budget: `first`'s keys are tagged `1:` and `then`'s `2:`, so a client
/// that sends `x-api-key: 10.0.0.1` is counted as `1:10.0.0.1`, never as the client whose
/// address is `10.0.0.1` (`2:10.0.0.1`). Chains nest: `a.or(b).or(c)` tags `1:1:`, `1:2:` and
/// `2:`. When both fail, the [`KeyError::Neither`] names both reasons.
///
/// The first key must be one a client cannot invent, such as an API key that is checked
/// before the limit (an auth layer outside the rate limit that refuses unknown keys).
/// Otherwise a client sends a new value with each request, and gets a new budget with each.
///
/// # Example
///
/// ```
/// use std::net::SocketAddr;
///
/// use axum::extract::ConnectInfo;
/// use plug_limit::key;
/// use plug_limit::key::KeyExtractor;
///
/// const KEY: key::Or<key::Header, key::PeerIp> =
///     key::Or::new(key::header("x-api-key"), key::peer_ip());
///
/// let peer = ConnectInfo(SocketAddr::from(([192, 0, 2, 1], 40000)));
/// let with_key = http::Request::builder()
///     .header("x-api-key", "192.0.2.1")
///     .extension(peer)
///     .body(())?;
/// let without = http::Request::builder().extension(peer).body(())?;
/// let key_of = |request: http::Request<()>| -> Result<Vec<String>, plug_limit::key::KeyError> {
///     let key = KEY.extract(&request.into_parts().0)?;
///     Ok(key.iter().map(str::to_owned).collect())
/// };
/// assert_eq!(key_of(with_key)?, ["1:192.0.2.1"]);
/// assert_eq!(key_of(without)?, ["2:192.0.2.1"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Or<First, Then> {
    first: First,
    then: Then,
}

impl<First, Then> Or<First, Then>
where
    First: KeyExtractor,
    Then: KeyExtractor,
{
    /// `first`, else `then`: `first.or(then)`, in a constant.
    #[must_use]
    pub const fn new(first: First, then: Then) -> Self {
        Self { first, then }
    }
}

impl<First, Then> KeyExtractor for Or<First, Then>
where
    First: KeyExtractor,
    Then: KeyExtractor,
{
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        match self.first.extract(parts) {
            Ok(key) => Ok(key.tagged("1")),
            Err(first) => match self.then.extract(parts) {
                Ok(key) => Ok(key.tagged("2")),
                Err(then) => Err(KeyError::Neither {
                    first: Box::new(first),
                    then: Box::new(then),
                }),
            },
        }
    }
}

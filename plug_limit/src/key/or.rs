//! Fallback chains: one key, else another, in key spaces kept apart.

use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

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

//! Key extractors: who a request is counted against.
//!
//! A [`KeyExtractor`] reads the request parts and names the client (an IP address, an API key,
//! a user id). [`PlugLimit`](crate::PlugLimit) then namespaces it as
//! `{prefix}:{limiter}:{scope}:{key}`, so the same client has one budget per limiter and route.
//!
//! Any `Fn(&Parts) -> Result<K, KeyError>` closure or function is a key extractor:
//!
//! ```
//! use axum::http::request::Parts;
//! use plug_limit::key::KeyError;
//!
//! fn tenant(parts: &Parts) -> Result<String, KeyError> {
//!     parts
//!         .uri
//!         .host()
//!         .map(str::to_owned)
//!         .ok_or_else(|| KeyError::new("request has no host"))
//! }
//! # let _: &dyn plug_limit::KeyExtractor = &tenant;
//! ```

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use http::request::Parts;

/// Names the client a request is counted against.
pub trait KeyExtractor: Send + Sync + 'static {
    /// Extracts the key from the request parts.
    ///
    /// # Errors
    ///
    /// A [`KeyError`] when the request does not carry what the key is made of. The request then
    /// follows the limiter's [`FailurePolicy`](crate::FailurePolicy), and the error is logged.
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError>;
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
/// on Redis Cluster they must then share a hash tag.
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

impl From<IpAddr> for Key {
    fn from(ip: IpAddr) -> Self {
        ip.to_string().into()
    }
}

/// Why a key could not be extracted from a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(Cow<'static, str>);

impl KeyError {
    /// A key error with the given reason, e.g. `"missing header `x-api-key`"`.
    #[must_use]
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Self {
        Self(reason.into())
    }
}

/// One budget for every client. See [`global`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

/// Counts every request against one shared key: a limit for the whole route.
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
/// A request without the header, or with a value that is not visible ASCII, is a
/// [`KeyError`].
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
        let value = parts
            .headers
            .get(self.0)
            .ok_or_else(|| KeyError::new(format!("missing header `{}`", self.0)))?;
        let value = value
            .to_str()
            .map_err(|_| KeyError::new(format!("header `{}` is not visible ASCII", self.0)))?;
        Ok(Key::from(value))
    }
}

/// Keys by the TCP peer's IP address. See [`peer_ip`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerIp;

/// Keys requests by the IP address of the TCP peer, from axum's [`ConnectInfo`].
///
/// Serve the app with `into_make_service_with_connect_info::<SocketAddr>()`; without it every
/// request is a [`KeyError`]. Behind a reverse proxy the peer is the proxy: use [`client_ip()`]
/// instead. This is the default key.
#[must_use]
pub const fn peer_ip() -> PeerIp {
    PeerIp
}

impl KeyExtractor for PeerIp {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        peer(parts).map(Key::from)
    }
}

fn peer(parts: &Parts) -> Result<IpAddr, KeyError> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
        .ok_or_else(|| {
            KeyError::new(
                "no peer address: serve with `into_make_service_with_connect_info::<SocketAddr>()`",
            )
        })
}

/// Where a trusted proxy puts the client's IP address. See [`client_ip()`].
///
/// Pick the one your own proxy sets; a header no proxy of yours overwrites can be forged by the
/// client. The `Rightmost*` sources take the address your proxy appended, never the leftmost
/// one a client can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientIpSource {
    /// The rightmost address in `X-Forwarded-For` (nginx, most load balancers).
    RightmostXForwardedFor,
    /// The rightmost `for=` address in the `Forwarded` header (RFC 7239).
    RightmostForwarded,
    /// `X-Real-Ip` (nginx `real_ip` module).
    XRealIp,
    /// `CF-Connecting-IP` (Cloudflare).
    CfConnectingIp,
    /// `True-Client-IP` (Cloudflare Enterprise, Akamai).
    TrueClientIp,
    /// `Fly-Client-IP` (Fly.io).
    FlyClientIp,
    /// `CloudFront-Viewer-Address` (AWS CloudFront).
    CloudFrontViewerAddress,
    /// `X-Envoy-External-Address` (Envoy).
    XEnvoyExternalAddress,
    /// The TCP peer, as [`peer_ip`].
    ConnectInfo,
}

/// Keys by the client IP a trusted proxy reports. See [`client_ip()`].
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(ClientIpSource);

/// Keys requests by the client IP address that a trusted proxy reports in `source`.
///
/// # Example
///
/// ```
/// use plug_limit::key::{self, ClientIpSource};
///
/// let key = key::client_ip(ClientIpSource::RightmostXForwardedFor);
/// # let _: &dyn plug_limit::KeyExtractor = &key;
/// ```
#[must_use]
pub const fn client_ip(source: ClientIpSource) -> ClientIp {
    ClientIp(source)
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        let headers = &parts.headers;
        let found = match self.0 {
            ClientIpSource::RightmostXForwardedFor => client_ip::rightmost_x_forwarded_for(headers),
            ClientIpSource::RightmostForwarded => client_ip::rightmost_forwarded(headers),
            ClientIpSource::XRealIp => client_ip::x_real_ip(headers),
            ClientIpSource::CfConnectingIp => client_ip::cf_connecting_ip(headers),
            ClientIpSource::TrueClientIp => client_ip::true_client_ip(headers),
            ClientIpSource::FlyClientIp => client_ip::fly_client_ip(headers),
            ClientIpSource::CloudFrontViewerAddress => {
                client_ip::cloudfront_viewer_address(headers)
            }
            ClientIpSource::XEnvoyExternalAddress => client_ip::x_envoy_external_address(headers),
            ClientIpSource::ConnectInfo => return peer(parts).map(Key::from),
        };
        found
            .map(Key::from)
            .map_err(|err| KeyError::new(format!("client ip from {:?}: {err}", self.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut request = Request::builder();
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn first(key: &Key) -> &str {
        key.iter().next().unwrap()
    }

    #[test]
    fn header_key_reads_the_value_and_reports_absence() {
        let key = header("x-api-key");
        assert_eq!(
            first(&key.extract(&parts(&[("x-api-key", "abc")])).unwrap()),
            "abc"
        );
        assert_eq!(
            key.extract(&parts(&[])).unwrap_err().to_string(),
            "missing header `x-api-key`"
        );
    }

    #[test]
    fn rightmost_forwarded_for_ignores_client_written_entries() {
        let key = client_ip(ClientIpSource::RightmostXForwardedFor);
        let got = key
            .extract(&parts(&[("x-forwarded-for", "6.6.6.6, 10.0.0.7")]))
            .unwrap();
        assert_eq!(first(&got), "10.0.0.7");
    }

    #[test]
    fn peer_ip_needs_connect_info() {
        let mut with_peer = parts(&[]);
        with_peer
            .extensions
            .insert(ConnectInfo(SocketAddr::from(([192, 0, 2, 1], 4000))));
        assert_eq!(first(&peer_ip().extract(&with_peer).unwrap()), "192.0.2.1");
        assert!(
            peer_ip()
                .extract(&parts(&[]))
                .unwrap_err()
                .to_string()
                .starts_with("no peer address")
        );
    }

    #[test]
    fn closures_and_many_keys() {
        let by_path = |parts: &Parts| Ok::<_, KeyError>(parts.uri.path().to_owned());
        assert_eq!(first(&by_path.extract(&parts(&[])).unwrap()), "/");
        let many = Key::many(["a".to_owned(), "b".to_owned()]).unwrap();
        assert_eq!(many.iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(Key::many(Vec::new()), None);
        assert_eq!(first(&global().extract(&parts(&[])).unwrap()), "global");
    }
}

//! The client IP a proxy reports.

use std::net::IpAddr;

use http::request::Parts;

use super::peer_ip::{DEFAULT_IPV6_PREFIX, checked_prefix, ip_key, peer};
use super::{Key, KeyError, KeyExtractor, forwarded, single_value};

/// Where a trusted proxy puts the client's IP address. See [`client_ip()`].
///
/// Pick the one your own proxy sets; a header no proxy of yours overwrites can be forged by the
/// client. The `Rightmost*` sources take the entry your proxy appended and never read the ones
/// to its left, which the client wrote.
///
/// # Example
///
/// ```
/// use plug_limit::key::{self, ClientIpSource};
///
/// // nginx in front, with `proxy_set_header X-Real-IP $remote_addr;`.
/// let key = key::client_ip(ClientIpSource::XRealIp);
/// # let _: &dyn plug_limit::KeyExtractor = &key;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientIpSource {
    /// The rightmost address in `X-Forwarded-For` (nginx, most load balancers), with or
    /// without a port: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]:4711`.
    RightmostXForwardedFor,
    /// The `for=` address of the last element of `Forwarded` (RFC 7239):
    /// `for=192.0.2.1`, `for="192.0.2.1:4711"`, `for="[2001:db8::1]:4711"`.
    RightmostForwarded,
    /// `X-Real-Ip` (nginx `real_ip` module): one address.
    XRealIp,
    /// `CF-Connecting-IP` (Cloudflare): one address.
    CfConnectingIp,
    /// `True-Client-IP` (Cloudflare Enterprise, Akamai): one address.
    TrueClientIp,
    /// `Fly-Client-IP` (Fly.io): one address.
    FlyClientIp,
    /// `CloudFront-Viewer-Address` (AWS CloudFront): the address and the client's port, IPv6
    /// unbracketed: `198.51.100.10:46532`, `2001:db8::1:46532`.
    CloudFrontViewerAddress,
    /// `X-Envoy-External-Address` (Envoy): one address.
    XEnvoyExternalAddress,
    /// The TCP peer, as [`peer_ip`](super::peer_ip).
    ConnectInfo,
}

impl ClientIpSource {
    /// The client's address as this source tells it.
    fn read(self, parts: &Parts) -> Result<IpAddr, KeyError> {
        let headers = &parts.headers;
        match self {
            Self::RightmostXForwardedFor => forwarded::rightmost_x_forwarded_for(headers),
            Self::RightmostForwarded => forwarded::rightmost_forwarded(headers),
            Self::XRealIp => single_value::ip(headers, "x-real-ip"),
            Self::CfConnectingIp => single_value::ip(headers, "cf-connecting-ip"),
            Self::TrueClientIp => single_value::ip(headers, "true-client-ip"),
            Self::FlyClientIp => single_value::ip(headers, "fly-client-ip"),
            Self::CloudFrontViewerAddress => {
                single_value::ip_and_port(headers, "cloudfront-viewer-address")
            }
            Self::XEnvoyExternalAddress => single_value::ip(headers, "x-envoy-external-address"),
            Self::ConnectInfo => peer(parts),
        }
    }
}

/// Keys by the client IP a proxy reports. See [`client_ip()`].
#[derive(Debug, Clone, Copy)]
pub struct ClientIp {
    source: ClientIpSource,
    ipv6_prefix: u8,
}

/// Keys requests by the client IP address that a proxy reports in `source`; an IPv6 client by
/// its /64 (see [`ClientIp::ipv6_prefix`]).
///
/// The header is believed from every peer: use it only when nothing but your proxy can reach
/// the app. A client that reaches the app directly writes the header itself, and with it picks
/// a fresh budget for every request.
///
/// # Example
///
/// ```
/// use plug_limit::key::{self, ClientIpSource};
///
/// // Behind Fly.io's proxy, the only way in.
/// const FLY: key::ClientIp = key::client_ip(ClientIpSource::FlyClientIp);
/// ```
#[must_use]
pub const fn client_ip(source: ClientIpSource) -> ClientIp {
    ClientIp {
        source,
        ipv6_prefix: DEFAULT_IPV6_PREFIX,
    }
}

impl ClientIp {
    /// Keys IPv6 clients by their first `bits` bits instead of 64, as
    /// [`PeerIp::ipv6_prefix`](super::PeerIp::ipv6_prefix) does.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::key::{self, ClientIpSource};
    ///
    /// const PER_HOME: key::ClientIp = key::client_ip(ClientIpSource::FlyClientIp).ipv6_prefix(56);
    /// ```
    ///
    /// # Panics
    ///
    /// When `bits` is not within `1..=128`; in a `const` context this is a compile error.
    #[must_use]
    pub const fn ipv6_prefix(self, bits: u8) -> Self {
        Self {
            ipv6_prefix: checked_prefix(bits),
            ..self
        }
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        let ip = self.source.read(parts)?;
        Ok(ip_key(ip, self.ipv6_prefix))
    }
}

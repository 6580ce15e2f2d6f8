//! The TCP peer's address, and how an address becomes a key: IPv4 whole, IPv6 by prefix.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::extract::connect_info::MockConnectInfo;
use http::request::Parts;

use super::{Key, KeyError, KeyExtractor};

/// The prefix length IPv6 clients are keyed by unless told otherwise (see the
/// [module docs](super#ipv6-clients-are-keyed-by-prefix)).
pub(super) const DEFAULT_IPV6_PREFIX: u8 = 64;

/// Keys by the TCP peer's IP address. See [`peer_ip`].
#[derive(Debug, Clone, Copy)]
pub struct PeerIp {
    ipv6_prefix: u8,
}

/// Keys requests by the IP address of the TCP peer, from axum's [`ConnectInfo`]; an IPv6
/// peer by its /64 (see [`PeerIp::ipv6_prefix`]).
///
/// Serve the app with `into_make_service_with_connect_info::<SocketAddr>()`; without it every
/// request is a [`KeyError`]. With the `tonic` feature, a call served by tonic's server is
/// keyed by the peer address tonic gives it (`TcpConnectInfo`), as a gRPC service under a
/// [`RateLimitLayer`](crate::RateLimitLayer) needs. Behind a reverse proxy the peer is the
/// proxy: use [`client_ip()`](super::client_ip()) instead. This is the default key.
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
/// let peer: SocketAddr = "[2001:db8:1:2:aaaa::7]:40000".parse()?;
/// let request = http::Request::builder().extension(ConnectInfo(peer)).body(())?;
/// let key = key::peer_ip().extract(&request.into_parts().0)?;
/// assert_eq!(key.iter().collect::<Vec<_>>(), ["2001:db8:1:2::/64"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub const fn peer_ip() -> PeerIp {
    PeerIp {
        ipv6_prefix: DEFAULT_IPV6_PREFIX,
    }
}

impl Default for PeerIp {
    fn default() -> Self {
        peer_ip()
    }
}

impl PeerIp {
    /// Keys IPv6 peers by their first `bits` bits instead of 64: `56` gives one budget per
    /// residential customer of ISPs that hand out /56 blocks; `128` keys every address alone.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::key;
    ///
    /// const PER_SITE: key::PeerIp = key::peer_ip().ipv6_prefix(56);
    /// ```
    ///
    /// # Panics
    ///
    /// When `bits` is not within `1..=128`; in a `const` context this is a compile error.
    #[must_use]
    pub const fn ipv6_prefix(self, bits: u8) -> Self {
        Self {
            ipv6_prefix: checked_prefix(bits),
        }
    }
}

impl KeyExtractor for PeerIp {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        peer(parts).map(|ip| ip_key(ip, self.ipv6_prefix))
    }
}

/// Refuses an IPv6 prefix length outside `1..=128`.
pub(super) const fn checked_prefix(bits: u8) -> u8 {
    assert!(
        bits >= 1 && bits <= 128,
        "an IPv6 prefix length must be within 1..=128"
    );
    bits
}

/// The TCP peer's address, an IPv4-mapped IPv6 address as the IPv4 address it stands for:
/// axum's [`ConnectInfo`], else the address a test gives with axum's [`MockConnectInfo`]
/// layer (as axum's own `ConnectInfo` extractor reads them), or with the `tonic` feature,
/// tonic's server's `TcpConnectInfo`.
pub(super) fn peer(parts: &Parts) -> Result<IpAddr, KeyError> {
    let extensions = &parts.extensions;
    let addr = extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
        .or_else(|| {
            let MockConnectInfo(addr) = extensions.get::<MockConnectInfo<SocketAddr>>()?;
            Some(*addr)
        });
    #[cfg(feature = "tonic")]
    let addr = addr.or_else(|| {
        extensions
            .get::<tonic::transport::server::TcpConnectInfo>()?
            .remote_addr()
    });
    addr.map(|addr| addr.ip().to_canonical())
        .ok_or(KeyError::NoPeerAddress)
}

/// The key of a client address: an IPv4 address whole (`192.0.2.1`), an IPv6 address as its
/// network of `ipv6_prefix` bits (`2001:db8:1:2::/64`). An IPv4-mapped IPv6 address
/// (`::ffff:192.0.2.1`) is the IPv4 client it stands for.
pub(super) fn ip_key(ip: IpAddr, ipv6_prefix: u8) -> Key {
    match ip.to_canonical() {
        IpAddr::V4(ip) => Key::from(ip.to_string()),
        IpAddr::V6(ip) => {
            // `checked_prefix` keeps the shift within 0..=127; a zero mask would be the only
            // result of a wider one.
            let mask = u128::MAX
                .checked_shl(128 - u32::from(ipv6_prefix))
                .unwrap_or(0);
            let network = Ipv6Addr::from_bits(ip.to_bits() & mask);
            Key::from(format!("{network}/{ipv6_prefix}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: &str, prefix: u8) -> String {
        let key = ip_key(ip.parse().unwrap(), prefix);
        key.iter().collect()
    }

    #[test]
    fn ipv4_is_keyed_whole_and_ipv6_by_prefix() {
        assert_eq!(key("192.0.2.1", 64), "192.0.2.1");
        assert_eq!(key("2001:db8:1:2:3:4:5:6", 64), "2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:2ff:3:4:5:6", 56), "2001:db8:1:200::/56");
        assert_eq!(key("2001:db8::1", 128), "2001:db8::1/128");
        assert_eq!(key("ffff::1", 1), "8000::/1");
    }

    #[test]
    fn ipv4_mapped_addresses_are_the_ipv4_client() {
        assert_eq!(key("::ffff:192.0.2.1", 64), "192.0.2.1");
        assert_eq!(key("::ffff:192.0.2.1", 128), "192.0.2.1");
    }

    #[test]
    #[should_panic(expected = "an IPv6 prefix length must be within 1..=128")]
    fn a_zero_prefix_is_refused() {
        let _ = peer_ip().ipv6_prefix(0);
    }

    #[test]
    #[should_panic(expected = "an IPv6 prefix length must be within 1..=128")]
    fn a_prefix_longer_than_an_address_is_refused() {
        let _ = peer_ip().ipv6_prefix(129);
    }
}

//! The client IP a proxy reports, believed only from the proxies you trust.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Mutex, PoisonError};

use http::request::Parts;
use ipnet::IpNet;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

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
/// use plug_limit::key::{ClientIp, ClientIpSource, IpNet};
///
/// // nginx on the same host, with `proxy_set_header X-Real-IP $remote_addr;`.
/// let proxies = vec!["127.0.0.1/32".parse::<IpNet>()?, "::1/128".parse()?];
/// let key = ClientIp::new(ClientIpSource::XRealIp, proxies);
/// # let _: &dyn plug_limit::key::KeyExtractor = &key;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// Every peer, as a list of trusted proxies: `0.0.0.0/0` and `::/0`. With it,
/// [`client_ip`] believes the source whoever sent the request, and needs no peer address.
///
/// Name it only where nothing but your proxies can reach the app (a private network; a
/// platform such as Fly.io whose proxy addresses are not published): a client that reaches
/// the app directly writes the header itself, and with it picks a fresh budget per request.
pub const ANY_PEER: &[IpNet] = &[
    IpNet::new_assert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
    IpNet::new_assert(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
];

/// Keys by the client IP a proxy reports: [`client_ip()`] in a constant (for
/// `#[rate_limit(key = ..)]`), [`ClientIp::new`] with a list read at start-up.
#[derive(Debug, Clone, Copy)]
pub struct ClientIp {
    source: ClientIpSource,
    ipv6_prefix: u8,
    proxies: &'static [IpNet],
    /// The list holds an IPv4 `/0` and an IPv6 `/0`: the peer need not be read.
    trusts_every_peer: bool,
}

/// A list of trusted proxies read at run time, kept for the life of the process: each
/// distinct list once, however many keys are made of it, so that a `ClientIp` stays a
/// `Copy` constant-friendly value.
fn interned(list: Vec<IpNet>) -> &'static [IpNet] {
    static LISTS: Mutex<Option<HashSet<&'static [IpNet]>>> = Mutex::new(None);
    // A panic while the lock was held left the set whole: inserting is its only change.
    let mut lists = LISTS.lock().unwrap_or_else(PoisonError::into_inner);
    let lists = lists.get_or_insert_with(HashSet::new);
    if let Some(&known) = lists.get(list.as_slice()) {
        return known;
    }
    let list: &'static [IpNet] = list.leak();
    lists.insert(list);
    list
}

/// Whether `list` holds an IPv4 `/0` and an IPv6 `/0`, and so trusts every peer.
const fn trusts_every_peer(list: &[IpNet]) -> bool {
    let (mut every_v4, mut every_v6) = (false, false);
    let mut i = 0;
    while i < list.len() {
        match &list[i] {
            IpNet::V4(net) => every_v4 |= net.prefix_len() == 0,
            IpNet::V6(net) => every_v6 |= net.prefix_len() == 0,
        }
        i += 1;
    }
    every_v4 && every_v6
}

/// Keys requests by the client IP address that a proxy reports in `source`, believed only
/// when the TCP peer (axum's `ConnectInfo<SocketAddr>`) is inside one of `trusted_proxies`;
/// any other peer is keyed by its own address, as [`peer_ip`](super::peer_ip) does, so a
/// client that reaches the app directly cannot choose its key. An IPv6 client is keyed by its
/// /64 (see [`ClientIp::ipv6_prefix`]).
///
/// A request without a peer address is a [`KeyError::NoPeerAddress`]; an empty list trusts no
/// one. [`ANY_PEER`] believes every peer: name it only where nothing but your proxies can
/// reach the app. A list read at start-up is [`ClientIp::new`]'s, or a configuration file's
/// `client_ip` ([`Config`](crate::Config)).
///
/// # Example
///
/// ```
/// use std::net::{IpAddr, Ipv4Addr};
///
/// use plug_limit::key::{self, ClientIp, ClientIpSource, IpNet};
///
/// // nginx in front, on 10.0.0.0/8: in a constant, for `#[rate_limit(key = ...)]`.
/// const PROXIES: &[IpNet] = &[IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8)];
/// const BY_PROXY: ClientIp = key::client_ip(ClientIpSource::RightmostXForwardedFor, PROXIES);
///
/// // Behind Fly.io's proxy, the only way in, whose addresses are not published.
/// const FLY: ClientIp = key::client_ip(ClientIpSource::FlyClientIp, key::ANY_PEER);
/// ```
#[must_use]
pub const fn client_ip(source: ClientIpSource, trusted_proxies: &'static [IpNet]) -> ClientIp {
    ClientIp {
        source,
        ipv6_prefix: DEFAULT_IPV6_PREFIX,
        proxies: trusted_proxies,
        trusts_every_peer: trusts_every_peer(trusted_proxies),
    }
}

impl ClientIp {
    /// [`client_ip()`] with a list of trusted proxies read at start-up rather than written as
    /// a constant. The list is kept for the life of the process, each distinct list once: make
    /// keys at start-up, not per request.
    ///
    /// ```
    /// use plug_limit::key::{ClientIp, ClientIpSource, IpNet};
    ///
    /// // e.g. from `TRUSTED_PROXIES=10.0.0.0/8,fd00::/8`.
    /// let proxies: Vec<IpNet> = "10.0.0.0/8,fd00::/8"
    ///     .split(',')
    ///     .map(str::parse)
    ///     .collect::<Result<_, _>>()?;
    /// let key = ClientIp::new(ClientIpSource::RightmostForwarded, proxies);
    /// # let _: &dyn plug_limit::key::KeyExtractor = &key;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(source: ClientIpSource, trusted_proxies: impl IntoIterator<Item = IpNet>) -> Self {
        client_ip(source, interned(trusted_proxies.into_iter().collect()))
    }

    /// Keys IPv6 clients by their first `bits` bits instead of 64, as
    /// [`PeerIp::ipv6_prefix`](super::PeerIp::ipv6_prefix) does.
    ///
    /// # Example
    ///
    /// ```
    /// use plug_limit::key::{self, ClientIp, ClientIpSource};
    ///
    /// const PER_HOME: ClientIp =
    ///     key::client_ip(ClientIpSource::FlyClientIp, key::ANY_PEER).ipv6_prefix(56);
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

    /// Whether `peer` is one of the trusted proxies.
    fn trusts(&self, peer: IpAddr) -> bool {
        // `peer` is canonical (IPv4-mapped addresses as IPv4); a list may still name IPv4
        // proxies in their mapped form.
        let mapped = match peer {
            IpAddr::V4(ip) => IpAddr::V6(ip.to_ipv6_mapped()),
            IpAddr::V6(_) => peer,
        };
        // Only a block inside `::ffff:0:0/96` names IPv4 peers: `::/0` trusts no IPv4 peer.
        let names_ipv4 = |proxy: &IpNet| match proxy {
            IpNet::V6(v6) => v6.prefix_len() >= 96 && v6.network().to_ipv4_mapped().is_some(),
            IpNet::V4(_) => false,
        };
        self.proxies
            .iter()
            .any(|proxy| proxy.contains(&peer) || (names_ipv4(proxy) && proxy.contains(&mapped)))
    }

    /// The client's address: the source's when the peer is a trusted proxy, else the peer's.
    pub(super) fn trusted_address(&self, parts: &Parts) -> Result<IpAddr, KeyError> {
        if self.trusts_every_peer {
            return self.source.read(parts);
        }
        let peer = peer(parts)?;
        if self.trusts(peer) {
            self.source.read(parts)
        } else {
            Ok(peer)
        }
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Result<Key, KeyError> {
        let ip = self.trusted_address(parts)?;
        Ok(ip_key(ip, self.ipv6_prefix))
    }
}

/// A [`ClientIp`] as a configuration file writes it (in [`Config`](crate::Config),
/// `client_ip`): `{ "source": "rightmost_x_forwarded_for", "trusted_proxies": ["10.0.0.0/8",
/// "::1"], "ipv6_prefix": 56 }`, the source spelled as [`ClientIpSource`]'s variants in
/// snake case, `ipv6_prefix` optional (64).
impl<'de> Deserialize<'de> for ClientIp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Written {
            source: ClientIpSource,
            trusted_proxies: Vec<String>,
            ipv6_prefix: Option<u8>,
        }
        let written = Written::deserialize(deserializer)?;
        let mut proxies = Vec::with_capacity(written.trusted_proxies.len());
        for (i, text) in written.trusted_proxies.iter().enumerate() {
            let block = block(text)
                .map_err(|rule| D::Error::custom(format!("trusted_proxies[{i}]: {rule}")))?;
            proxies.push(block);
        }
        let key = Self::new(written.source, proxies);
        match written.ipv6_prefix {
            None => Ok(key),
            Some(bits @ 1..=128) => Ok(key.ipv6_prefix(bits)),
            Some(bits) => Err(D::Error::custom(format!(
                "ipv6_prefix must be 1 to 128, got {bits}"
            ))),
        }
    }
}

/// One entry of a list of blocks (trusted proxies, `Rules`' allow- and deny-lists): a CIDR
/// block, or one address as the block of it alone. A block with host bits set is refused, not
/// widened: `10.0.0.1/8` names one host by mistake more often than all of `10.0.0.0/8`.
pub(crate) fn block(text: &str) -> Result<IpNet, String> {
    let quoted = || plug_limit_options::excerpt(text);
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    let block: IpNet = text.parse().map_err(|_| {
        format!(
            "`{}` is not a CIDR block or an IP address (e.g. `10.0.0.0/8`, `::1`)",
            quoted()
        )
    })?;
    if block.trunc() != block {
        return Err(format!(
            "`{}` has host bits set; the block is `{}`",
            quoted(),
            block.trunc()
        ));
    }
    Ok(block)
}

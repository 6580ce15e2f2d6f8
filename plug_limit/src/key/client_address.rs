//! The client's IP address as the app trusts it: what [`Rules`](crate::Rules) match their
//! CIDR lists against.

use std::net::IpAddr;

use http::request::Parts;

use super::KeyError;
use super::client_ip::ClientIp;
use super::peer_ip::{PeerIp, peer};

/// Where the client's IP address comes from, for the CIDR lists of
/// [`Rules`](crate::Rules): [`peer_ip()`](super::peer_ip()) (the default) or
/// [`client_ip(source, proxies)`](super::client_ip()), resolved exactly as those extractors
/// resolve it for keys, so a header a client writes never counts unless a trusted proxy wrote
/// it.
///
/// The address is whole: an IPv6 client is matched by its address, not by the prefix its key
/// uses. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is the IPv4 address it stands for.
///
/// With [`ANY_PEER`](super::ANY_PEER) the header is believed from any peer, and a client
/// that reaches the app directly would write itself onto an allow-list or off a deny-list:
/// name it only where nothing but your proxies can reach the app.
pub(crate) trait ClientAddress: Send + Sync + 'static {
    /// The client's address, or why it has none.
    ///
    /// # Errors
    ///
    /// A [`KeyError`] when the request carries no address this source believes.
    fn client_address(&self, parts: &Parts) -> Result<IpAddr, KeyError>;
}

impl ClientAddress for PeerIp {
    fn client_address(&self, parts: &Parts) -> Result<IpAddr, KeyError> {
        peer(parts)
    }
}

impl ClientAddress for ClientIp {
    fn client_address(&self, parts: &Parts) -> Result<IpAddr, KeyError> {
        self.trusted_address(parts).map(|ip| ip.to_canonical())
    }
}

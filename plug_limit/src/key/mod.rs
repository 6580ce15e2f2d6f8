//! Key extractors: who a request is counted against.
//!
//! A [`KeyExtractor`] reads the request parts and names the client (an IP address, an API key,
//! a user id). [`PlugLimit`](crate::PlugLimit) then namespaces it by prefix, limiter and scope
//! (the matched route by default), so the same client has one budget per limiter and route;
//! the composition is injective, and long keys are stored as their digest (see the
//! [keys guide](crate::guide::keys)).
//!
//! | extractor | counts a request against | key text |
//! |---|---|---|
//! | [`peer_ip()`] (the default) | the TCP peer's address | `192.0.2.1`, `2001:db8:1:2::/64` |
//! | [`client_ip(source, proxies)`](client_ip()) | the address your proxy reports | the same |
//! | [`header(name)`](header()) | a header's value, such as an API key | `k-123` |
//! | [`global()`] | one budget for everyone | `global` |
//! | [`a.or(b)`](KeyExtractor::or), in a constant [`Or::new(a, b)`](Or::new) | `a`'s key, else `b`'s | `1:k-123`, `2:192.0.2.1` |
//! | any `Fn(&Parts) -> Result<K, KeyError>` | your own | yours |
//!
//! # Behind a proxy
//!
//! Behind a reverse proxy or a load balancer, the TCP peer of every request is the proxy, and
//! [`peer_ip()`] would give all clients one budget. [`client_ip()`] reads the address the
//! proxy reports instead, from the [`ClientIpSource`] it writes, and believes it only when the
//! peer is one of the trusted proxies you name; any other peer is keyed
//! by its own address, so a client that reaches the app directly cannot choose its key.
//!
//! ```
//! use std::net::SocketAddr;
//!
//! use axum::extract::ConnectInfo;
//! use plug_limit::key::{ClientIp, ClientIpSource, IpNet};
//! use plug_limit::key::KeyExtractor;
//!
//! let proxies = vec!["10.0.0.0/8".parse::<IpNet>()?];
//! let key = ClientIp::new(ClientIpSource::RightmostXForwardedFor, proxies);
//! let key_of = |peer: [u8; 4]| -> Result<String, Box<dyn std::error::Error>> {
//!     // The client wrote the left entries; the proxy appended the address it saw.
//!     let request = http::Request::builder()
//!         .header("x-forwarded-for", b"\xff not an address, 6.6.6.6, 203.0.113.7".as_slice())
//!         .extension(ConnectInfo(SocketAddr::from((peer, 40000))))
//!         .body(())?;
//!     Ok(key.extract(&request.into_parts().0)?.iter().collect())
//! };
//! assert_eq!(key_of([10, 0, 0, 2])?, "203.0.113.7"); // through the proxy
//! assert_eq!(key_of([192, 0, 2, 9])?, "192.0.2.9"); // straight in: its own address
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The rightmost entry of `X-Forwarded-For` or `Forwarded` is the one the nearest proxy
//! appended; everything to its left came from the client and is never parsed, so bytes the
//! client writes there (not UTF-8, not addresses) cannot fail the extraction. Single-value
//! headers (`X-Real-Ip`, `CF-Connecting-IP`, ...) must appear once: a proxy replaces the
//! client's, and two lines cannot be told apart. A key that cannot be extracted follows the
//! limiter's [`KeyFailure`](crate::KeyFailure) policy: by default the request is counted
//! against its TCP peer's address, in a budget of its own, never let through unlimited.
//!
//! # IPv6 clients are keyed by prefix
//!
//! An IPv4 address is one subscriber (or many behind a NAT); an IPv6 subscriber gets a whole
//! block, and may send each request from a new address of it. [`peer_ip()`] and
//! [`client_ip()`] therefore key an IPv6 client by its /64 (`2001:db8:1:2::/64`): the
//! smallest block a network hands to one subscriber, since addresses are formed inside a
//! /64. Many residential ISPs give each home a /56, and
//! [`.ipv6_prefix(56)`](PeerIp::ipv6_prefix) counts the whole home as one client; `128`
//! keys every address alone. IPv4 is keyed by address, and an IPv4-mapped address
//! (`::ffff:192.0.2.1`, as dual-stack listeners report IPv4 peers) by the IPv4 address it
//! stands for.
//!
//! # Falling back
//!
//! `key::header("x-api-key").or(key::peer_ip())` counts requests with an API key against the
//! key, and the others against their address, in separate key spaces (see [`Or`]).
//!
//! # Your own
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
//! # let _: &dyn plug_limit::key::KeyExtractor = &tenant;
//! ```

mod addr;
mod client_address;
mod client_ip;
mod error;
mod extractor;
mod forwarded;
mod header;
mod peer_ip;
mod single_value;
#[cfg(test)]
mod tests;

pub(crate) use self::client_address::ClientAddress;
pub(crate) use self::client_ip::block;
pub use self::client_ip::{ANY_PEER, ClientIp, ClientIpSource, client_ip};
pub use self::error::KeyError;
pub use self::extractor::{Key, KeyExtractor, Or};
pub(crate) use self::header::{Extracted, Reads, extract, shared};
pub use self::header::{Global, Header, global, header};
pub use self::peer_ip::{PeerIp, peer_ip};
/// The CIDR block type of [`client_ip`]'s trusted proxies, from the `ipnet` crate.
#[doc(no_inline)]
pub use ipnet::IpNet;

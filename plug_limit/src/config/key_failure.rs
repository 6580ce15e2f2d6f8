//! What a request gets when its key cannot be extracted.

use serde::Deserialize;

/// What a request gets when its limit's key cannot be extracted: the header is missing or not
/// visible ASCII, a custom extractor refused it, there is no peer address.
///
/// That is the client's doing, not an outage, so it has a policy of its own, apart from the
/// [`FailurePolicy`](crate::FailurePolicy): a client that withholds its key must not get an
/// unlimited budget by doing so. Key failures are logged at `DEBUG` (target `plug_limit`): they
/// are the client's, and one per request would let clients flood the logs; a missing peer
/// address, the server's, is said once at `WARN`.
///
/// Behind a load balancer the TCP peer is the balancer: under [`PeerIp`](Self::PeerIp) every
/// request without a key shares the balancer's one budget. Fall back on the address the
/// balancer reports instead, `api_key.or(key::client_ip(..))` (see
/// [the keys guide](crate::guide::keys#behind-a-proxy-the-clients-address)).
///
/// # Example
///
/// ```
/// use plug_limit::{key, KeyFailure, PlugLimit, Store};
///
/// // Limit by tenant (set by the authentication in front); requests without one share
/// // their IP address's budget.
/// let limits = PlugLimit::builder(Store::memory())
///     .key(key::header("x-tenant-id"))
///     .on_key_failure(KeyFailure::PeerIp)
///     .build()?;
/// # let _ = limits;
/// # Ok::<(), plug_limit::BuildError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KeyFailure {
    /// Count the request against the TCP peer's IP address (the default), in a budget apart
    /// from every key the extractor returns; without a peer address (the app is not served
    /// with `into_make_service_with_connect_info`), refuse it as [`Reject`](Self::Reject) does.
    #[default]
    PeerIp,
    /// Refuse the request with `400 Bad Request`.
    Reject,
    /// Let the request through unlimited, without headers: only for keys that are optional by
    /// design, since every client can choose this.
    Pass,
}

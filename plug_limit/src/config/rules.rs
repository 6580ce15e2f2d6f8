//! [`Rules`]: the requests a limiter lets through uncounted, and those it refuses outright.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use ipnet::IpNet;

use crate::key::{ClientAddress, ClientIp, block};

/// A predicate over a request's parts: `true` lets the request through uncounted.
pub(crate) type Skip = Arc<dyn Fn(&Parts) -> bool + Send + Sync>;

/// Which requests skip the limit, and which are refused without one: an allow-list (CIDR
/// blocks and a predicate) and a deny-list (CIDR blocks). Set globally with
/// [`Builder::rules`](crate::Builder::rules) and per limiter with
/// [`Limiter::rules`](crate::Limiter::rules).
///
/// For every request, before its key is extracted and before any backend call:
///
/// 1. a client inside a [`deny_cidrs`](Self::deny_cidrs) block is refused with
///    `403 Forbidden` ([`RateLimitRejection::Forbidden`](crate::RateLimitRejection::Forbidden));
///    the deny-list wins over everything below;
/// 2. a request the [`skip`](Self::skip) predicate accepts passes (a route's own exemption is
///    a predicate on its path);
/// 3. a client inside an [`allow_cidrs`](Self::allow_cidrs) block passes;
/// 4. any other request is checked against its limit as usual.
///
/// A request that passes by the rules is neither counted nor given rate-limit headers, and
/// costs no backend call: it passes even under [`FailurePolicy::Closed`](crate::FailurePolicy::Closed)
/// while Redis is down. A refused one costs none either, and shadow mode does not soften it:
/// a deny-list is an access rule, not a rate limit. With limits
/// [disabled](crate::Builder::enabled), the rules are off too. Programmatic checks
/// ([`PlugLimit::check`](crate::PlugLimit::check)) have no request, and no rules.
///
/// # The client's address
///
/// The CIDR lists match the client's address as [`ip_from`](Self::ip_from) resolves it: by
/// default the TCP peer ([`key::peer_ip`](crate::key::peer_ip), from axum's `ConnectInfo`).
/// Behind a reverse proxy, set the same [`key::client_ip`](crate::key::client_ip) with its
/// trusted proxies that keys your requests, so that
/// an `X-Forwarded-For` a client writes itself neither puts it on the allow-list nor takes it
/// off the deny-list. The rules never use the limiter's key extractor, which may key by
/// something else than an address.
///
/// A request whose address cannot be resolved (served without `ConnectInfo`, or a trusted
/// proxy's header missing or malformed) matches no allow-list block, and is refused when a
/// deny-list is set: a deny-list cannot vouch for a client it cannot see.
///
/// # Lists
///
/// A list entry is a CIDR block (`10.0.0.0/8`, `2001:db8::/32`) or a single address
/// (`127.0.0.1`, `::1`). A block with host bits set (`10.0.0.1/8`) is refused, as a likely
/// mistake. IPv4 blocks match IPv4-mapped IPv6 clients (`::ffff:10.0.0.1` is in `10.0.0.0/8`).
/// Entries are checked by [`Builder::build`](crate::Builder::build), which names the first
/// invalid one. Lists are scanned in order, which suits the tens of entries of internal
/// networks and health checkers; for thousands of blocks, filter upstream (a firewall).
///
/// # Per limiter
///
/// A limiter's rules override the global rules part by part: a list, the predicate or the
/// address source set on the limiter replaces the global one; those it leaves unset are the
/// global ones. `Rules::new().allow_cidrs::<[&str; 0]>([])` on a limiter counts everyone the
/// global allow-list lets through.
///
/// # Example
///
/// ```
/// use plug_limit::key::{ClientIp, ClientIpSource, IpNet};
/// use plug_limit::{PlugLimit, Rules, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let proxies = vec!["10.1.0.0/16".parse::<IpNet>()?];
/// let behind_lb = ClientIp::new(ClientIpSource::RightmostXForwardedFor, proxies);
/// let limits = PlugLimit::builder(Store::memory())
///     .key(behind_lb)
///     .rules(
///         Rules::new()
///             .ip_from(behind_lb)
///             .allow_cidrs(["10.0.0.0/8", "127.0.0.1"])
///             .deny_cidrs(["203.0.113.0/24"])
///             .skip(|parts| parts.uri.path() == "/health"),
///     )
///     .build()?;
/// # let _ = limits;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct Rules {
    pub(crate) allow: Option<Cidrs>,
    pub(crate) deny: Option<Cidrs>,
    pub(crate) skip: Option<Skip>,
    pub(crate) ip: Option<Arc<dyn ClientAddress>>,
}

/// A CIDR list as parsed when it was set: the blocks, or the first entry refused and why.
#[derive(Debug, Clone)]
pub(crate) enum Cidrs {
    Valid(Arc<[IpNet]>),
    Invalid { index: usize, rule: String },
}

impl Rules {
    /// No rules: every request is checked against its limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Clients inside these blocks are let through uncounted, without headers.
    pub fn allow_cidrs<I>(mut self, cidrs: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.allow = Some(Cidrs::parse(cidrs));
        self
    }

    /// Clients inside these blocks are refused with `403 Forbidden`, without a backend call.
    pub fn deny_cidrs<I>(mut self, cidrs: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.deny = Some(Cidrs::parse(cidrs));
        self
    }

    /// These rules with the lists a configuration file sets replacing their own; the
    /// predicate and the address source, which only code sets, stay.
    pub(crate) fn with_lists(
        mut self,
        allow: Option<Vec<String>>,
        deny: Option<Vec<String>>,
    ) -> Self {
        if let Some(allow) = allow {
            self = self.allow_cidrs(allow);
        }
        if let Some(deny) = deny {
            self = self.deny_cidrs(deny);
        }
        self
    }

    /// Requests for which `predicate` is `true` are let through uncounted, without headers:
    /// health checks, metrics scrapes. It runs on every request of the limiters it applies to,
    /// before the key is extracted: keep it cheap. A second `skip` adds to the first: a
    /// request either accepts is let through (`.skip(health).skip(metrics)`).
    pub fn skip<F>(mut self, predicate: F) -> Self
    where
        F: Fn(&Parts) -> bool + Send + Sync + 'static,
    {
        self.skip = Some(match self.skip.take() {
            None => Arc::new(predicate),
            Some(earlier) => Arc::new(move |parts: &Parts| earlier(parts) || predicate(parts)),
        });
        self
    }

    /// Where the client's address comes from: the address `source` believes, the header of a
    /// trusted proxy or the peer's (default: the TCP peer, as
    /// [`key::peer_ip()`](crate::key::peer_ip)); see
    /// [the client's address](Self#the-clients-address). The address is whole (an IPv6 client
    /// is matched by its address, not the prefix its key uses), and an IPv4-mapped address is
    /// the IPv4 address it stands for.
    pub fn ip_from(mut self, source: ClientIp) -> Self {
        self.ip = Some(Arc::new(source));
        self
    }

    /// These rules, with the parts they leave unset taken from `earlier`, consumed.
    pub(crate) fn replacing(self, earlier: Self) -> Self {
        Self {
            allow: self.allow.or(earlier.allow),
            deny: self.deny.or(earlier.deny),
            skip: self.skip.or(earlier.skip),
            ip: self.ip.or(earlier.ip),
        }
    }

    /// These rules, with the parts they leave unset taken from `global`.
    pub(crate) fn over(&self, global: &Self) -> Self {
        Self {
            allow: self.allow.clone().or_else(|| global.allow.clone()),
            deny: self.deny.clone().or_else(|| global.deny.clone()),
            skip: self.skip.clone().or_else(|| global.skip.clone()),
            ip: self.ip.clone().or_else(|| global.ip.clone()),
        }
    }

    /// The first invalid list entry: the field (`allow_cidrs[2]`) and the rule it breaks.
    pub(crate) fn invalid(&self) -> Option<(String, String)> {
        [("allow_cidrs", &self.allow), ("deny_cidrs", &self.deny)]
            .into_iter()
            .find_map(|(list, cidrs)| match cidrs {
                Some(Cidrs::Invalid { index, rule }) => {
                    Some((format!("{list}[{index}]"), rule.clone()))
                }
                _ => None,
            })
    }
}

impl Cidrs {
    fn parse<I>(cidrs: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut blocks = Vec::new();
        for (index, text) in cidrs.into_iter().enumerate() {
            match block(text.as_ref()) {
                Ok(block) => blocks.push(block),
                Err(rule) => return Self::Invalid { index, rule },
            }
        }
        Self::Valid(blocks.into())
    }

    /// The blocks; none for an invalid list, which `build` refuses before any request.
    pub(crate) fn blocks(&self) -> &[IpNet] {
        match self {
            Self::Valid(blocks) => blocks,
            Self::Invalid { .. } => &[],
        }
    }
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rules")
            .field("allow_cidrs", &self.allow)
            .field("deny_cidrs", &self.deny)
            .field("skip", &self.skip.is_some())
            .field("own_ip_source", &self.ip.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(rules: &Rules) -> Option<(String, String)> {
        rules.invalid()
    }

    #[test]
    fn entries_are_blocks_or_addresses() {
        let rules = Rules::new().allow_cidrs(["10.0.0.0/8", "127.0.0.1", "::1", "2001:db8::/32"]);
        assert_eq!(invalid(&rules), None);
        let Some(Cidrs::Valid(blocks)) = &rules.allow else {
            panic!("valid list");
        };
        let shown: Vec<String> = blocks.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["10.0.0.0/8", "127.0.0.1/32", "::1/128", "2001:db8::/32"]
        );
    }

    #[test]
    fn the_first_invalid_entry_is_named() {
        let rules =
            Rules::new()
                .allow_cidrs(["10.0.0.0/8"])
                .deny_cidrs(["::1", "10.0.0.0/33", "nope"]);
        assert_eq!(
            invalid(&rules),
            Some((
                "deny_cidrs[1]".to_owned(),
                "`10.0.0.0/33` is not a CIDR block or an IP address (e.g. `10.0.0.0/8`, `::1`)"
                    .to_owned()
            ))
        );
        let rules = Rules::new().allow_cidrs(["192.168.1.1/16"]);
        assert_eq!(
            invalid(&rules),
            Some((
                "allow_cidrs[0]".to_owned(),
                "`192.168.1.1/16` has host bits set; the block is `192.168.0.0/16`".to_owned()
            ))
        );
    }

    #[test]
    fn a_limiter_overrides_part_by_part() {
        let global = Rules::new()
            .allow_cidrs(["10.0.0.0/8"])
            .deny_cidrs(["192.0.2.0/24"]);
        let own = Rules::new().allow_cidrs::<[&str; 0]>([]).skip(|_| true);
        let merged = own.over(&global);
        assert_eq!(merged.allow.as_ref().map(|c| c.blocks().len()), Some(0));
        assert_eq!(merged.deny.as_ref().map(|c| c.blocks().len()), Some(1));
        assert!(merged.skip.is_some());
        assert!(merged.ip.is_none());
    }

    /// A second `skip` adds to the first, where it replaced it: each exempts its own
    /// requests, and no other.
    #[test]
    fn skips_compose() {
        let rules = Rules::new()
            .skip(|parts| parts.uri.path() == "/health")
            .skip(|parts| parts.uri.path() == "/metrics");
        let skip = rules.skip.expect("a skip");
        let skips = |path: &str| {
            let (parts, ()) = http::Request::get(path).body(()).unwrap().into_parts();
            skip(&parts)
        };
        assert_eq!(
            [skips("/health"), skips("/metrics"), skips("/api")],
            [true, true, false]
        );
    }
}

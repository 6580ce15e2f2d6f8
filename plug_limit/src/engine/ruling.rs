//! A limiter's [`Rules`] as the hot path reads them, and their ruling on one request.

use std::net::IpAddr;
use std::sync::Arc;

use http::request::Parts;
use ipnet::IpNet;

use crate::config::{Cidrs, Rules, Skip};
use crate::key::{self, ClientAddress};

/// A limiter's resolved rules; a limiter without any has none (`Entry::rules` is `None`), so
/// its requests pay one `is_none` check.
pub(crate) struct RuleSet {
    deny: Arc<[IpNet]>,
    allow: Arc<[IpNet]>,
    skip: Option<Skip>,
    ip: Arc<dyn ClientAddress>,
}

/// What the rules make of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ruling {
    /// Check it against its limit.
    Check,
    /// Let it through uncounted, without headers.
    Pass,
    /// Refuse it: its client is on the deny-list, or has no address while a deny-list is set.
    Forbid,
}

impl RuleSet {
    /// The rules of a limiter: its own over the global ones; `None` when nothing would ever
    /// skip or refuse a request. Lists were validated by `build`.
    pub(crate) fn merged(own: Option<&Rules>, global: &Rules) -> Option<Arc<Self>> {
        let rules = match own {
            Some(own) => own.over(global),
            None => global.clone(),
        };
        let list = |cidrs: Option<Cidrs>| -> Arc<[IpNet]> {
            cidrs.map_or_else(
                || Arc::from([]),
                |cidrs| {
                    cidrs
                        .blocks()
                        .iter()
                        .map(|block| canonical(*block))
                        .collect()
                },
            )
        };
        let set = Self {
            deny: list(rules.deny),
            allow: list(rules.allow),
            skip: rules.skip,
            ip: rules.ip.unwrap_or_else(|| Arc::new(key::peer_ip())),
        };
        let inert = set.deny.is_empty() && set.allow.is_empty() && set.skip.is_none();
        (!inert).then(|| Arc::new(set))
    }

    /// The ruling on a request.
    pub(crate) fn judge(&self, parts: &Parts) -> Ruling {
        // Resolved once, and only when a list needs it.
        let ip = (!self.deny.is_empty() || !self.allow.is_empty())
            .then(|| self.ip.client_address(parts));
        if let Some(Ok(ip)) = &ip
            && contains(&self.deny, *ip)
        {
            tracing::debug!(target: "plug_limit", "request refused by the deny-list");
            return Ruling::Forbid;
        }
        // A skip (a proxy's own health check, say) passes even without a client address.
        if self.skip.as_ref().is_some_and(|skip| skip(parts)) {
            return Ruling::Pass;
        }
        if !self.deny.is_empty()
            && let Some(Err(error)) = &ip
        {
            tracing::debug!(target: "plug_limit", %error, "request refused: no client address to check against the deny-list");
            return Ruling::Forbid;
        }
        if let Some(Ok(ip)) = ip
            && contains(&self.allow, ip)
        {
            return Ruling::Pass;
        }
        Ruling::Check
    }
}

/// Whether `ip` is in one of `blocks` (made [`canonical`]): an IPv4-mapped client as the IPv4
/// address it stands for.
fn contains(blocks: &[IpNet], ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    blocks.iter().any(|block| block.contains(&ip))
}

/// A block inside `::ffff:0:0/96` as the IPv4 block it stands for (`::ffff:10.0.0.0/104` is
/// `10.0.0.0/8`); any other block as it is. So an IPv4 client matches the IPv4 blocks and the
/// mapped ones, and never an IPv6 block that merely spans the mapped range (`::/0`).
fn canonical(block: IpNet) -> IpNet {
    if let IpNet::V6(v6) = block
        && v6.prefix_len() >= 96
        && let Some(v4) = v6.network().to_ipv4_mapped()
        && let Ok(net) = ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96)
    {
        return IpNet::V4(net);
    }
    block
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::extract::ConnectInfo;

    use super::*;
    use crate::key::{ClientIpSource, client_ip};

    fn parts(peer: Option<&str>, xff: Option<&str>) -> Parts {
        let mut request = http::Request::builder();
        if let Some(xff) = xff {
            request = request.header("x-forwarded-for", xff);
        }
        if let Some(peer) = peer {
            let ip: IpAddr = peer.parse().unwrap();
            request = request.extension(ConnectInfo(SocketAddr::new(ip, 4000)));
        }
        request.body(()).unwrap().into_parts().0
    }

    fn ruling(rules: &Rules, peer: Option<&str>) -> Ruling {
        let set = RuleSet::merged(None, rules).expect("rules");
        set.judge(&parts(peer, None))
    }

    #[test]
    fn no_rules_resolve_to_none() {
        assert!(RuleSet::merged(None, &Rules::new()).is_none());
        let empty = Rules::new()
            .allow_cidrs::<[&str; 0]>([])
            .ip_from(client_ip(ClientIpSource::ConnectInfo, &[]));
        assert!(RuleSet::merged(None, &empty).is_none());
    }

    #[test]
    fn deny_wins_over_allow_and_skip() {
        let rules = Rules::new()
            .allow_cidrs(["10.0.0.0/8"])
            .deny_cidrs(["10.6.6.0/24"])
            .skip(|parts| parts.uri.path() == "/health");
        let set = RuleSet::merged(None, &rules).unwrap();
        assert_eq!(set.judge(&parts(Some("10.6.6.6"), None)), Ruling::Forbid);
        let health = |peer| {
            let mut parts = parts(Some(peer), None);
            parts.uri = "/health".parse().unwrap();
            parts
        };
        assert_eq!(set.judge(&health("10.6.6.6")), Ruling::Forbid);
        assert_eq!(set.judge(&parts(Some("10.1.1.1"), None)), Ruling::Pass);
        assert_eq!(set.judge(&parts(Some("192.0.2.1"), None)), Ruling::Check);
        assert_eq!(set.judge(&health("192.0.2.1")), Ruling::Pass);
    }

    #[test]
    fn cidr_edges() {
        let rules = Rules::new().allow_cidrs(["10.0.0.0/8", "2001:db8::/126"]);
        for (peer, expected) in [
            ("10.0.0.0", Ruling::Pass),
            ("10.255.255.255", Ruling::Pass),
            ("11.0.0.0", Ruling::Check),
            ("9.255.255.255", Ruling::Check),
            ("::ffff:10.0.0.1", Ruling::Pass),
            ("::ffff:11.0.0.1", Ruling::Check),
            ("2001:db8::3", Ruling::Pass),
            ("2001:db8::4", Ruling::Check),
        ] {
            assert_eq!(ruling(&rules, Some(peer)), expected, "{peer}");
        }
        // A list naming the mapped form matches the IPv4 client too.
        let mapped = Rules::new().deny_cidrs(["::ffff:10.0.0.0/104"]);
        assert_eq!(ruling(&mapped, Some("10.0.0.1")), Ruling::Forbid);
        assert_eq!(ruling(&mapped, Some("11.0.0.1")), Ruling::Check);
        let everyone = Rules::new().deny_cidrs(["0.0.0.0/0"]);
        assert_eq!(ruling(&everyone, Some("203.0.113.9")), Ruling::Forbid);
        assert_eq!(ruling(&everyone, Some("2001:db8::1")), Ruling::Check);
    }

    #[test]
    fn ipv6_blocks_spanning_the_mapped_range_do_not_catch_ipv4_clients() {
        let no_v6 = Rules::new().deny_cidrs(["::/0"]);
        assert_eq!(ruling(&no_v6, Some("2001:db8::1")), Ruling::Forbid);
        assert_eq!(ruling(&no_v6, Some("203.0.113.9")), Ruling::Check);
        let allow_v6 = Rules::new().allow_cidrs(["::/64"]);
        assert_eq!(ruling(&allow_v6, Some("203.0.113.9")), Ruling::Check);
        // A block inside the mapped range is the IPv4 block it stands for.
        let mapped = Rules::new().deny_cidrs(["::ffff:10.0.0.0/104"]);
        assert_eq!(ruling(&mapped, Some("10.9.9.9")), Ruling::Forbid);
        assert_eq!(ruling(&mapped, Some("11.0.0.1")), Ruling::Check);
    }

    /// A trusted proxy's own health check carries no forwarding header: a skip still passes
    /// it under a deny-list.
    #[test]
    fn a_skipped_request_without_a_client_address_passes_a_deny_list() {
        let proxies: &[IpNet] = vec!["10.1.0.0/16".parse().unwrap()].leak();
        let rules = Rules::new()
            .ip_from(client_ip(ClientIpSource::RightmostXForwardedFor, proxies))
            .deny_cidrs(["203.0.113.0/24"])
            .skip(|parts| parts.uri.path() == "/health");
        let set = RuleSet::merged(None, &rules).unwrap();
        let mut health = parts(Some("10.1.0.5"), None);
        health.uri = "/health".parse().unwrap();
        assert_eq!(set.judge(&health), Ruling::Pass);
        health.uri = "/items".parse().unwrap();
        assert_eq!(set.judge(&health), Ruling::Forbid);
    }

    #[test]
    fn no_address_matches_no_allow_list_and_is_refused_by_a_deny_list() {
        let allow = Rules::new().allow_cidrs(["0.0.0.0/0", "::/0"]);
        assert_eq!(ruling(&allow, None), Ruling::Check);
        let deny = Rules::new().deny_cidrs(["192.0.2.0/24"]);
        assert_eq!(ruling(&deny, None), Ruling::Forbid);
    }

    #[test]
    fn a_forged_header_counts_only_from_a_trusted_proxy() {
        let proxies: &[IpNet] = vec!["10.9.0.0/16".parse().unwrap()].leak();
        let rules = Rules::new()
            .ip_from(client_ip(ClientIpSource::RightmostXForwardedFor, proxies))
            .allow_cidrs(["10.0.0.0/8"])
            .deny_cidrs(["198.51.100.0/24"]);
        let set = RuleSet::merged(None, &rules).unwrap();
        let judge = |peer, xff| set.judge(&parts(Some(peer), Some(xff)));
        // Straight in, claiming an internal address: its own address decides.
        assert_eq!(judge("203.0.113.5", "10.0.0.1"), Ruling::Check);
        // Straight in from a denied address, claiming another: still denied.
        assert_eq!(judge("198.51.100.7", "203.0.113.5"), Ruling::Forbid);
        // Through the proxy: the address it appended decides, not the client's entries.
        assert_eq!(judge("10.9.0.1", "10.0.0.1, 198.51.100.7"), Ruling::Forbid);
        assert_eq!(judge("10.9.0.1", "198.51.100.7, 10.0.0.1"), Ruling::Pass);
        // Through the proxy without a usable header: no address, refused by the deny-list.
        assert_eq!(judge("10.9.0.1", "not an address"), Ruling::Forbid);
    }
}

//! Trusted proxies: the header from them, the peer's own address from anyone else.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

const PROXIES: &[IpNet] = &[
    IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8),
    IpNet::new_assert(
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 0)),
        48,
    ),
];

const BEHIND: ClientIp = client_ip(ClientIpSource::RightmostXForwardedFor, PROXIES);

/// A list read at run time, as a user makes one `'static`.
fn list(nets: &[&str]) -> &'static [IpNet] {
    nets.iter()
        .map(|net| net.parse().unwrap())
        .collect::<Vec<IpNet>>()
        .leak()
}

fn forwarded_by(peer: &str) -> Parts {
    let headers = parts(&[("x-forwarded-for", b"\xff, 6.6.6.6, 203.0.113.7".as_slice())]);
    from_peer(peer, headers)
}

#[test]
fn a_trusted_peer_is_believed() {
    for peer in [
        "10.1.2.3:4000",
        "[2001:db8:ffff::5]:4000",
        "[::ffff:10.1.2.3]:4000",
    ] {
        assert_eq!(
            key_text(&BEHIND, &forwarded_by(peer)),
            ok("203.0.113.7"),
            "{peer}"
        );
    }
}

#[test]
fn any_other_peer_is_keyed_by_its_own_address() {
    assert_eq!(
        key_text(&BEHIND, &forwarded_by("192.0.2.9:4000")),
        ok("192.0.2.9")
    );
    let v6 = forwarded_by("[2001:db8:1:2::9]:4000");
    assert_eq!(key_text(&BEHIND, &v6), ok("2001:db8:1:2::/64"));
    let untrusted = forwarded_by("[2001:db8:fffe::1]:4000");
    assert_eq!(key_text(&BEHIND, &untrusted), ok("2001:db8:fffe::/64"));
}

#[test]
fn a_list_needs_the_peer_address() {
    let headers = parts(&[("x-forwarded-for", "203.0.113.7")]);
    assert_eq!(key_text(&BEHIND, &headers), err(NO_PEER));
    // Trusting every peer, the header is believed as it stands, with no peer or from any.
    let any_peer = client_ip(ClientIpSource::RightmostXForwardedFor, ANY_PEER);
    assert_eq!(key_text(&any_peer, &headers), ok("203.0.113.7"));
    assert_eq!(
        key_text(&any_peer, &from_peer("192.0.2.9:1", headers)),
        ok("203.0.113.7")
    );
}

#[test]
fn a_trusted_peer_without_the_header_is_an_error() {
    let no_header = from_peer("10.0.0.1:4000", parts::<&str>(&[]));
    assert_eq!(
        key_text(&BEHIND, &no_header),
        err("missing header `x-forwarded-for`")
    );
}

#[test]
fn lists_built_at_run_time() {
    let from_vec = client_ip(ClientIpSource::XRealIp, list(&["10.0.0.0/8"])).ipv6_prefix(56);
    let real_ip = |peer: &str| from_peer(peer, parts(&[("x-real-ip", "2001:db8:1:2ff::1")]));
    assert_eq!(
        key_text(&from_vec, &real_ip("10.9.9.9:1")),
        ok("2001:db8:1:200::/56")
    );
    let from_array = client_ip(ClientIpSource::XRealIp, list(&["::ffff:10.0.0.0/104"]));
    assert_eq!(
        key_text(&from_array, &real_ip("10.9.9.9:1")),
        ok("2001:db8:1:2ff::/64")
    );
    assert_eq!(
        key_text(&from_array, &real_ip("11.0.0.1:1")),
        ok("11.0.0.1")
    );
    let no_one = client_ip(ClientIpSource::XRealIp, &[]);
    assert_eq!(key_text(&no_one, &real_ip("10.9.9.9:1")), ok("10.9.9.9"));
}

#[test]
fn connect_info_with_a_list_is_always_the_peer() {
    let key = client_ip(ClientIpSource::ConnectInfo, PROXIES);
    assert_eq!(key_text(&key, &forwarded_by("10.0.0.1:1")), ok("10.0.0.1"));
}

#[test]
fn an_ipv6_block_spanning_the_mapped_range_trusts_no_ipv4_peer() {
    let key = client_ip(ClientIpSource::RightmostXForwardedFor, list(&["::/0"]));
    assert_eq!(
        key_text(&key, &forwarded_by("192.0.2.9:4000")),
        ok("192.0.2.9")
    );
    assert_eq!(
        key_text(&key, &forwarded_by("[2001:db8::1]:4000")),
        ok("203.0.113.7")
    );
    let key = client_ip(
        ClientIpSource::RightmostXForwardedFor,
        list(&["::ffff:192.0.2.0/120"]),
    );
    assert_eq!(
        key_text(&key, &forwarded_by("192.0.2.9:4000")),
        ok("203.0.113.7")
    );
}

#[test]
fn every_peer_is_trusted_only_by_both_zero_blocks() {
    let from = "192.0.2.9:4000";
    let every_v4 = client_ip(ClientIpSource::RightmostXForwardedFor, list(&["0.0.0.0/0"]));
    assert_eq!(key_text(&every_v4, &forwarded_by(from)), ok("203.0.113.7"));
    let v6 = "[2001:db8::1]:4000";
    assert_eq!(key_text(&every_v4, &forwarded_by(v6)), ok("2001:db8::/64"));
    // Only both blocks together believe a request with no peer address.
    let headers = parts(&[("x-forwarded-for", "203.0.113.7")]);
    assert_eq!(key_text(&every_v4, &headers), err(NO_PEER));
    let both = client_ip(
        ClientIpSource::RightmostXForwardedFor,
        list(&["::/0", "0.0.0.0/0"]),
    );
    let headers = parts(&[("x-forwarded-for", "203.0.113.7")]);
    assert_eq!(key_text(&both, &headers), ok("203.0.113.7"));
}

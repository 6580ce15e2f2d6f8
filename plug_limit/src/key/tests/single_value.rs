//! Single-value headers: one line, one address.

use super::*;

const SINGLE: [(ClientIpSource, &str); 5] = [
    (ClientIpSource::XRealIp, "x-real-ip"),
    (ClientIpSource::CfConnectingIp, "cf-connecting-ip"),
    (ClientIpSource::TrueClientIp, "true-client-ip"),
    (ClientIpSource::FlyClientIp, "fly-client-ip"),
    (
        ClientIpSource::XEnvoyExternalAddress,
        "x-envoy-external-address",
    ),
];

#[test]
fn one_address_whitespace_trimmed() {
    for (source, name) in SINGLE {
        let key = |value: &str| key_text(&client_ip(source, ANY_PEER), &parts(&[(name, value)]));
        assert_eq!(key(" 203.0.113.7\t"), ok("203.0.113.7"), "{name}");
        assert_eq!(key("2001:db8::1"), ok("2001:db8::/64"), "{name}");
        assert_eq!(key("::ffff:192.0.2.1"), ok("192.0.2.1"), "{name}");
    }
}

#[test]
fn anything_but_one_address_is_an_error() {
    for (source, name) in SINGLE {
        let key = client_ip(source, ANY_PEER);
        let not_an_ip = err(&format!("header `{name}` is not an IP address"));
        for value in [
            "",
            "1.2.3.4:80",
            "[::1]",
            "1.2.3.4, 5.6.7.8",
            "unknown",
            "é",
        ] {
            let got = key_text(&key, &parts(&[(name, value)]));
            assert_eq!(got, not_an_ip, "{name}: {value:?}");
        }
        let bytes = key_text(&key, &parts(&[(name, b"\xff1.2.3.4".as_slice())]));
        assert_eq!(bytes, not_an_ip);
        let twice = parts(&[(name, "203.0.113.7"), (name, "6.6.6.6")]);
        assert_eq!(
            key_text(&key, &twice),
            err(&format!(
                "header `{name}` appears more than once: the proxy must replace it, not add to it"
            ))
        );
        let missing = key_text(&key, &parts::<&str>(&[]));
        assert_eq!(missing, err(&format!("missing header `{name}`")));
    }
}

#[test]
fn cloudfront_viewer_address_is_ip_and_port() {
    let name = "cloudfront-viewer-address";
    let key = client_ip(ClientIpSource::CloudFrontViewerAddress, ANY_PEER);
    let key_of = |value: &[u8]| key_text(&key, &parts(&[(name, value)]));
    assert_eq!(key_of(b"198.51.100.10:46532"), ok("198.51.100.10"));
    assert_eq!(key_of(b" 2001:db8:1:2::1:46532 "), ok("2001:db8:1:2::/64"));
    assert_eq!(key_of(b"[2001:db8::1]:443"), ok("2001:db8::/64"));
    assert_eq!(key_of(b"::ffff:192.0.2.1:443"), ok("192.0.2.1"));
    let not_ip_port = err("header `cloudfront-viewer-address` is not an `ip:port` address");
    for value in [
        b"198.51.100.10".as_slice(),
        b"2001:db8::1",
        b"[2001:db8::1]",
        b"198.51.100.10:",
        b"198.51.100.10:65536",
        b"\xff:80",
    ] {
        assert_eq!(key_of(value), not_ip_port, "{value:?}");
    }
    let twice = parts(&[(name, "198.51.100.10:1"), (name, "6.6.6.6:1")]);
    assert_eq!(
        key_text(&key, &twice),
        err(
            "header `cloudfront-viewer-address` appears more than once: the proxy must replace it, not add to it"
        )
    );
}

#[test]
fn connect_info_is_the_peer() {
    let key = client_ip(ClientIpSource::ConnectInfo, ANY_PEER);
    let with_header = parts(&[("x-forwarded-for", "6.6.6.6")]);
    assert_eq!(key_text(&key, &with_header), err(NO_PEER));
    let peer = from_peer("[2001:db8::7]:4000", with_header);
    assert_eq!(key_text(&key, &peer), ok("2001:db8::/64"));
}

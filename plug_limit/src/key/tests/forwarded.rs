//! `Forwarded` (RFC 7239): the `for=` of the last element, and nothing left of it.

use super::*;

const FORWARDED: ClientIp = client_ip(ClientIpSource::RightmostForwarded, ANY_PEER);
const NOT_AN_IP: &str = "the rightmost entry of `forwarded` is not an IP address";
const MALFORMED: &str = "the last element of `forwarded` is malformed";

fn fwd<V: AsRef<[u8]>>(header_lines: &[V]) -> Result<String, String> {
    key_text(&FORWARDED, &lines("forwarded", header_lines))
}

#[test]
fn the_for_of_the_last_element_is_the_client() {
    let cases = [
        ("for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60"),
        (
            "for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\"",
            "2001:db8:cafe::/64",
        ),
        ("for=6.6.6.6,for=203.0.113.7", "203.0.113.7"),
        ("For=1.2.3.4:80", "1.2.3.4"),
        ("FOR=\"1.2.3.4:80\"", "1.2.3.4"),
        ("for=\"192.0.2.1:_p0rt\"", "192.0.2.1"),
        ("for=\"[2001:db8::1]\"", "2001:db8::/64"),
        ("for=\"[::ffff:192.0.2.1]:80\"", "192.0.2.1"),
        ("proto=https; for=192.0.2.1 ;by=_proxy", "192.0.2.1"),
        ("for=1.2.3.4;;proto=http", "1.2.3.4"),
        ("for=\"1.2.3.\\4\"", "1.2.3.4"),
        // A comma and an escaped quote inside the last element's own quoted string.
        (
            "for=6.6.6.6, for=203.0.113.7;by=\"x,y\\\"z\"",
            "203.0.113.7",
        ),
        ("for=203.0.113.7;by=\"\\\\\"", "203.0.113.7"),
    ];
    for (line, key) in cases {
        assert_eq!(fwd(&[line]), ok(key), "{line}");
    }
}

#[test]
fn bytes_the_client_wrote_left_of_the_last_element_are_never_parsed() {
    let client_parts: [&[u8]; 6] = [
        b"for=\"\xff unclosed",
        b"for=\xff\xfe",
        "for=é;;;\"\"\"".as_bytes(),
        b"for=\"a\\\", for=6.6.6.6",
        b"=;=;\\",
        b"",
    ];
    for client in client_parts {
        let line = [client, b", for=203.0.113.7"].concat();
        assert_eq!(fwd(&[line]), ok("203.0.113.7"), "{client:?}");
    }
    let lines = ["for=\"unclosed, by=x", "for=203.0.113.7;proto=https"];
    assert_eq!(fwd(&lines), ok("203.0.113.7"));
}

#[test]
fn unknown_and_obfuscated_clients_are_errors() {
    let unknown = err("the last element of `forwarded` says `for=unknown`");
    assert_eq!(fwd(&["for=unknown"]), unknown);
    assert_eq!(fwd(&["for=203.0.113.7, for=\"UNKNOWN\""]), unknown);
    let obfuscated = err("the last element of `forwarded` has an obfuscated `for=` identifier");
    assert_eq!(fwd(&["for=_hidden"]), obfuscated);
    assert_eq!(
        fwd(&["for=203.0.113.7, for=\"_SEVKISEK:_port\""]),
        obfuscated
    );
    let long = format!("for=\"_{}\"", "a".repeat(100));
    assert_eq!(fwd(&[long]), obfuscated);
}

#[test]
fn the_last_element_must_have_one_valid_for() {
    // The client's element to the left is never a fallback.
    let without_for = err("the last element of `forwarded` has no `for=`");
    assert_eq!(fwd(&["for=203.0.113.7, by=10.0.0.1"]), without_for);
    assert_eq!(fwd(&[""]), without_for);
    for line in [
        "for=\"1.2.3.4",
        "for=1.2.3.4;for=5.6.7.8",
        "for=1.2.3.4;secure",
        "for=1.2.3.4 x",
        "=1.2.3.4",
        "f@r=1.2.3.4",
    ] {
        assert_eq!(fwd(&[line]), err(MALFORMED), "{line}");
    }
    for line in [
        "for=\"2001:db8::1\"",
        "for=\"[2001:db8::1]:99999\"",
        "for=\"1.2.3.4:_\"",
        "for=203.0.113.7:",
        "for=",
        "for=\"\"",
    ] {
        assert_eq!(fwd(&[line]), err(NOT_AN_IP), "{line}");
    }
    let long = format!("for=\"{}\"", "1".repeat(80));
    assert_eq!(fwd(&[long]), err(NOT_AN_IP));
    assert_eq!(fwd(&[b"for=\xff".as_slice()]), err(NOT_AN_IP));
    assert_eq!(fwd::<&str>(&[]), err("missing header `forwarded`"));
}

//! `X-Forwarded-For`: the rightmost entry, and nothing left of it.

use super::*;

const XFF: ClientIp = client_ip(ClientIpSource::RightmostXForwardedFor, ANY_PEER);
const NOT_AN_IP: &str = "the rightmost entry of `x-forwarded-for` is not an IP address";

fn xff<V: AsRef<[u8]>>(header_lines: &[V]) -> Result<String, String> {
    key_text(&XFF, &lines("x-forwarded-for", header_lines))
}

#[test]
fn the_rightmost_entry_is_the_client() {
    assert_eq!(xff(&["6.6.6.6, 10.0.0.7"]), ok("10.0.0.7"));
    assert_eq!(xff(&["6.6.6.6,10.0.0.7"]), ok("10.0.0.7"));
    assert_eq!(xff(&["203.0.113.7"]), ok("203.0.113.7"));
    assert_eq!(xff(&[" \t203.0.113.7 \t"]), ok("203.0.113.7"));
    assert_eq!(xff(&["2001:db8:0:5::1"]), ok("2001:db8:0:5::/64"));
    assert_eq!(xff(&["::ffff:192.0.2.1"]), ok("192.0.2.1"));
}

#[test]
fn entries_may_carry_ports_and_brackets() {
    assert_eq!(xff(&["1.2.3.4:5678"]), ok("1.2.3.4"));
    assert_eq!(xff(&["6.6.6.6, 1.2.3.4:5678"]), ok("1.2.3.4"));
    assert_eq!(xff(&["[::1]:80"]), ok("::/64"));
    assert_eq!(xff(&["[2001:db8::1]"]), ok("2001:db8::/64"));
    assert_eq!(xff(&["[2001:db8::1]:443"]), ok("2001:db8::/64"));
    assert_eq!(xff(&["[::ffff:192.0.2.1]:443"]), ok("192.0.2.1"));
}

#[test]
fn bytes_the_client_wrote_left_of_the_rightmost_entry_are_never_parsed() {
    let client_parts: [&[u8]; 6] = [
        b"\xff\xfe\xfd",
        "é".as_bytes(),
        b"\x80garbage",
        b"garbage \"unclosed, [[[, ,,, ;=\\",
        b"",
        b"6.6.6.6:99999",
    ];
    for client in client_parts {
        let line = [client, b", 203.0.113.7"].concat();
        assert_eq!(xff(&[line]), ok("203.0.113.7"), "{client:?}");
    }
}

#[test]
fn header_lines_are_one_list_and_the_last_line_ends_it() {
    assert_eq!(xff(&["6.6.6.6", "7.7.7.7, 203.0.113.7"]), ok("203.0.113.7"));
    let garbage_first = [b"\xff garbage".as_slice(), b"203.0.113.7".as_slice()];
    assert_eq!(xff(&garbage_first), ok("203.0.113.7"));
    assert_eq!(xff(&["203.0.113.7", "6.6.6.6"]), ok("6.6.6.6"));
    let garbage_last = [b"203.0.113.7".as_slice(), b"\xff".as_slice()];
    assert_eq!(xff(&garbage_last), err(NOT_AN_IP));
}

#[test]
fn a_malformed_rightmost_entry_is_an_error() {
    let malformed = [
        "203.0.113.7,",
        "203.0.113.7, ",
        "",
        "   ",
        "1.2.3.4:99999",
        "1.2.3.4:",
        "1.2.3.4:+80",
        "1.2.3.4:80:80",
        "unknown",
        "203.0.113.7 6.6.6.6",
        "[::1",
        "[1.2.3.4]",
        "01.2.3.4",
        "é",
    ];
    for line in malformed {
        assert_eq!(xff(&[line]), err(NOT_AN_IP), "{line:?}");
    }
    assert_eq!(xff(&[b"203.0.113.7, \xff".as_slice()]), err(NOT_AN_IP));
    assert_eq!(xff::<&str>(&[]), err("missing header `x-forwarded-for`"));
}

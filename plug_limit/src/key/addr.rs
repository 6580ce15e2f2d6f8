//! Addresses as proxies write them, parsed from header bytes: an IP, maybe with a port.
//!
//! Everything here reads `&[u8]`, never a whole header line as `&str`: a line can hold bytes
//! the client wrote, and only the entry being parsed has to be text.

use std::net::{IpAddr, Ipv6Addr};

/// An address split from its port: `192.0.2.1:4711`, `[2001:db8::1]:4711`, or without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Node<'a> {
    pub(super) ip: IpAddr,
    /// The text after the address's `:`, not checked yet: the headers disagree on what a
    /// port may be.
    pub(super) port: Option<&'a [u8]>,
    /// Whether an IPv6 address stood in `[...]`.
    pub(super) bracketed: bool,
}

/// Splits `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]`, `[2001:db8::1]:4711` and a bare
/// `2001:db8::1` (which cannot carry a port) into address and port.
pub(super) fn node(text: &[u8]) -> Option<Node<'_>> {
    if let Some(inside) = text.strip_prefix(b"[") {
        let end = inside.iter().position(|&byte| byte == b']')?;
        let (address, rest) = inside.split_at(end);
        let ip = IpAddr::V6(str(address)?.parse::<Ipv6Addr>().ok()?);
        let port = match rest.get(1..)? {
            [] => None,
            [b':', port @ ..] => Some(port),
            _ => return None,
        };
        return Some(Node {
            ip,
            port,
            bracketed: true,
        });
    }
    // One colon separates an IPv4 address from its port; an IPv6 address has two or more.
    let node = match split(text, text.iter().position(|&byte| byte == b':')) {
        Some((address, port)) if !port.contains(&b':') => Node {
            ip: IpAddr::V4(str(address)?.parse().ok()?),
            port: Some(port),
            bracketed: false,
        },
        _ => Node {
            ip: ip(text)?,
            port: None,
            bracketed: false,
        },
    };
    Some(node)
}

/// An address and a required port, the port after the last colon, so IPv6 may go
/// unbracketed: `192.0.2.1:4711`, `2001:db8::1:4711`, `[2001:db8::1]:4711`. This is
/// `CloudFront-Viewer-Address`.
pub(super) fn ip_and_port(text: &[u8]) -> Option<IpAddr> {
    if text.starts_with(b"[") {
        let node = node(text)?;
        return node.port.is_some_and(is_port).then_some(node.ip);
    }
    let (address, port) = split(text, text.iter().rposition(|&byte| byte == b':'))?;
    if !is_port(port) {
        return None;
    }
    ip(address)
}

/// An address alone: `192.0.2.1`, `2001:db8::1`.
pub(super) fn ip(text: &[u8]) -> Option<IpAddr> {
    str(text)?.parse().ok()
}

/// A decimal port: one to five digits, at most 65535.
pub(super) fn is_port(text: &[u8]) -> bool {
    // The digit check first: `u16`'s parser also takes a leading `+`.
    (1..=5).contains(&text.len())
        && text.iter().all(u8::is_ascii_digit)
        && str(text).is_some_and(|text| text.parse::<u16>().is_ok())
}

fn str(text: &[u8]) -> Option<&str> {
    std::str::from_utf8(text).ok()
}

/// `text` before and after the separator at `at`.
fn split(text: &[u8], at: Option<usize>) -> Option<(&[u8], &[u8])> {
    let (before, after) = text.split_at(at?);
    Some((before, after.get(1..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_of(text: &str) -> Option<(String, Option<&str>, bool)> {
        node(text.as_bytes()).map(|node| {
            let port = node.port.map(|port| std::str::from_utf8(port).unwrap());
            (node.ip.to_string(), port, node.bracketed)
        })
    }

    #[test]
    fn nodes_with_and_without_ports() {
        let owned = |ip: &str, port, bracketed| Some((ip.to_owned(), port, bracketed));
        assert_eq!(node_of("192.0.2.1"), owned("192.0.2.1", None, false));
        assert_eq!(
            node_of("192.0.2.1:80"),
            owned("192.0.2.1", Some("80"), false)
        );
        assert_eq!(node_of("2001:db8::1"), owned("2001:db8::1", None, false));
        assert_eq!(node_of("[2001:db8::1]"), owned("2001:db8::1", None, true));
        assert_eq!(node_of("[::1]:80"), owned("::1", Some("80"), true));
        assert_eq!(node_of("[::1]:_obf"), owned("::1", Some("_obf"), true));
    }

    #[test]
    fn malformed_nodes_are_refused() {
        for text in [
            "",
            "[",
            "[::1",
            "[::1]x",
            "[192.0.2.1]",
            "192.0.2",
            "192.0.2.1.5",
            "::1::2",
            "2001:db8::1:",
            "host",
            "192.0.2.1:80:80",
            "1.2.3.4 5",
            "é",
            "[::1]]",
        ] {
            assert_eq!(node_of(text), None, "{text:?}");
        }
        assert_eq!(node(b"\xff1.2.3.4"), None);
    }

    #[test]
    fn ports_are_decimal_and_in_range() {
        for port in ["0", "80", "65535", "00080"] {
            assert!(is_port(port.as_bytes()), "{port}");
        }
        for port in ["", "+80", "65536", "123456", "8o", " 80", "-1"] {
            assert!(!is_port(port.as_bytes()), "{port:?}");
        }
    }

    #[test]
    fn ip_and_port_takes_the_port_after_the_last_colon() {
        let parse = |text: &str| ip_and_port(text.as_bytes()).map(|ip| ip.to_string());
        assert_eq!(
            parse("198.51.100.10:46532").as_deref(),
            Some("198.51.100.10")
        );
        assert_eq!(parse("2001:db8::1:443").as_deref(), Some("2001:db8::1"));
        assert_eq!(parse("2001:db8:::443").as_deref(), Some("2001:db8::"));
        assert_eq!(parse("[2001:db8::1]:443").as_deref(), Some("2001:db8::1"));
        for text in [
            "198.51.100.10",
            "2001:db8::1",
            "[2001:db8::1]",
            "1.2.3.4:",
            "1.2.3.4:x",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}

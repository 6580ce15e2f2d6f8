//! Unit tests of the key extractors, through their public face: request parts in, key text or
//! error message out.

mod forwarded;
mod or;
mod single_value;
mod trusted_proxies;
mod x_forwarded_for;

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use http::request::Parts;
use http::{HeaderValue, Request};

use super::*;

/// Request parts with these header lines, in order, values as raw bytes.
fn parts<V: AsRef<[u8]>>(headers: &[(&str, V)]) -> Parts {
    let mut request = Request::builder();
    for (name, value) in headers {
        let value = HeaderValue::from_bytes(value.as_ref()).unwrap();
        request = request.header(*name, value);
    }
    request.body(()).unwrap().into_parts().0
}

/// The same parts, from TCP peer `peer` (`192.0.2.1:4000`, `[2001:db8::1]:4000`).
fn from_peer(peer: &str, mut parts: Parts) -> Parts {
    let peer: SocketAddr = peer.parse().unwrap();
    parts.extensions.insert(ConnectInfo(peer));
    parts
}

/// Every line of one header, for the list headers.
fn lines<V: AsRef<[u8]>>(name: &str, lines: &[V]) -> Parts {
    let headers: Vec<(&str, &[u8])> = lines.iter().map(|line| (name, line.as_ref())).collect();
    parts(&headers)
}

/// The key's parts joined with a space, or the error's message.
fn key_text(extractor: &(impl KeyExtractor + ?Sized), parts: &Parts) -> Result<String, String> {
    extractor
        .extract(parts)
        .map(|key| key.iter().collect::<Vec<_>>().join(" "))
        .map_err(|error| error.to_string())
}

fn ok(text: &str) -> Result<String, String> {
    Ok(text.to_owned())
}

fn err(text: &str) -> Result<String, String> {
    Err(text.to_owned())
}

const NO_PEER: &str =
    "no peer address: serve with `into_make_service_with_connect_info::<SocketAddr>()`";

/// As given, and as a limiter keeps it (its name parsed once): the same keys and errors.
#[test]
fn header_key_reads_the_value_and_reports_absence() {
    let kept = shared(header("x-api-key"));
    let keys: [&dyn KeyExtractor; 2] = [&header("x-api-key"), &*kept];
    for key in keys {
        assert_eq!(key_text(key, &parts(&[("x-api-key", "abc")])), ok("abc"));
        assert_eq!(
            key_text(key, &parts(&[("X-Api-Key", "upper")])),
            ok("upper")
        );
        assert_eq!(
            key_text(key, &parts::<&str>(&[])),
            err("missing header `x-api-key`")
        );
        assert_eq!(
            key_text(key, &parts(&[("x-api-key", b"\xff".as_slice())])),
            err("header `x-api-key` is not visible ASCII")
        );
        // A client's line before the gateway's must not choose the key.
        let two = parts(&[("x-api-key", "victim"), ("x-api-key", "real")]);
        assert_eq!(
            key_text(key, &two),
            err(
                "header `x-api-key` appears more than once: the proxy must replace it, not add to it"
            )
        );
    }
    // A name `http` knows (a standard header) is found the same way.
    let kept = shared(header("authorization"));
    let keys: [&dyn KeyExtractor; 2] = [&header("authorization"), &*kept];
    for key in keys {
        let request = parts(&[("Authorization", "Bearer t")]);
        assert_eq!(key_text(key, &request), ok("Bearer t"));
    }
}

#[test]
fn peer_ip_needs_connect_info_and_groups_ipv6() {
    let none = parts::<&str>(&[]);
    assert_eq!(key_text(&peer_ip(), &none), err(NO_PEER));
    let v4 = from_peer("192.0.2.1:4000", none.clone());
    assert_eq!(key_text(&peer_ip(), &v4), ok("192.0.2.1"));
    let mapped = from_peer("[::ffff:192.0.2.1]:4000", none.clone());
    assert_eq!(key_text(&peer_ip(), &mapped), ok("192.0.2.1"));
    for address in ["2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"] {
        let v6 = from_peer(&format!("[{address}]:4000"), none.clone());
        assert_eq!(key_text(&peer_ip(), &v6), ok("2001:db8:1:2::/64"));
        let per_home = peer_ip().ipv6_prefix(56);
        assert_eq!(key_text(&per_home, &v6), ok("2001:db8:1::/56"));
    }
    let next_subnet = from_peer("[2001:db8:1:3::1]:4000", none.clone());
    assert_eq!(key_text(&peer_ip(), &next_subnet), ok("2001:db8:1:3::/64"));
    let next_home = from_peer("[2001:db8:1:100::1]:4000", none);
    let per_home = peer_ip().ipv6_prefix(56);
    assert_eq!(key_text(&per_home, &next_home), ok("2001:db8:1:100::/56"));
}

#[test]
fn closures_many_keys_and_global() {
    let by_path = |parts: &Parts| Ok::<_, KeyError>(parts.uri.path().to_owned());
    let none = parts::<&str>(&[]);
    assert_eq!(key_text(&by_path, &none), ok("/"));
    let many = Key::many(["a".to_owned(), "b".to_owned()]).unwrap();
    assert_eq!(many.iter().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(Key::many(Vec::new()), None);
    assert_eq!(key_text(&global(), &none), ok("global"));
    let failing = |_: &Parts| Err::<String, _>(KeyError::new("no tenant"));
    assert_eq!(key_text(&failing, &none), err("no tenant"));
}

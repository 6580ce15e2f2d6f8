//! Fallback chains: the first key that can be extracted, each in its own key space.

use super::*;

const API_KEY_ELSE_IP: Or<Header, PeerIp> = Or::new(header("x-api-key"), peer_ip());

#[test]
fn the_first_key_wins_and_a_failure_falls_back() {
    let with_key = from_peer("192.0.2.1:1", parts(&[("x-api-key", "k-123")]));
    assert_eq!(key_text(&API_KEY_ELSE_IP, &with_key), ok("1:k-123"));
    let without = from_peer("192.0.2.1:1", parts::<&str>(&[]));
    assert_eq!(key_text(&API_KEY_ELSE_IP, &without), ok("2:192.0.2.1"));
    let not_ascii = from_peer("192.0.2.1:1", parts(&[("x-api-key", b"\xff".as_slice())]));
    assert_eq!(key_text(&API_KEY_ELSE_IP, &not_ascii), ok("2:192.0.2.1"));
}

#[test]
fn a_header_cannot_take_the_budget_of_an_address() {
    let impostor = from_peer("198.51.100.1:1", parts(&[("x-api-key", "192.0.2.1")]));
    let victim = from_peer("192.0.2.1:1", parts::<&str>(&[]));
    let impostor = key_text(&API_KEY_ELSE_IP, &impostor);
    let victim = key_text(&API_KEY_ELSE_IP, &victim);
    assert_eq!(impostor, ok("1:192.0.2.1"));
    assert_eq!(victim, ok("2:192.0.2.1"));
    assert_ne!(impostor, victim);
}

#[test]
fn when_both_fail_the_error_names_both() {
    let nothing = parts::<&str>(&[]);
    assert_eq!(
        key_text(&API_KEY_ELSE_IP, &nothing),
        err(&format!("missing header `x-api-key`; then {NO_PEER}"))
    );
    assert_eq!(
        API_KEY_ELSE_IP.extract(&nothing),
        Err(KeyError::Neither {
            first: Box::new(KeyError::MissingHeader("x-api-key")),
            then: Box::new(KeyError::NoPeerAddress),
        })
    );
}

#[test]
fn chains_nest_and_tag_every_part() {
    let chain = header("x-a").or(header("x-b")).or(peer_ip());
    let request = |headers: &[(&str, &str)]| from_peer("192.0.2.1:1", parts(headers));
    assert_eq!(key_text(&chain, &request(&[("x-a", "a")])), ok("1:1:a"));
    assert_eq!(key_text(&chain, &request(&[("x-b", "b")])), ok("1:2:b"));
    assert_eq!(key_text(&chain, &request(&[])), ok("2:192.0.2.1"));
    let two_parts = |_: &Parts| Ok::<_, KeyError>(Key::many(["a".into(), "b".into()]).unwrap());
    assert_eq!(
        key_text(&two_parts.or(global()), &request(&[])),
        ok("1:a 1:b")
    );
}

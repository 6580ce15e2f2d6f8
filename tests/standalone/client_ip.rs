//! Client IP keys through a router on the memory backend: an IPv6 client is one client however
//! many addresses of its /64 it uses, and behind a trusted proxy the address the proxy appended
//! to `X-Forwarded-For` is the key, whatever the client wrote to its left.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::{Router, routing::get};
use http::{HeaderValue, Request};
use plug_limit::key::KeyExtractor;
use plug_limit::key::{self, ClientIpSource, IpNet};
use plug_limit::{FixedWindow, Limit, Opt, PlugLimit, RateLimited};
use plug_limit_tests::send;

/// Five requests a minute, keyed by the default key: the TCP peer.
type PerPeer = RateLimited<FixedWindow<5, 60>>;

const PROXIES: &[IpNet] = &[IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8)];

/// Five requests a minute, keyed by the client address the proxies in 10.0.0.0/8 report.
struct BehindProxy;

impl Limit for BehindProxy {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(5), Opt::Int(60)];
    const KEY: Option<&'static dyn KeyExtractor> = Some(&key::client_ip(
        ClientIpSource::RightmostXForwardedFor,
        PROXIES,
    ));
}

async fn per_peer(limited: PerPeer) -> (PerPeer, &'static str) {
    (limited, "ok")
}

async fn behind_proxy(
    limited: RateLimited<BehindProxy>,
) -> (RateLimited<BehindProxy>, &'static str) {
    (limited, "ok")
}

fn app() -> Router {
    Router::new()
        .route("/peer", get(per_peer))
        .route("/proxied", get(behind_proxy))
        .with_state(PlugLimit::memory())
}

/// `GET uri` from TCP peer `peer`, with one `X-Forwarded-For` line of raw bytes.
fn request(uri: &str, peer: SocketAddr, forwarded_for: Option<&[u8]>) -> Request<Body> {
    let mut request = Request::get(uri).extension(ConnectInfo(peer));
    if let Some(line) = forwarded_for {
        request = request.header("x-forwarded-for", HeaderValue::from_bytes(line).unwrap());
    }
    request.body(Body::empty()).unwrap()
}

/// Status and `x-ratelimit-remaining` of each request, in order.
async fn decisions(app: &Router, requests: Vec<Request<Body>>) -> Vec<(u16, String)> {
    let mut decisions = Vec::new();
    for request in requests {
        let reply = send(app, request).await;
        let remaining = reply.header("x-ratelimit-remaining").unwrap_or("-");
        decisions.push((reply.status.as_u16(), remaining.to_owned()));
    }
    decisions
}

/// Five allowed (4, 3, 2, 1, 0 left), then denied.
fn five_then_denied(requests: usize) -> Vec<(u16, String)> {
    (0..requests)
        .map(|i| match i {
            0..5 => (200, (4 - i).to_string()),
            _ => (429, "0".to_owned()),
        })
        .collect()
}

#[tokio::test]
async fn forty_addresses_of_one_ipv6_64_share_one_budget() {
    let app = app();
    let spray = (1..=40u16)
        .map(|i| {
            let address = Ipv6Addr::new(0x2001, 0xdb8, 1, 2, i, i * 7, 0xbeef, i);
            request("/peer", SocketAddr::new(address.into(), 40_000 + i), None)
        })
        .collect();
    assert_eq!(decisions(&app, spray).await, five_then_denied(40));
    // The next /64 is another subscriber, with a budget of its own.
    let neighbour = request("/peer", "[2001:db8:1:3::1]:40000".parse().unwrap(), None);
    assert_eq!(
        decisions(&app, vec![neighbour]).await,
        [(200, "4".to_owned())]
    );
}

#[tokio::test]
async fn behind_a_trusted_proxy_bytes_the_client_writes_do_not_escape_the_limit() {
    let app = app();
    let proxy: SocketAddr = "10.0.0.2:51000".parse().unwrap();
    let requests = (0..12u8)
        .map(|i| {
            // The client's part: a forged address and bytes that are not text, new each time.
            let mut line = format!("6.6.6.{i}, ").into_bytes();
            line.extend_from_slice(&[0xff, 0xfe, 0x80 + i]);
            // The proxy's part: the address it saw.
            line.extend_from_slice(b", 203.0.113.7");
            request("/proxied", proxy, Some(&line))
        })
        .collect();
    assert_eq!(decisions(&app, requests).await, five_then_denied(12));
}

#[tokio::test]
async fn a_peer_that_is_not_a_trusted_proxy_is_keyed_by_its_own_address() {
    let app = app();
    let direct: SocketAddr = "192.0.2.9:40000".parse().unwrap();
    let requests = (0..8u8)
        .map(|i| {
            request(
                "/proxied",
                direct,
                Some(format!("198.51.100.{i}").as_bytes()),
            )
        })
        .collect();
    assert_eq!(decisions(&app, requests).await, five_then_denied(8));
    // The address that peer claimed has a budget of its own, untouched.
    let proxy: SocketAddr = "10.0.0.2:51000".parse().unwrap();
    let claimed = request("/proxied", proxy, Some(b"198.51.100.0"));
    assert_eq!(
        decisions(&app, vec![claimed]).await,
        [(200, "4".to_owned())]
    );
}

/// A configuration file's `client_ip`: the list of trusted proxies read at start-up (no
/// `Vec::leak`) keys every limiter by the address a trusted proxy reports, and the rules'
/// lists match that address; a peer outside the list is keyed by its own address.
#[tokio::test]
async fn a_configuration_files_client_ip_keys_by_the_trusted_proxys_address() {
    let config: plug_limit::Config = serde_json::from_value(serde_json::json!({
        "client_ip": {
            "source": "rightmost_x_forwarded_for",
            "trusted_proxies": ["10.0.0.0/8", "::1"]
        },
        "deny_cidrs": ["203.0.113.66"]
    }))
    .unwrap();
    let limits = PlugLimit::builder(plug_limit::Store::memory())
        .config(config)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/peer", get(per_peer))
        .with_state(limits);
    let proxy = SocketAddr::from(([10, 1, 2, 3], 443));
    let stranger = SocketAddr::from(([192, 0, 2, 9], 443));
    let from = |peer, client: &[u8]| request("/peer", peer, Some(client));
    let answers = decisions(
        &app,
        vec![
            from(proxy, b"6.6.6.6, 203.0.113.7"),
            from(proxy, b"203.0.113.7"),
            from(stranger, b"203.0.113.7"),
            from(proxy, b"203.0.113.66"),
            from(stranger, b"203.0.113.66"),
        ],
    )
    .await;
    let answer = |status: u16, remaining: &str| (status, remaining.to_owned());
    assert_eq!(
        answers,
        [
            answer(200, "4"),
            answer(200, "3"),
            answer(200, "4"),
            answer(403, "-"),
            answer(200, "3"),
        ]
    );
}

/// `ClientIp::new` takes a list read at run time and keys as the constant form does; a
/// configuration file's entry that is not a block is refused, naming it.
#[test]
fn an_owned_list_keys_as_the_constant_one() {
    let owned = key::ClientIp::new(
        ClientIpSource::RightmostXForwardedFor,
        vec!["10.0.0.0/8".parse::<IpNet>().unwrap()],
    );
    let constant = key::client_ip(ClientIpSource::RightmostXForwardedFor, PROXIES);
    for peer in [[10, 0, 0, 1], [192, 0, 2, 1]] {
        let request = request("/", SocketAddr::from((peer, 1)), Some(b"203.0.113.7"));
        let parts = request.into_parts().0;
        let keyed =
            |key: &dyn KeyExtractor| key.extract(&parts).unwrap().iter().collect::<String>();
        assert_eq!(keyed(&owned), keyed(&constant), "{peer:?}");
    }
    let refused = serde_json::from_value::<plug_limit::Config>(serde_json::json!({
        "client_ip": { "source": "x_real_ip", "trusted_proxies": ["10.0.0.0/33"] }
    }))
    .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "trusted_proxies[0]: `10.0.0.0/33` is not a CIDR block or an IP address (e.g. `10.0.0.0/8`, `::1`)"
    );
    // A block with host bits set is refused, as the rules' lists refuse it, where it trusted
    // the whole /8 that one proxy's address was meant to be.
    let widened = serde_json::from_value::<plug_limit::Config>(serde_json::json!({
        "client_ip": { "source": "x_real_ip", "trusted_proxies": ["10.0.0.1/8"] }
    }))
    .unwrap_err();
    assert_eq!(
        widened.to_string(),
        "trusted_proxies[0]: `10.0.0.1/8` has host bits set; the block is `10.0.0.0/8`"
    );
}

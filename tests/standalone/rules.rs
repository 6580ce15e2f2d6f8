//! Rules: allow-listed and skipped requests pass uncounted and without headers, deny-listed
//! ones are refused with 403, all before any backend call, on the extractor, the layer and the
//! macro alike; the client's address is the one the app trusts, never a forged header.

use std::net::{IpAddr, Ipv4Addr};

use axum::body::Body;
use axum::http::request::Parts;
use axum::{Router, routing::get};
use plug_limit::key::{self, ClientIpSource, IpNet};
use plug_limit::{
    Config, FailurePolicy, FixedWindow, Limit, Limiter, Opt, PlugLimit, RateLimitLayer,
    RateLimited, Rules, Store, rate_limit,
};
use plug_limit_tests::{RedisServer, Reply, dead_url, pool, send, with_peer};

/// A proxy on this host.
const LOCALHOST: &[IpNet] = &[IpNet::new_assert(IpAddr::V4(Ipv4Addr::LOCALHOST), 32)];

type Two = RateLimited<FixedWindow<2, 60>>;

async fn two(limited: Two) -> (Two, &'static str) {
    (limited, "ok")
}

fn is_probe(parts: &Parts) -> bool {
    parts.headers.contains_key("x-probe")
}

#[rate_limit(opts = [2, 60])]
async fn by_macro() -> &'static str {
    "macro"
}

/// `GET uri` from `peer` (none: served without `ConnectInfo`), with any extra headers.
fn request(uri: &str, peer: Option<&str>, headers: &[(&str, &str)]) -> http::Request<Body> {
    let mut request = http::Request::get(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Body::empty()).unwrap();
    match peer {
        Some(peer) => with_peer(request, (peer.parse::<std::net::IpAddr>().unwrap(), 4000)),
        None => request,
    }
}

async fn from(app: &Router, uri: &str, peer: &str) -> Reply {
    send(app, request(uri, Some(peer), &[])).await
}

/// Status, `x-ratelimit-remaining` and body of a reply.
fn seen(reply: &Reply) -> (u16, Option<&str>, &str) {
    (
        reply.status.as_u16(),
        reply.header("x-ratelimit-remaining"),
        reply.body.as_str(),
    )
}

fn office_rules() -> Rules {
    Rules::new()
        .allow_cidrs(["10.0.0.0/8", "::1"])
        .deny_cidrs(["10.66.0.0/16", "203.0.113.0/24"])
}

#[tokio::test]
async fn the_extractor_allows_denies_and_counts_by_the_lists() {
    let redis = RedisServer::start();
    let builders = [
        ("redis", PlugLimit::builder(redis.pool())),
        ("memory", PlugLimit::builder(Store::memory())),
    ];
    for (backend, builder) in builders {
        let limits = builder.rules(office_rules()).build().unwrap();
        let app = Router::new().route("/", get(two)).with_state(limits);
        for _ in 0..4 {
            // Allow-listed, IPv4 and IPv6: never counted, no headers.
            let reply = from(&app, "/", "10.1.2.3").await;
            assert_eq!(seen(&reply), (200, None, "ok"), "{backend}");
            assert_eq!(reply.rate_headers(), [None, None, None, None], "{backend}");
            assert_eq!(
                seen(&from(&app, "/", "::1").await),
                (200, None, "ok"),
                "{backend}"
            );
            // As dual-stack listeners report IPv4 peers: the IPv4 client it stands for.
            assert_eq!(
                seen(&from(&app, "/", "::ffff:10.9.9.9").await),
                (200, None, "ok"),
                "{backend}"
            );
        }
        // Deny-listed, inside an allowed block too: refused, the deny-list wins.
        for peer in ["10.66.1.1", "203.0.113.200", "::ffff:203.0.113.1"] {
            let denied = from(&app, "/", peer).await;
            assert_eq!(seen(&denied), (403, None, "Forbidden"), "{backend} {peer}");
            assert_eq!(denied.rate_headers(), [None, None, None, None], "{backend}");
            assert_eq!(
                denied.header("content-type"),
                Some("text/plain; charset=utf-8")
            );
        }
        // Anyone else is counted as usual, block edges included.
        for peer in ["11.0.0.0", "9.255.255.255", "203.0.114.0", "::2"] {
            assert_eq!(
                seen(&from(&app, "/", peer).await),
                (200, Some("1"), "ok"),
                "{backend} {peer}"
            );
            assert_eq!(
                seen(&from(&app, "/", peer).await),
                (200, Some("0"), "ok"),
                "{backend} {peer}"
            );
            assert_eq!(
                seen(&from(&app, "/", peer).await),
                (429, Some("0"), "Too Many Requests"),
                "{backend} {peer}"
            );
        }
    }
}

#[tokio::test]
async fn the_layer_and_a_skip_of_the_rules() {
    let limits = PlugLimit::builder(Store::memory())
        .rules(office_rules().skip(|parts| parts.uri.path() == "/api/health"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/api/items", get(|| async { "items" }))
        .route("/api/health", get(|| async { "healthy" }))
        .route_layer(RateLimitLayer::<FixedWindow<1, 60>>::new(limits));
    for _ in 0..3 {
        assert_eq!(
            seen(&from(&app, "/api/health", "192.0.2.1").await),
            (200, None, "healthy")
        );
        assert_eq!(
            seen(&from(&app, "/api/items", "10.0.0.1").await),
            (200, None, "items")
        );
    }
    assert_eq!(
        seen(&from(&app, "/api/items", "192.0.2.1").await),
        (200, Some("0"), "items")
    );
    assert_eq!(
        seen(&from(&app, "/api/items", "192.0.2.1").await),
        (429, Some("0"), "Too Many Requests")
    );
    // A skip does not lift the deny-list.
    assert_eq!(
        seen(&from(&app, "/api/health", "203.0.113.9").await),
        (403, None, "Forbidden")
    );
    // Health checks of a denied client never reached the limit: the others still pass.
    assert_eq!(
        seen(&from(&app, "/api/health", "192.0.2.1").await),
        (200, None, "healthy")
    );
}

#[tokio::test]
async fn the_macro_and_a_skip_of_the_rules() {
    let limits = PlugLimit::builder(Store::memory())
        .rules(office_rules().skip(is_probe))
        .build()
        .unwrap();
    let app = Router::new().route("/m", get(by_macro)).with_state(limits);
    let probe = |peer| request("/m", Some(peer), &[("x-probe", "1")]);
    for _ in 0..3 {
        assert_eq!(
            seen(&send(&app, probe("192.0.2.1")).await),
            (200, None, "macro")
        );
        assert_eq!(
            seen(&from(&app, "/m", "10.3.3.3").await),
            (200, None, "macro")
        );
    }
    assert_eq!(
        seen(&from(&app, "/m", "192.0.2.1").await),
        (200, Some("1"), "macro")
    );
    assert_eq!(
        seen(&from(&app, "/m", "192.0.2.1").await),
        (200, Some("0"), "macro")
    );
    assert_eq!(
        seen(&from(&app, "/m", "192.0.2.1").await),
        (429, Some("0"), "Too Many Requests")
    );
    assert_eq!(
        seen(&send(&app, probe("203.0.113.1")).await),
        (403, None, "Forbidden")
    );
}

#[tokio::test]
async fn a_skip_predicate_exempts_health_checks_everywhere() {
    let limits = PlugLimit::builder(Store::memory())
        .rules(Rules::new().skip(|parts| parts.uri.path() == "/health"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/health", get(two))
        .route("/", get(two))
        .with_state(limits);
    for _ in 0..5 {
        assert_eq!(
            seen(&from(&app, "/health", "192.0.2.1").await),
            (200, None, "ok")
        );
    }
    assert_eq!(
        seen(&from(&app, "/", "192.0.2.1").await),
        (200, Some("1"), "ok")
    );
}

#[tokio::test]
async fn a_forged_forwarded_for_neither_allows_nor_escapes_the_deny_list() {
    let proxies = vec!["10.200.0.0/16".parse::<IpNet>().unwrap()].leak();
    let behind_lb = key::client_ip(ClientIpSource::RightmostXForwardedFor, proxies);
    let limits = PlugLimit::builder(Store::memory())
        .key(behind_lb)
        .rules(
            Rules::new()
                .ip_from(behind_lb)
                .allow_cidrs(["10.0.0.0/8"])
                .deny_cidrs(["198.51.100.0/24"]),
        )
        .build()
        .unwrap();
    let app = Router::new().route("/", get(two)).with_state(limits);
    let via = |peer, xff| send(&app, request("/", Some(peer), &[("x-forwarded-for", xff)]));
    // Straight in, claiming an internal address: counted by its own.
    assert_eq!(
        seen(&via("192.0.2.7", "10.0.0.1").await),
        (200, Some("1"), "ok")
    );
    assert_eq!(
        seen(&via("192.0.2.7", "10.0.0.1").await),
        (200, Some("0"), "ok")
    );
    // Straight in from a denied address, claiming an allowed one: still refused.
    assert_eq!(
        seen(&via("198.51.100.7", "10.0.0.1").await),
        (403, None, "Forbidden")
    );
    // Through the load balancer: the address it appended decides, not the client's entries.
    assert_eq!(
        seen(&via("10.200.0.1", "198.51.100.7, 10.0.0.1").await),
        (200, None, "ok")
    );
    assert_eq!(
        seen(&via("10.200.0.1", "10.0.0.1, 198.51.100.7").await),
        (403, None, "Forbidden")
    );
    assert_eq!(
        seen(&via("10.200.0.1", "10.0.0.1, 192.0.2.99").await),
        (200, Some("1"), "ok")
    );
    // Through it without a usable address: no client to vouch for, refused.
    assert_eq!(
        seen(&via("10.200.0.1", "garbage").await),
        (403, None, "Forbidden")
    );
}

#[tokio::test]
async fn by_default_the_lists_see_the_peer_and_ignore_headers() {
    let limits = PlugLimit::builder(Store::memory())
        .rules(
            Rules::new()
                .allow_cidrs(["10.0.0.0/8"])
                .deny_cidrs(["198.51.100.0/24"]),
        )
        .build()
        .unwrap();
    let app = Router::new().route("/", get(two)).with_state(limits);
    let forged = [("x-forwarded-for", "10.0.0.1"), ("x-real-ip", "10.0.0.1")];
    let reply = send(&app, request("/", Some("192.0.2.1"), &forged)).await;
    assert_eq!(seen(&reply), (200, Some("1"), "ok"));
    let reply = send(&app, request("/", Some("198.51.100.1"), &forged)).await;
    assert_eq!(seen(&reply), (403, None, "Forbidden"));
}

#[tokio::test]
async fn without_an_address_no_allow_list_matches_and_a_deny_list_refuses() {
    let build = |rules: Rules| {
        let limits = PlugLimit::builder(Store::memory())
            .key(key::header("x-client"))
            .rules(rules)
            .build()
            .unwrap();
        Router::new().route("/", get(two)).with_state(limits)
    };
    let no_peer = || request("/", None, &[("x-client", "c")]);
    let everyone = build(Rules::new().allow_cidrs(["0.0.0.0/0", "::/0"]));
    assert_eq!(
        seen(&send(&everyone, no_peer()).await),
        (200, Some("1"), "ok")
    );
    let denying = build(Rules::new().deny_cidrs(["192.0.2.0/24"]));
    assert_eq!(
        seen(&send(&denying, no_peer()).await),
        (403, None, "Forbidden")
    );
}

struct Strict;

impl Limit for Strict {
    const LIMITER: &'static str = "strict";
    const OPTS: &'static [Opt] = &[Opt::Int(1), Opt::Int(60)];
}

async fn strict(limited: RateLimited<Strict>) -> (RateLimited<Strict>, &'static str) {
    (limited, "strict")
}

#[tokio::test]
async fn a_limiter_overrides_the_global_rules_part_by_part() {
    let limits = PlugLimit::builder(Store::memory())
        .rules(office_rules())
        .limiter(
            "strict",
            Limiter::fixed_window().rules(Rules::new().allow_cidrs::<[&str; 0]>([])),
        )
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(two))
        .route("/strict", get(strict))
        .with_state(limits);
    // The global allow-list does not apply to `strict`...
    assert_eq!(seen(&from(&app, "/", "10.0.0.1").await), (200, None, "ok"));
    assert_eq!(
        seen(&from(&app, "/strict", "10.0.0.1").await),
        (200, Some("0"), "strict")
    );
    assert_eq!(
        seen(&from(&app, "/strict", "10.0.0.1").await),
        (429, Some("0"), "Too Many Requests")
    );
    // ...and its global deny-list, which it left unset, does.
    assert_eq!(
        seen(&from(&app, "/strict", "203.0.113.1").await),
        (403, None, "Forbidden")
    );
}

#[tokio::test]
async fn listed_requests_never_reach_redis() {
    let limits = PlugLimit::builder(pool(&dead_url()))
        .on_failure(FailurePolicy::Closed)
        .shadow(true)
        .rules(office_rules())
        .build()
        .unwrap();
    let app = Router::new().route("/", get(two)).with_state(limits);
    // Redis is down and the policy closed: only a request that calls it fails.
    assert_eq!(seen(&from(&app, "/", "10.0.0.1").await), (200, None, "ok"));
    // Shadow mode softens limits, not the deny-list.
    assert_eq!(
        seen(&from(&app, "/", "203.0.113.1").await),
        (403, None, "Forbidden")
    );
    assert_eq!(
        seen(&from(&app, "/", "192.0.2.1").await),
        (503, None, "Rate limiter unavailable")
    );

    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .rules(office_rules())
        .build()
        .unwrap();
    let app = Router::new().route("/", get(two)).with_state(limits);
    for _ in 0..3 {
        assert_eq!(from(&app, "/", "10.0.0.1").await.status, 200);
        assert_eq!(from(&app, "/", "203.0.113.1").await.status, 403);
    }
    assert_eq!(dbsize(&redis).await, 0);
    assert_eq!(from(&app, "/", "192.0.2.1").await.status, 200);
    assert_eq!(dbsize(&redis).await, 1);
}

async fn dbsize(redis: &RedisServer) -> i64 {
    let mut connection = redis.connection().await;
    plug_limit::redis::cmd("DBSIZE")
        .query_async(&mut connection)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_config_file_carries_the_lists() {
    let config: Config = serde_json::from_str(
        r#"{ "allow_cidrs": ["10.0.0.0/8"], "deny_cidrs": ["203.0.113.0/24"] }"#,
    )
    .unwrap();
    // The config's lists replace the builder's; the address source set in code stays.
    let limits = PlugLimit::builder(Store::memory())
        .rules(
            Rules::new()
                .allow_cidrs(["192.0.2.0/24"])
                .ip_from(key::client_ip(ClientIpSource::XRealIp, LOCALHOST)),
        )
        .config(config.clone())
        .build()
        .unwrap();
    let app = Router::new().route("/", get(two)).with_state(limits);
    let real_ip = |ip| send(&app, request("/", Some("127.0.0.1"), &[("x-real-ip", ip)]));
    assert_eq!(seen(&real_ip("10.1.1.1").await), (200, None, "ok"));
    assert_eq!(
        seen(&real_ip("203.0.113.5").await),
        (403, None, "Forbidden")
    );
    assert_eq!(seen(&real_ip("192.0.2.1").await), (200, Some("1"), "ok"));

    // The other way round: rules setting only the address source keep the config's lists.
    let limits = PlugLimit::builder(Store::memory())
        .config(config)
        .rules(Rules::new().ip_from(key::client_ip(ClientIpSource::XRealIp, LOCALHOST)))
        .build()
        .unwrap();
    let app = Router::new().route("/", get(two)).with_state(limits);
    let real_ip = |ip| send(&app, request("/", Some("127.0.0.1"), &[("x-real-ip", ip)]));
    assert_eq!(seen(&real_ip("10.1.1.1").await), (200, None, "ok"));
    assert_eq!(
        seen(&real_ip("203.0.113.5").await),
        (403, None, "Forbidden")
    );
}

#[test]
fn invalid_lists_are_refused_by_build() {
    let error = |builder: plug_limit::Builder| builder.build().unwrap_err().to_string();
    assert_eq!(
        error(
            PlugLimit::builder(Store::memory())
                .rules(Rules::new().allow_cidrs(["10.0.0.0/8", "10.0.0.0/33"]))
        ),
        "invalid `allow_cidrs[1]`: `10.0.0.0/33` is not a CIDR block or an IP address (e.g. `10.0.0.0/8`, `::1`)"
    );
    assert_eq!(
        error(PlugLimit::builder(Store::memory()).limiter(
            "login",
            Limiter::token_bucket().rules(Rules::new().deny_cidrs(["192.168.1.1/16"]))
        )),
        "invalid `limiters.login.deny_cidrs[0]`: `192.168.1.1/16` has host bits set; the block is `192.168.0.0/16`"
    );
    let config: Config = serde_json::from_str(
        r#"{
            "deny_cidrs": ["::1", "localhost"],
            "limiters": { "quota": { "script": "return {'allow', {}}", "allow_cidrs": [""] } }
        }"#,
    )
    .unwrap();
    assert_eq!(
        error(PlugLimit::builder(pool(&dead_url())).config(config.clone())),
        "invalid `deny_cidrs[1]`: `localhost` is not a CIDR block or an IP address (e.g. `10.0.0.0/8`, `::1`)"
    );
    let mut fixed = config;
    fixed.deny_cidrs = None;
    assert_eq!(
        error(PlugLimit::builder(pool(&dead_url())).config(fixed)),
        "invalid `limiters.quota.allow_cidrs[0]`: `` is not a CIDR block or an IP address (e.g. `10.0.0.0/8`, `::1`)"
    );
}

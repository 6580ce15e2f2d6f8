//! Header styles: the draft-10 fields (`RateLimit-Policy`, `RateLimit`) of every built-in, byte
//! for byte and parsed back with `sfv`, on Redis and in memory; the `pk` keyed hash; the
//! per-limiter style; and `retry-after` on every 429 of every built-in in both styles.
//!
//! Every app decides by one `ManualClock` standing still, so both backends answer the same
//! values call for call.

use axum::{Router, routing::get};
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use plug_limit::test::RateLimitHeaders;
use plug_limit::{
    Builder, Config, FixedWindow, Gcra, HeaderStyle, LeakyBucket, Limit, Limiter, ManualClock, Opt,
    PlugLimit, RateLimited, SlidingLog, SlidingWindow, Store, TokenBucket, key,
};
use plug_limit_tests::limit;
use plug_limit_tests::{RedisServer, Reply, backends, get as send_get, stored_key};
use sha2::Sha256;

const SECRET: &[u8] = b"ietf headers: a secret, 32 bytes";
const PREFIX: &str = "ietf";
/// The clock's time: the next whole minute, so that sliding_window's 60 s windows start there,
/// and never behind Redis' own clock, by which the keys a script writes expire.
fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let minutes = i64::try_from(since_epoch.as_secs()).unwrap() / 60 + 1;
    minutes * 60_000
}

struct Multi;

impl Limit for Multi {
    const LIMITER: &'static str = "multi_window";
    const OPTS: &'static [Opt] = &[Opt::Str("2/10"), Opt::Str("5/60")];
}

async fn limited<L: Limit>(limited: RateLimited<L>) -> (RateLimited<L>, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/fixed_window", get(limited::<FixedWindow<2, 60>>))
        .route("/token_bucket", get(limited::<TokenBucket<4, 60, 2>>))
        .route("/sliding_window", get(limited::<SlidingWindow<2, 60>>))
        .route("/sliding_log", get(limited::<SlidingLog<2, 60>>))
        .route("/leaky_bucket", get(limited::<LeakyBucket<2, 60>>))
        .route("/gcra", get(limited::<Gcra<2, 60, 2>>))
        .route("/multi_window", get(limited::<Multi>))
        .with_state(limits)
}

/// Both backends, keyed by `x-client`, on one clock that never moves.
fn apps(
    redis: &RedisServer,
    configure: impl Fn(Builder) -> Builder,
) -> Vec<(&'static str, Router)> {
    let clock = ManualClock::new(now_ms());
    backends(redis, |builder| {
        configure(
            builder
                .prefix(PREFIX)
                .key(key::header("x-client"))
                .clock(clock.clone()),
        )
    })
    .into_iter()
    .map(|(backend, limits)| (backend, app(limits)))
    .collect()
}

fn draft10(builder: Builder) -> Builder {
    builder
        .header_style(HeaderStyle::Draft10)
        .partition_key_secret(SECRET)
}

/// The `pk` the library must send, computed apart from it: HMAC-SHA256 under `secret` of the
/// namespaced key, its first 12 bytes.
fn pk_bytes(secret: &[u8], limiter: &str, route: &str, client: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(stored_key(PREFIX, limiter, opts_of(limiter), route, client).as_bytes());
    mac.finalize().into_bytes()[..12].to_vec()
}

/// The options of the limits of this file's routes, by limiter, as a key writes them.
fn opts_of(limiter: &str) -> &'static str {
    match limiter {
        "fixed_window" | "sliding_window" | "sliding_log" | "leaky_bucket" => "2,60",
        "token_bucket" | "login" => "4,60,2",
        "gcra" => "2,60,2",
        "multi_window" => "2/10,5/60",
        "api" => "1,60",
        other => panic!("no route of {other}"),
    }
}

fn pk(limiter: &str, route: &str, client: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(pk_bytes(SECRET, limiter, route, client))
}

/// One built-in's exact fields for client `alice`: `{pk}` stands for her `pk`.
struct Case {
    route: &'static str,
    policy: &'static str,
    first: &'static str,
    /// The first response's `retry-after`.
    first_retry: Option<&'static str>,
    /// Requests allowed before the first denial.
    allowed: usize,
    denied: &'static str,
    denied_retry: &'static str,
}

const CASES: [Case; 7] = [
    Case {
        route: "fixed_window",
        policy: r#""fixed_window";q=2;w=60;pk=:{pk}:"#,
        first: r#""fixed_window";r=1;t=60;pk=:{pk}:"#,
        first_retry: None,
        allowed: 2,
        denied: r#""fixed_window";r=0;t=60;pk=:{pk}:"#,
        denied_retry: "60",
    },
    // Two tokens at once and two more over the minute: the second request empties the
    // bucket. A denial reports nothing left (`r=0`), though the window's count says 2.
    Case {
        route: "token_bucket",
        policy: r#""token_bucket";q=4;w=60;pk=:{pk}:"#,
        first: r#""token_bucket";r=3;t=60;pk=:{pk}:"#,
        first_retry: None,
        allowed: 2,
        denied: r#""token_bucket";r=0;t=60;pk=:{pk}:"#,
        denied_retry: "30",
    },
    Case {
        route: "sliding_window",
        policy: r#""sliding_window";q=2;w=60;pk=:{pk}:"#,
        first: r#""sliding_window";r=1;t=120;pk=:{pk}:"#,
        first_retry: None,
        allowed: 2,
        denied: r#""sliding_window";r=0;t=120;pk=:{pk}:"#,
        denied_retry: "90",
    },
    Case {
        route: "sliding_log",
        policy: r#""sliding_log";q=2;w=60;pk=:{pk}:"#,
        first: r#""sliding_log";r=1;t=60;pk=:{pk}:"#,
        first_retry: None,
        allowed: 2,
        denied: r#""sliding_log";r=0;t=60;pk=:{pk}:"#,
        denied_retry: "60",
    },
    Case {
        route: "leaky_bucket",
        policy: r#""leaky_bucket";q=2;w=60;pk=:{pk}:"#,
        first: r#""leaky_bucket";r=1;t=30;pk=:{pk}:"#,
        first_retry: None,
        allowed: 2,
        denied: r#""leaky_bucket";r=0;t=60;pk=:{pk}:"#,
        denied_retry: "30",
    },
    Case {
        route: "gcra",
        policy: r#""gcra";q=2;w=60;pk=:{pk}:"#,
        first: r#""gcra";r=1;t=30;pk=:{pk}:"#,
        first_retry: None,
        allowed: 2,
        denied: r#""gcra";r=0;t=60;pk=:{pk}:"#,
        denied_retry: "30",
    },
    // One policy per window; `RateLimit` names the 10 s window, the one with less left.
    Case {
        route: "multi_window",
        policy: r#""multi_window:10s";q=2;w=10;pk=:{pk}:, "multi_window:60s";q=5;w=60;pk=:{pk}:"#,
        first: r#""multi_window:10s";r=1;t=10;pk=:{pk}:"#,
        first_retry: None,
        allowed: 2,
        denied: r#""multi_window:10s";r=0;t=10;pk=:{pk}:"#,
        denied_retry: "10",
    },
];

/// Checks the draft-10 structure with `sfv`'s own parser: `RateLimit-Policy` a list of Strings
/// with exactly `q`, `w` (positive integers) and `pk` (the client's 12 bytes); `RateLimit`
/// one String naming one of those policies, with exactly `r`, `t` (non-negative integers) and
/// the same `pk`. Returns the policy names and `RateLimit`'s `(name, r, t)`.
fn parse_back(reply: &Reply, pk: &[u8]) -> (Vec<String>, (String, i64, i64)) {
    let list = |name: &str| -> Vec<(String, Vec<(String, sfv::BareItem)>)> {
        let text = reply.header(name).unwrap();
        let list: sfv::List = sfv::Parser::new(text).parse().unwrap();
        list.into_iter()
            .map(|entry| {
                let sfv::ListEntry::Item(item) = entry else {
                    panic!("{name}: an inner list in {text}");
                };
                let sfv::BareItem::String(value) = item.bare_item else {
                    panic!("{name}: a member that is not a String in {text}");
                };
                let params = item
                    .params
                    .into_iter()
                    .map(|(key, value)| (key.as_str().to_owned(), value))
                    .collect();
                (value.as_str().to_owned(), params)
            })
            .collect()
    };
    let int = |value: &sfv::BareItem| match value {
        sfv::BareItem::Integer(n) => i64::from(*n),
        other => panic!("not an integer: {other:?}"),
    };
    let keys = |params: &[(String, sfv::BareItem)]| -> Vec<String> {
        params.iter().map(|(key, _)| key.clone()).collect()
    };
    let pk_item = sfv::BareItem::ByteSequence(pk.to_vec());

    let policies = list("ratelimit-policy");
    assert!(!policies.is_empty());
    for (_, params) in &policies {
        assert_eq!(keys(params), ["q", "w", "pk"]);
        assert!(int(&params[0].1) > 0 && int(&params[1].1) > 0);
        assert_eq!(params[2].1, pk_item);
    }
    let current = list("ratelimit");
    let [(name, params)] = &current[..] else {
        panic!("RateLimit must have one item: {current:?}");
    };
    assert_eq!(keys(params), ["r", "t", "pk"]);
    assert_eq!(params[2].1, pk_item);
    let names: Vec<String> = policies.into_iter().map(|(name, _)| name).collect();
    assert!(names.contains(name), "{name} names no policy of {names:?}");
    let (r, t) = (int(&params[0].1), int(&params[1].1));
    assert!(r >= 0 && t >= 0);
    (names, (name.clone(), r, t))
}

fn legacy_headers(reply: &Reply) -> [Option<&str>; 3] {
    [
        reply.header("x-ratelimit-limit"),
        reply.header("x-ratelimit-reset"),
        reply.header("x-ratelimit-remaining"),
    ]
}

#[tokio::test]
async fn every_built_in_sends_the_exact_draft10_fields_allowed_and_denied() {
    let redis = RedisServer::start();
    for (backend, app) in apps(&redis, draft10) {
        for case in &CASES {
            let route = format!("/{}", case.route);
            let pk = pk(case.route, &route, "alice");
            let pk_bytes = pk_bytes(SECRET, case.route, &route, "alice");
            let exact = |template: &str| template.replace("{pk}", &pk);
            let at = format!("{backend} {}", case.route);

            let first = send_get(&app, &route, "alice").await;
            assert_eq!(first.status, 200, "{at}");
            assert_eq!(
                first.header("ratelimit-policy"),
                Some(&*exact(case.policy)),
                "{at}"
            );
            assert_eq!(first.header("ratelimit"), Some(&*exact(case.first)), "{at}");
            assert_eq!(first.header("retry-after"), case.first_retry, "{at}");
            assert_eq!(legacy_headers(&first), [None; 3], "{at}");
            parse_back(&first, &pk_bytes);

            for _ in 1..case.allowed {
                assert_eq!(send_get(&app, &route, "alice").await.status, 200, "{at}");
            }
            let denied = send_get(&app, &route, "alice").await;
            assert_eq!(denied.status, 429, "{at}");
            assert_eq!(
                denied.header("ratelimit-policy"),
                Some(&*exact(case.policy)),
                "{at}"
            );
            assert_eq!(
                denied.header("ratelimit"),
                Some(&*exact(case.denied)),
                "{at}"
            );
            assert_eq!(
                denied.header("retry-after"),
                Some(case.denied_retry),
                "{at}"
            );
            assert_eq!(legacy_headers(&denied), [None; 3], "{at}");
            let (_, (_, r, t)) = parse_back(&denied, &pk_bytes);

            // What a client's test reads of them.
            let read = RateLimitHeaders::of(&denied.headers);
            assert_eq!(
                (read.remaining, read.reset, read.retry_after),
                (
                    Some(u64::try_from(r).unwrap()),
                    Some(u64::try_from(t).unwrap()),
                    Some(case.denied_retry.parse().unwrap())
                ),
                "{at}"
            );
        }
    }
}

#[tokio::test]
async fn multi_window_lists_each_window_and_names_the_one_that_decided() {
    let redis = RedisServer::start();
    for (backend, app) in apps(&redis, draft10) {
        let pk_bytes = pk_bytes(SECRET, "multi_window", "/multi_window", "carol");
        let first = send_get(&app, "/multi_window", "carol").await;
        let (names, current) = parse_back(&first, &pk_bytes);
        assert_eq!(names, ["multi_window:10s", "multi_window:60s"], "{backend}");
        assert_eq!(current, ("multi_window:10s".to_owned(), 1, 10), "{backend}");
        let read = RateLimitHeaders::of(&first.headers);
        assert_eq!(read.limit.as_deref(), Some("2"), "{backend}");
    }
}

#[tokio::test]
async fn pk_tells_clients_apart_and_reveals_no_key() {
    let redis = RedisServer::start();
    let pk_of = |reply: &Reply| {
        let current = reply.header("ratelimit").unwrap();
        let (_, pk) = current.split_once(";pk=").unwrap();
        pk.to_owned()
    };
    for (backend, app) in apps(&redis, draft10) {
        let client = "198.51.100.7";
        let first = pk_of(&send_get(&app, "/gcra", client).await);
        let again = pk_of(&send_get(&app, "/gcra", client).await);
        let other = pk_of(&send_get(&app, "/gcra", "198.51.100.8").await);
        assert_eq!(first, again, "{backend}");
        assert_ne!(first, other, "{backend}");
        assert_eq!(
            first,
            format!(":{}:", pk("gcra", "/gcra", client)),
            "{backend}"
        );
        // Another route is another budget, and another partition.
        let elsewhere = pk_of(&send_get(&app, "/sliding_log", client).await);
        assert_ne!(first, elsewhere, "{backend}");
        // The key shows in neither field, in text or in bytes.
        let reply = send_get(&app, "/gcra", client).await;
        for field in ["ratelimit-policy", "ratelimit"] {
            assert!(!reply.header(field).unwrap().contains(client), "{backend}");
        }
        let bytes = pk_bytes(SECRET, "gcra", "/gcra", client);
        assert!(
            !bytes
                .windows(4)
                .any(|w| client.as_bytes().windows(4).any(|c| c == w))
        );
        // Without the secret, the namespaced key's plain digest is not it.
        let mut unkeyed = Hmac::<Sha256>::new_from_slice(b"").unwrap();
        unkeyed.update(stored_key(PREFIX, "gcra", "2,60,2", "/gcra", client).as_bytes());
        assert_ne!(unkeyed.finalize().into_bytes()[..12], bytes[..]);
    }
}

#[tokio::test]
async fn instances_with_one_secret_agree_on_pk_and_another_secret_differs() {
    let redis = RedisServer::start();
    let instance = |secret: &[u8]| {
        app(PlugLimit::builder(redis.pool())
            .prefix(PREFIX)
            .key(key::header("x-client"))
            .header_style(HeaderStyle::Draft10)
            .partition_key_secret(secret)
            .build()
            .unwrap())
    };
    let (one, two) = (instance(SECRET), instance(SECRET));
    let other = instance(b"another secret, also of 32 bytes");
    let current = |reply: Reply| {
        let text = reply.header("ratelimit").unwrap().to_owned();
        text.split_once(";pk=").unwrap().1.to_owned()
    };
    let a = current(send_get(&one, "/fixed_window", "dave").await);
    let b = current(send_get(&two, "/fixed_window", "dave").await);
    let c = current(send_get(&other, "/fixed_window", "dave").await);
    assert_eq!(a, b);
    assert_eq!(
        a,
        format!(":{}:", pk("fixed_window", "/fixed_window", "dave"))
    );
    assert_ne!(a, c);
    let other_pk = pk_bytes(
        b"another secret, also of 32 bytes",
        "fixed_window",
        "/fixed_window",
        "dave",
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(other_pk);
    assert_eq!(c, format!(":{encoded}:"));

    // Without a secret, the instances of one process share the process's own.
    let process = || {
        app(PlugLimit::builder(Store::memory())
            .key(key::header("x-client"))
            .header_style(HeaderStyle::Draft10)
            .build()
            .unwrap())
    };
    let x = current(send_get(&process(), "/fixed_window", "dave").await);
    let y = current(send_get(&process(), "/fixed_window", "dave").await);
    assert_eq!(x, y);
}

struct Login;

impl Limit for Login {
    const LIMITER: &'static str = "login";
    const OPTS: &'static [Opt] = &[Opt::Int(4), Opt::Int(60), Opt::Int(2)];
}

struct Api;

impl Limit for Api {
    const LIMITER: &'static str = "api";
    const OPTS: &'static [Opt] = &[Opt::Int(1), Opt::Int(60)];
}

/// The response's header names, sorted.
fn names(reply: &Reply) -> Vec<&str> {
    let mut names: Vec<&str> = reply.headers.keys().map(http::HeaderName::as_str).collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn a_limiters_style_beats_the_global_one() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(now_ms());
    let configure = |builder: Builder, global: HeaderStyle, own: HeaderStyle| {
        let app = Router::new()
            .route("/login", get(limited::<Login>))
            .route("/api", get(limited::<Api>));
        app.with_state(
            builder
                .prefix(PREFIX)
                .key(key::header("x-client"))
                .clock(clock.clone())
                .partition_key_secret(SECRET)
                .header_style(global)
                .limiter("login", Limiter::token_bucket().header_style(own))
                .limiter("api", Limiter::fixed_window())
                .build()
                .unwrap(),
        )
    };
    let builders = || {
        [
            ("redis", PlugLimit::builder(redis.pool())),
            ("memory", PlugLimit::builder(Store::memory())),
        ]
    };
    for (backend, builder) in builders() {
        let app = configure(builder, HeaderStyle::Draft10, HeaderStyle::Legacy);
        let login = send_get(&app, "/login", "erin").await;
        assert_eq!(
            login.rate_headers(),
            [
                Some("4 4;w=60;burst=2;policy=token_bucket"),
                Some("60"),
                Some("3"),
                None
            ],
            "{backend}"
        );
        assert_eq!(login.header("ratelimit"), None, "{backend}");
        // The other limiter follows the global style, under its own name.
        let api = send_get(&app, "/api", "erin").await;
        let pk = pk("api", "/api", "erin");
        assert_eq!(
            api.header("ratelimit-policy"),
            Some(&*format!(r#""api";q=1;w=60;pk=:{pk}:"#)),
            "{backend}"
        );
        let denied = send_get(&app, "/api", "erin").await;
        assert_eq!(denied.status, 429);
        assert_eq!(
            denied.header("ratelimit"),
            Some(&*format!(r#""api";r=0;t=60;pk=:{pk}:"#)),
            "{backend}"
        );
        assert_eq!(
            names(&denied),
            [
                "content-length",
                "content-type",
                "ratelimit",
                "ratelimit-policy",
                "retry-after"
            ],
            "{backend}"
        );
    }
    for (backend, builder) in builders() {
        let app = configure(builder, HeaderStyle::Legacy, HeaderStyle::Draft10);
        let login = send_get(&app, "/login", "fay").await;
        let pk = pk("login", "/login", "fay");
        assert_eq!(
            login.header("ratelimit"),
            Some(&*format!(r#""login";r=3;t=60;pk=:{pk}:"#)),
            "{backend}"
        );
        assert_eq!(legacy_headers(&login), [None; 3], "{backend}");
        let api = send_get(&app, "/api", "fay").await;
        assert_eq!(
            api.rate_headers(),
            [Some("1"), Some("60"), Some("0"), None],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn the_style_comes_from_a_config_and_a_custom_script_keeps_its_headers() {
    let redis = RedisServer::start();
    let config: Config = serde_json::from_str(
        r#"{
            "header_style": "draft10",
            "limiters": {
                "quota": {
                    "script": "return {'allow', {'5', '4'}}",
                    "headers": ["x-quota-limit", "x-quota-remaining"]
                },
                "quota_legacy": {
                    "script": "return {'allow', {'5', '4'}}",
                    "headers": ["x-quota-limit", "x-quota-remaining"],
                    "header_style": "legacy"
                }
            }
        }"#,
    )
    .unwrap();
    let limits = PlugLimit::builder(redis.pool())
        .config(config)
        .partition_key_secret(SECRET)
        .build()
        .unwrap();
    let headers = |outcome: &plug_limit::Outcome| -> Vec<(String, String)> {
        outcome
            .headers()
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect()
    };
    for limiter in ["quota", "quota_legacy"] {
        let outcome = limits.check(limit(limiter, &[]), "frank").await.unwrap();
        assert_eq!(
            headers(&outcome),
            [
                ("x-quota-limit".to_owned(), "5".to_owned()),
                ("x-quota-remaining".to_owned(), "4".to_owned())
            ]
        );
    }
    // A programmatic check of a built-in answers in the configured style, with the `pk` of
    // the client's key (no route: the scope is the client's own).
    let outcome = limits
        .check(limit("fixed_window", &[Opt::Int(3), Opt::Int(60)]), "frank")
        .await
        .unwrap();
    assert_eq!(
        headers(&outcome)
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["ratelimit-policy", "ratelimit"]
    );
    assert!(
        outcome
            .header("ratelimit")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(r#""fixed_window";r=2;t=60;pk=:"#)
    );
}

#[tokio::test]
async fn every_429_of_every_built_in_has_retry_after_in_both_styles() {
    let redis = RedisServer::start();
    let styles: [(&str, fn(Builder) -> Builder); 2] =
        [("legacy", |builder| builder), ("draft10", draft10)];
    for (style, configure) in styles {
        for (backend, app) in apps(&redis, |builder| configure(builder.prefix(style))) {
            for case in &CASES {
                let route = format!("/{}", case.route);
                let at = format!("{style} {backend} {}", case.route);
                for _ in 0..case.allowed {
                    assert_eq!(send_get(&app, &route, "gina").await.status, 200, "{at}");
                }
                // Twice: the first denial and one after it.
                for _ in 0..2 {
                    let denied = send_get(&app, &route, "gina").await;
                    assert_eq!(denied.status, 429, "{at}");
                    assert_eq!(
                        denied.header("retry-after"),
                        Some(case.denied_retry),
                        "{at}"
                    );
                    let reset = RateLimitHeaders::of(&denied.headers).reset;
                    assert!(reset.is_some(), "{at}");
                }
            }
        }
    }
}

#[tokio::test]
async fn legacy_fixed_window_denials_gain_retry_after_and_nothing_else_changes() {
    let redis = RedisServer::start();
    for (backend, app) in apps(&redis, |builder| builder) {
        let first = send_get(&app, "/fixed_window", "hana").await;
        assert_eq!(
            names(&first),
            [
                "content-length",
                "content-type",
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-reset"
            ],
            "{backend}"
        );
        send_get(&app, "/fixed_window", "hana").await;
        let denied = send_get(&app, "/fixed_window", "hana").await;
        assert_eq!(
            denied.rate_headers(),
            [Some("2"), Some("60"), Some("0"), Some("60")],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_cached_denial_counts_t_and_retry_after_down() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(now_ms());
    let app = app(draft10(PlugLimit::builder(redis.pool()))
        .prefix(PREFIX)
        .key(key::header("x-client"))
        .clock(clock.clone())
        .deny_cache(true)
        .build()
        .unwrap());
    let pk = pk("gcra", "/gcra", "ivan");
    send_get(&app, "/gcra", "ivan").await;
    send_get(&app, "/gcra", "ivan").await;
    let denied = send_get(&app, "/gcra", "ivan").await;
    assert_eq!(
        (denied.header("ratelimit"), denied.header("retry-after")),
        (Some(&*format!(r#""gcra";r=0;t=60;pk=:{pk}:"#)), Some("30"))
    );
    let calls = redis.script_calls().await;
    clock.advance(std::time::Duration::from_millis(2_500));
    let cached = send_get(&app, "/gcra", "ivan").await;
    assert_eq!(
        redis.script_calls().await,
        calls,
        "answered by the deny cache"
    );
    assert_eq!(cached.status, 429);
    assert_eq!(
        (cached.header("ratelimit"), cached.header("retry-after")),
        (Some(&*format!(r#""gcra";r=0;t=58;pk=:{pk}:"#)), Some("28"))
    );
    assert_eq!(
        cached.header("ratelimit-policy"),
        Some(&*format!(r#""gcra";q=2;w=60;pk=:{pk}:"#))
    );
}

#[test]
fn a_short_secret_and_a_name_no_policy_can_carry_are_refused() {
    let short = PlugLimit::builder(Store::memory())
        .partition_key_secret(b"fifteen bytes..")
        .build()
        .unwrap_err();
    assert_eq!(
        short.to_string(),
        "invalid `partition_key_secret`: must be at least 16 bytes"
    );
    let unicode = PlugLimit::builder(Store::memory())
        .header_style(HeaderStyle::Draft10)
        .limiter("límite", Limiter::token_bucket())
        .build()
        .unwrap_err();
    assert_eq!(
        unicode.to_string(),
        "invalid `limiters.límite.header_style`: the `draft10` header style names policies after their limiter: the name must be printable ASCII"
    );
    // In the legacy style the name is fine.
    assert!(
        PlugLimit::builder(Store::memory())
            .limiter("límite", Limiter::token_bucket())
            .build()
            .is_ok()
    );
}

//! Metrics (feature `metrics`): exact values, read back from a recorder local to the test's
//! thread. The decision span has a test binary of its own (`tests/decision_span.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::metric_values::metric_values;
use axum::{Router, routing::get};
use metrics_util::debugging::DebuggingRecorder;
use plug_limit::{
    CircuitBreaker, FailurePolicy, FixedWindow, KeyFailure, Limit, Opt, PlugLimit, RateLimited,
    Store, key,
};
use plug_limit_tests::limit;
use plug_limit_tests::{
    Fault, FaultProxy, RedisServer, dead_url, get as send_get, pool, with_peer,
};

/// The client keys of these tests: none may appear in any label.
const CLIENTS: [&str; 2] = ["client-secret-1", "client-secret-2"];

type Two = RateLimited<FixedWindow<2, 60>>;

async fn two(limited: Two) -> (Two, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/items/{id}", get(two))
        .with_state(limits)
}

fn expected<const N: usize>(entries: [(&str, &str); N]) -> BTreeMap<String, String> {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn assert_no_client_key(values: &BTreeMap<String, String>) {
    for name in values.keys() {
        for client in CLIENTS {
            assert!(!name.contains(client), "{name} names a client");
        }
    }
}

#[tokio::test]
async fn decisions_are_counted_by_limiter_scope_and_decision_never_by_client() {
    let redis = RedisServer::start();
    for backend in ["redis", "memory"] {
        // A recorder per backend, installed before the build: a Redis backend's breaker
        // enters the gauge when it is made.
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let _recording = metrics::set_default_local_recorder(&recorder);
        let builder = match backend {
            "redis" => PlugLimit::builder(redis.pool()),
            _ => PlugLimit::builder(Store::memory()),
        };
        let limits = builder
            .key(key::header("x-client"))
            .deny_cache(true)
            .build()
            .unwrap();
        let app = app(limits);
        let [one, other] = CLIENTS;
        let mut statuses = Vec::new();
        // One budget for the route template, whatever the id: 2 allowed, then the backend's
        // denial, then the deny cache's.
        for uri in ["/items/1", "/items/2", "/items/3", "/items/4"] {
            statuses.push(send_get(&app, uri, one).await.status.as_u16());
        }
        statuses.push(send_get(&app, "/items/1", other).await.status.as_u16());
        assert_eq!(statuses, [200, 200, 429, 429, 200], "{backend}");

        let mut want = vec![
            (
                "counter plug_limit_decisions_total{decision=allowed,limiter=fixed_window,scope=/items/{id}}",
                "3",
            ),
            (
                "counter plug_limit_decisions_total{decision=denied,limiter=fixed_window,scope=/items/{id}}",
                "2",
            ),
            (
                "counter plug_limit_deny_cache_hits_total{limiter=fixed_window,scope=/items/{id}}",
                "1",
            ),
            // One sample per decision.
            (
                "histogram plug_limit_decision_seconds{limiter=fixed_window,scope=/items/{id}}",
                "5 samples",
            ),
        ];
        if backend == "redis" {
            // A fresh server knows no script: the first check sent it with its body, once.
            want.push((
                "counter plug_limit_script_reloads_total{limiter=fixed_window}",
                "1",
            ));
            want.push(("gauge plug_limit_breaker_open{node=,pool=default}", "0"));
            // Read after the first connection; a test server keeps the default, `noeviction`.
            want.push(("gauge plug_limit_redis_evicts{pool=default}", "0"));
        }
        let got = metric_values(&snapshotter);
        let want: BTreeMap<String, String> = want
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(got, want, "{backend}");
        assert_no_client_key(&got);
    }
}

#[tokio::test]
async fn shadow_denials_and_programmatic_checks_are_counted_apart() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .shadow(true)
        .build()
        .unwrap();
    let opts = [Opt::Int(2), Opt::Int(60)];
    for _ in 0..3 {
        limits
            .check(limit("fixed_window", &opts).scope("/jobs"), CLIENTS[0])
            .await
            .unwrap();
    }
    // A peek decides nothing.
    limits
        .peek(limit("fixed_window", &opts), CLIENTS[0])
        .await
        .unwrap();
    let app = app(limits);
    for _ in 0..3 {
        assert_eq!(send_get(&app, "/items/9", CLIENTS[1]).await.status, 200);
    }
    let got = metric_values(&snapshotter);
    assert_eq!(
        got,
        expected([
            // Shadow mode is the requests' policy; a programmatic check gets its outcome.
            (
                "counter plug_limit_decisions_total{decision=allowed,limiter=fixed_window,scope=/jobs}",
                "2"
            ),
            (
                "counter plug_limit_decisions_total{decision=denied,limiter=fixed_window,scope=/jobs}",
                "1"
            ),
            (
                "counter plug_limit_decisions_total{decision=allowed,limiter=fixed_window,scope=/items/{id}}",
                "2"
            ),
            (
                "counter plug_limit_decisions_total{decision=shadow_denied,limiter=fixed_window,scope=/items/{id}}",
                "1"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=fixed_window,scope=/jobs}",
                "3 samples"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=fixed_window,scope=/items/{id}}",
                "3 samples"
            ),
        ])
    );
    assert_no_client_key(&got);
}

#[tokio::test]
async fn each_limit_of_a_programmatic_stack_is_counted_as_a_check_of_its_own() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(Store::memory()).build().unwrap();
    let window = [Opt::Int(5), Opt::Int(60)];
    let bucket = [Opt::Int(2), Opt::Int(60), Opt::Int(2)];
    let stack = [
        (limit("fixed_window", &window[..]), CLIENTS[0]),
        (limit("token_bucket", &bucket[..]), CLIENTS[0]),
    ];
    let mut allowed = Vec::new();
    for _ in 0..3 {
        allowed.push(limits.check_all(&stack).await.unwrap().is_allowed());
    }
    assert_eq!(allowed, [true, true, false]);
    // An unknown limiter fails every limit of the stack, each with its own label.
    let unknown = [
        (limit("fixed_window", &window[..]), CLIENTS[0]),
        (limit("nope", &window[..]), CLIENTS[0]),
    ];
    limits.check_all(&unknown).await.unwrap_err();
    let got = metric_values(&snapshotter);
    assert_eq!(
        got,
        expected([
            (
                "counter plug_limit_decisions_total{decision=allowed,limiter=fixed_window,scope=}",
                "2"
            ),
            (
                "counter plug_limit_decisions_total{decision=allowed,limiter=token_bucket,scope=}",
                "2"
            ),
            // The bucket denied the third: the window, which gave its unit back, decided
            // nothing.
            (
                "counter plug_limit_decisions_total{decision=denied,limiter=token_bucket,scope=}",
                "1"
            ),
            (
                "counter plug_limit_failures_total{cause=unknown_limiter,limiter=fixed_window,scope=}",
                "1"
            ),
            (
                "counter plug_limit_failures_total{cause=unknown_limiter,limiter=nope,scope=}",
                "1"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=fixed_window,scope=}",
                "4 samples"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=nope,scope=}",
                "1 samples"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=token_bucket,scope=}",
                "3 samples"
            ),
        ])
    );
    assert_no_client_key(&got);
}

#[tokio::test]
async fn failures_are_counted_by_cause_and_the_breaker_gauge_follows_the_breaker() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .timeout(Duration::from_millis(100))
        .circuit_breaker(CircuitBreaker::new(2, Duration::from_millis(300)))
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = app(limits);
    assert_eq!(send_get(&app, "/items/1", CLIENTS[0]).await.status, 200);
    proxy.set(Fault::Blackhole);
    // Two timeouts open the breaker; the next two fail at once.
    for _ in 0..4 {
        let reply = send_get(&app, "/items/1", CLIENTS[0]).await;
        assert_eq!(
            (reply.status.as_u16(), reply.header("x-ratelimit-limit")),
            (200, None)
        );
    }
    let scope = "limiter=fixed_window,scope=/items/{id}";
    let failures =
        |cause: &str| format!("counter plug_limit_failures_total{{cause={cause},{scope}}}");
    let mut want = BTreeMap::from([
        (
            format!("counter plug_limit_decisions_total{{decision=allowed,{scope}}}"),
            "1".to_owned(),
        ),
        (failures("timeout"), "2".to_owned()),
        (failures("circuit_open"), "2".to_owned()),
        (
            format!("histogram plug_limit_decision_seconds{{{scope}}}"),
            "5 samples".to_owned(),
        ),
        (
            "counter plug_limit_script_reloads_total{limiter=fixed_window}".to_owned(),
            "1".to_owned(),
        ),
        (
            "gauge plug_limit_breaker_open{node=,pool=default}".to_owned(),
            "1".to_owned(),
        ),
        (
            "counter plug_limit_breaker_transitions_total{node=,pool=default,state=open}"
                .to_owned(),
            "1".to_owned(),
        ),
        // Its read was answered on the first request's connection, ahead of the script's
        // `EVAL`, before the fault.
        (
            "gauge plug_limit_redis_evicts{pool=default}".to_owned(),
            "0".to_owned(),
        ),
    ]);
    assert_eq!(metric_values(&snapshotter), want);

    // Redis is back: after `open_for`, a probe closes the breaker.
    proxy.set(Fault::Forward);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(send_get(&app, "/items/1", CLIENTS[0]).await.status, 200);
    for counter in want.values_mut() {
        *counter = "0".to_owned();
    }
    want.insert(
        format!("counter plug_limit_decisions_total{{decision=allowed,{scope}}}"),
        "1".to_owned(),
    );
    want.insert(
        format!("histogram plug_limit_decision_seconds{{{scope}}}"),
        "1 samples".to_owned(),
    );
    want.insert(
        "counter plug_limit_breaker_transitions_total{node=,pool=default,state=closed}".to_owned(),
        "1".to_owned(),
    );
    let got = metric_values(&snapshotter);
    assert_eq!(got, want);
    assert_no_client_key(&got);
}

#[tokio::test]
async fn an_unreachable_redis_fails_with_pool_and_the_memory_fallback_is_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(pool(&dead_url()))
        .timeout(Duration::from_secs(2))
        .circuit_breaker(CircuitBreaker::new(100, Duration::from_secs(1)))
        .on_failure(FailurePolicy::Memory)
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = app(limits);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(send_get(&app, "/items/1", CLIENTS[0]).await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
    let scope = "limiter=fixed_window,scope=/items/{id}";
    assert_eq!(
        metric_values(&snapshotter),
        BTreeMap::from([
            (
                format!("counter plug_limit_failures_total{{cause=pool,{scope}}}"),
                "3".to_owned()
            ),
            (
                format!("counter plug_limit_fallback_total{{{scope}}}"),
                "3".to_owned()
            ),
            (
                format!("counter plug_limit_decisions_total{{decision=allowed,{scope}}}"),
                "2".to_owned()
            ),
            (
                format!("counter plug_limit_decisions_total{{decision=denied,{scope}}}"),
                "1".to_owned()
            ),
            (
                format!("histogram plug_limit_decision_seconds{{{scope}}}"),
                "3 samples".to_owned()
            ),
            (
                "gauge plug_limit_breaker_open{node=,pool=default}".to_owned(),
                "0".to_owned()
            ),
        ])
    );
}

#[tokio::test]
async fn a_flushed_script_is_reloaded_once_and_counted() {
    let redis = RedisServer::start();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = app(limits);
    let reloads = |values: BTreeMap<String, String>| {
        values
            .get("counter plug_limit_script_reloads_total{limiter=fixed_window}")
            .cloned()
    };
    send_get(&app, "/items/1", CLIENTS[0]).await;
    send_get(&app, "/items/1", CLIENTS[1]).await;
    assert_eq!(reloads(metric_values(&snapshotter)).as_deref(), Some("1"));
    let mut conn = redis.connection().await;
    plug_limit::redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    let reply = send_get(&app, "/items/1", CLIENTS[0]).await;
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("0"));
    send_get(&app, "/items/2", CLIENTS[1]).await;
    // Since the last snapshot.
    assert_eq!(reloads(metric_values(&snapshotter)).as_deref(), Some("1"));
}

struct Unregistered;

impl Limit for Unregistered {
    const LIMITER: &'static str = "not_registered";
    const OPTS: &'static [Opt] = &[];
}

async fn unregistered(_: RateLimited<Unregistered>) -> &'static str {
    "ok"
}

#[tokio::test]
async fn a_missing_key_and_an_unknown_limiter_are_failures_too() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .on_key_failure(KeyFailure::Reject)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/items/{id}", get(two))
        .route("/unregistered", get(unregistered))
        .with_state(limits);
    let request = http::Request::get("/items/1")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(plug_limit_tests::send(&app, request).await.status, 400);
    assert_eq!(
        send_get(&app, "/unregistered", CLIENTS[0]).await.status,
        200
    );
    assert_eq!(
        metric_values(&snapshotter),
        expected([
            (
                "counter plug_limit_failures_total{cause=key,limiter=fixed_window,scope=/items/{id}}",
                "1"
            ),
            (
                "counter plug_limit_failures_total{cause=unknown_limiter,limiter=unknown,scope=/unregistered}",
                "1"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=fixed_window,scope=/items/{id}}",
                "1 samples"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=unknown,scope=/unregistered}",
                "1 samples"
            ),
        ])
    );
}

/// What the rules settle is counted too: a deny-list's 403s and an allow-list's passes.
#[tokio::test]
async fn rule_verdicts_are_counted_as_decisions() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .rules(
            plug_limit::Rules::new()
                .deny_cidrs(["192.0.2.0/24"])
                .allow_cidrs(["198.51.100.0/24"]),
        )
        .build()
        .unwrap();
    let app = app(limits);
    let from = |peer: [u8; 4]| {
        let request = http::Request::get("/items/1")
            .header("x-client", CLIENTS[0])
            .body(axum::body::Body::empty())
            .unwrap();
        with_peer(request, (peer, 4000))
    };
    for _ in 0..3 {
        let reply = plug_limit_tests::send(&app, from([192, 0, 2, 7])).await;
        assert_eq!(reply.status, 403);
    }
    let reply = plug_limit_tests::send(&app, from([198, 51, 100, 7])).await;
    assert_eq!(reply.status, 200);
    let values = metric_values(&snapshotter);
    assert_no_client_key(&values);
    assert_eq!(
        values,
        expected([
            (
                "counter plug_limit_decisions_total{decision=forbidden,limiter=fixed_window,scope=/items/{id}}",
                "3"
            ),
            (
                "counter plug_limit_decisions_total{decision=skipped,limiter=fixed_window,scope=/items/{id}}",
                "1"
            ),
            (
                "histogram plug_limit_decision_seconds{limiter=fixed_window,scope=/items/{id}}",
                "4 samples"
            ),
        ])
    );
}

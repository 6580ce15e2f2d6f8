//! A bad day in production, through a TCP fault proxy in front of a real Redis: a request is
//! counted once or not at all, no check outlasts the timeout, and once the circuit breaker
//! knows of an outage, checks cost nothing.

use std::time::{Duration, Instant};

use axum::{Router, routing::get};
use futures_util::future::join_all;
use plug_limit::{CircuitBreaker, Error, FixedWindow, Opt, PlugLimit, RateLimited, key};
use plug_limit_tests::limit;
use plug_limit_tests::{Fault, FaultProxy, Logs, RedisServer, counted_at, get as send_get, pool};

const OPTS: [Opt; 2] = [Opt::Int(100), Opt::Int(600)];

/// Limits reaching `redis` through `proxy`, with `timeout`.
fn through(proxy: &FaultProxy, timeout: Duration) -> PlugLimit {
    PlugLimit::builder(pool(&proxy.url()))
        .timeout(timeout)
        .key(key::header("x-client"))
        .build()
        .unwrap()
}

/// What Redis counted for the programmatic key `client`, read directly (not through the proxy).
async fn counted(redis: &RedisServer, client: &str) -> i64 {
    counted_at(&redis.url(), "fixed_window", "100,600", client).await
}

#[tokio::test]
async fn a_reply_lost_after_redis_counted_is_not_sent_again() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let limits = through(&proxy, Duration::from_secs(2));
    let first = limits
        .check(limit("fixed_window", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(first.header("x-ratelimit-remaining").unwrap(), "99");

    proxy.set(Fault::DropReplies);
    let lost = limits.check(limit("fixed_window", &OPTS), "k").await;
    assert!(matches!(lost, Err(Error::Redis(_))), "{lost:?}");
    proxy.set(Fault::Forward);
    let third = limits
        .check(limit("fixed_window", &OPTS), "k")
        .await
        .unwrap();

    // Three sent, three counted: the lost one ran once and was not sent again.
    assert_eq!(counted(&redis, "k").await, 3);
    assert_eq!(third.header("x-ratelimit-remaining").unwrap(), "97");
}

#[tokio::test]
async fn a_slow_redis_is_waited_for_up_to_the_timeout_and_counted_once() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let limits = through(&proxy, Duration::from_secs(5));
    limits
        .check(limit("fixed_window", &OPTS), "k")
        .await
        .unwrap();

    // Slower than the client library's default response timeout (500 ms), well within ours.
    proxy.set(Fault::Delay(Duration::from_millis(1200)));
    let started = Instant::now();
    let slow = limits
        .check(limit("fixed_window", &OPTS), "k")
        .await
        .unwrap();
    let took = started.elapsed();
    eprintln!("1.2 s reply under a 5 s timeout: answered after {took:?}");
    assert!(took >= Duration::from_millis(1200), "{took:?}");
    assert!(took < Duration::from_millis(2500), "{took:?}");
    assert_eq!(slow.header("x-ratelimit-remaining").unwrap(), "98");
    assert_eq!(counted(&redis, "k").await, 2);
}

#[tokio::test]
async fn no_check_outlasts_its_timeout() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let timeouts = [100, 1000, 5000].map(Duration::from_millis);
    let limits = timeouts.map(|timeout| through(&proxy, timeout));
    // Connected first, so the silence hits the call, not the connection.
    for limits in &limits {
        limits
            .check(limit("fixed_window", &OPTS), "warm")
            .await
            .unwrap();
    }
    proxy.set(Fault::Blackhole);
    let checks = limits
        .iter()
        .zip(timeouts)
        .map(|(limits, timeout)| async move {
            let started = Instant::now();
            let result = limits.check(limit("fixed_window", &OPTS), "k").await;
            (timeout, started.elapsed(), result)
        });
    for (timeout, took, result) in join_all(checks).await {
        eprintln!("timeout {timeout:?}: the check failed after {took:?}");
        assert!(
            matches!(result, Err(Error::Timeout(t)) if t == timeout),
            "{result:?}"
        );
        assert!(took >= timeout, "{timeout:?}: {took:?}");
        assert!(
            took < timeout + Duration::from_millis(100),
            "{timeout:?}: {took:?}"
        );
    }
}

#[tokio::test]
async fn a_silent_connection_is_replaced_not_waited_on() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let limits = through(&proxy, Duration::from_millis(200));
    limits
        .check(limit("fixed_window", &OPTS), "k")
        .await
        .unwrap();
    // The link goes silent (a dead host, a lost route): no reset, no reply, nothing.
    proxy.set(Fault::Blackhole);
    let silent = limits.check(limit("fixed_window", &OPTS), "k").await;
    assert!(matches!(silent, Err(Error::Timeout(_))), "{silent:?}");
    // The route comes back. The silent connection is not reused: a new one carries the check.
    proxy.set(Fault::Forward);
    let next = limits
        .check(limit("fixed_window", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(next.header("x-ratelimit-remaining").unwrap(), "98");
    assert_eq!(proxy.accepted(), 2);
    assert_eq!(counted(&redis, "k").await, 2);
}

type Limited = RateLimited<FixedWindow<100, 600>>;

async fn limited(limited: Limited) -> (Limited, &'static str) {
    (limited, "ok")
}

#[tokio::test]
async fn an_open_breaker_answers_at_once_and_a_probe_closes_it() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .timeout(Duration::from_millis(200))
        .circuit_breaker(CircuitBreaker::new(3, Duration::from_millis(500)))
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new().route("/", get(limited)).with_state(limits);
    let (logs, _guard) = Logs::capture();
    assert_eq!(
        send_get(&app, "/", "a")
            .await
            .header("x-ratelimit-remaining"),
        Some("99")
    );

    proxy.set(Fault::Blackhole);
    let mut waits = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let reply = send_get(&app, "/", "a").await;
        assert_eq!(
            (reply.status.as_u16(), reply.header("x-ratelimit-remaining")),
            (200, None)
        );
        waits.push(started.elapsed());
    }
    assert!(
        waits.iter().all(|w| *w >= Duration::from_millis(200)),
        "{waits:?}"
    );
    // Each silent connection was dropped after its timeout; none is opened from here on.
    let connections = proxy.accepted();

    // Open: no call, no wait, no new connection.
    let mut open = Duration::ZERO;
    for _ in 0..100 {
        let started = Instant::now();
        let reply = send_get(&app, "/", "a").await;
        assert_eq!(
            (reply.status.as_u16(), reply.header("x-ratelimit-remaining")),
            (200, None)
        );
        open = open.max(started.elapsed());
    }
    eprintln!("until the breaker opened: {waits:?}; slowest of 100 checks while open: {open:?}");
    assert!(
        open < Duration::from_millis(20),
        "slowest check while open: {open:?}"
    );
    assert_eq!(proxy.accepted(), connections);

    // The outage ends; after `open_for`, one probe (on a fresh connection) closes the breaker
    // and the check is decided again.
    proxy.set(Fault::Forward);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reply = send_get(&app, "/", "a").await;
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("98"));

    let text = logs.text();
    let lines = |needle: &str| text.matches(needle).count();
    assert_eq!(
        lines("circuit breaker open for 500ms after 3 consecutive redis failures"),
        1,
        "{text}"
    );
    assert_eq!(lines("circuit breaker closed"), 1, "{text}");
    // 103 failed checks within a second: one line, then the count of the suppressed ones.
    assert_eq!(lines("rate limit check failed"), 1, "{text}");
}

//! Concurrency limits on real Redis and in memory: a request holds its slot until its response
//! body ends, across instances, and a lease its instance never gave back expires.

use std::time::Duration;

use axum::extract::{Extension, FromRef};
use axum::response::Response;
use axum::routing::get;
use axum::{Router, http};
use plug_limit::{
    Concurrency, ManualClock, Opt, PlugLimit, RateLimitLayer, RateLimited, key, rate_limit,
};
use plug_limit_tests::{
    Fault, FaultProxy, RedisServer, backends, opts_text, pool, stored_key, unique_prefix,
};

use crate::streaming_bodies::{Gates, configured, eventually, finish, start};
use plug_limit_tests::limit;

/// 2084-03-01T04:59:54Z: a time whose expiries are never in a real Redis' past.
const START: i64 = 3_602_725_194_000;

#[derive(Clone, FromRef)]
struct State {
    limits: PlugLimit,
}

type Exports = RateLimited<Concurrency<2, 60>>;

async fn by_extractor(limited: Exports, Extension(gates): Extension<Gates>) -> Response {
    limited.respond(gates.body())
}

async fn by_layer(Extension(gates): Extension<Gates>) -> Response {
    Response::new(gates.body())
}

#[rate_limit(limiter = "concurrency", opts = [2, 60])]
async fn by_macro(Extension(gates): Extension<Gates>) -> Response {
    Response::new(gates.body())
}

/// `/extractor`, `/layer` and `/macro`, each under 2 requests in flight per client.
fn app(limits: PlugLimit, gates: &Gates) -> Router {
    let layered = Router::new()
        .route("/layer", get(by_layer))
        .route_layer(RateLimitLayer::<Concurrency<2, 60>>::new(limits.clone()));
    Router::new()
        .route("/extractor", get(by_extractor))
        .route("/macro", get(by_macro))
        .with_state(State { limits })
        .merge(layered)
        .layer(Extension(gates.clone()))
}

/// `status limit,reset,remaining,retry-after` of a response.
fn seen(response: &Response) -> String {
    let value = |name: &str| {
        response
            .headers()
            .get(name)
            .map_or("-", |value| value.to_str().unwrap())
    };
    format!(
        "{} {},{},{},{}",
        response.status().as_u16(),
        value("x-ratelimit-limit"),
        value("x-ratelimit-reset"),
        value("x-ratelimit-remaining"),
        value("retry-after"),
    )
}

#[tokio::test]
async fn a_request_holds_its_slot_until_its_body_ends() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "in-flight")) {
        let gates = Gates::default();
        let app = app(limits, &gates);
        for path in ["/extractor", "/layer", "/macro"] {
            let first_gate = gates.next();
            let first = start(&app, path, "a", &[]).await;
            assert_eq!(seen(&first), "200 2,60,1,-", "{backend} {path}");
            clock.advance(Duration::from_secs(10));
            let second_gate = gates.next();
            let second = start(&app, path, "a", &[]).await;
            assert_eq!(seen(&second), "200 2,50,0,-", "{backend} {path}");
            // Both bodies still stream: a third request waits for one of them.
            let _unused = gates.next();
            let denied = start(&app, path, "a", &[]).await;
            assert_eq!(seen(&denied), "429 2,50,0,1", "{backend} {path}");
            gates.clear();
            // Another client has slots of its own.
            let other_gate = gates.next();
            let other = start(&app, path, "b", &[]).await;
            assert_eq!(seen(&other), "200 2,60,1,-", "{backend} {path}");

            finish(first, Some(first_gate)).await;
            let third_gate = gates.next();
            let mut third = None;
            eventually("the first slot comes back", async || {
                // A denied request runs no handler: the gate waits for the next attempt.
                let response = start(&app, path, "a", &[]).await;
                let allowed = response.status() == http::StatusCode::OK;
                third = allowed.then_some(response);
                allowed
            })
            .await;
            // The second lease, taken at the same time, is now the oldest: 60 s to go.
            let third = third.unwrap();
            assert_eq!(seen(&third), "200 2,60,0,-", "{backend} {path}");
            finish(second, Some(second_gate)).await;
            finish(third, Some(third_gate)).await;
            finish(other, Some(other_gate)).await;
            clock.advance(Duration::from_secs(60));
        }
    }
}

#[tokio::test]
async fn a_response_tuple_gives_the_slot_back_when_the_response_is_built() {
    async fn tupled(
        limited: RateLimited<Concurrency<1, 60>>,
    ) -> (RateLimited<Concurrency<1, 60>>, &'static str) {
        (limited, "done")
    }
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "in-flight")) {
        let app = Router::new()
            .route("/", get(tupled))
            .with_state(State { limits });
        let first = start(&app, "/", "a", &[]).await;
        assert_eq!(seen(&first), "200 1,60,0,-", "{backend}");
        // Its body is unread, but the tuple gave the lease back already.
        let mut second = None;
        eventually("the slot comes back", async || {
            let response = start(&app, "/", "a", &[]).await;
            let allowed = response.status() == http::StatusCode::OK;
            second = Some(response);
            allowed
        })
        .await;
        assert_eq!(seen(&second.unwrap()), "200 1,60,0,-", "{backend}");
    }
}

#[tokio::test]
async fn a_hook_that_answers_for_the_limit_keeps_the_request_in_flight() {
    use plug_limit::{Action, Check};
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let with_hook = |builder: plug_limit::Builder| {
        configured(&clock, "in-flight")(builder).hook(|_: &str, check: Check<'_>| match check {
            Check::Allowed(_) => {
                let mut headers = http::HeaderMap::new();
                headers.insert("x-hooked", http::HeaderValue::from_static("yes"));
                Action::Proceed(headers)
            }
            _ => Action::Default,
        })
    };
    for (backend, limits) in backends(&redis, with_hook) {
        let gates = Gates::default();
        let app = app(limits, &gates);
        let (first_gate, second_gate) = (gates.next(), gates.next());
        let first = start(&app, "/layer", "a", &[]).await;
        let second = start(&app, "/layer", "a", &[]).await;
        assert_eq!(first.headers()["x-hooked"], "yes", "{backend}");
        assert_eq!(second.status(), http::StatusCode::OK, "{backend}");
        // The hook's answer replaced the headers, not the leases: both slots are held.
        let denied = start(&app, "/layer", "a", &[]).await;
        assert_eq!(seen(&denied), "429 2,60,0,1", "{backend}");
        finish(first, Some(first_gate)).await;
        finish(second, Some(second_gate)).await;
    }
}

/// One request in flight per client, each lease living one second unless renewed.
async fn one_second_lease(
    limited: RateLimited<Concurrency<1, 1>>,
    Extension(gates): Extension<Gates>,
) -> Response {
    limited.respond(gates.body())
}

/// `/` under [`one_second_lease`].
fn one_second_app(limits: PlugLimit, gates: &Gates) -> Router {
    Router::new()
        .route("/", get(one_second_lease))
        .with_state(State { limits })
        .layer(Extension(gates.clone()))
}

/// A response streaming for longer than its lease keeps its slot: the lease is renewed every
/// third of its life while the body streams, and given back when it ends. The limits keep
/// real time here (Redis' `TIME`, the system clock in memory): a lease renewed by a manual
/// clock would never run out.
#[tokio::test]
async fn a_response_streaming_past_its_lease_keeps_its_slot() {
    let redis = RedisServer::start();
    let configure = |builder: plug_limit::Builder| {
        builder
            .prefix(unique_prefix("renewal"))
            .key(key::header("x-client"))
    };
    for (backend, limits) in backends(&redis, configure) {
        let gates = Gates::default();
        let app = one_second_app(limits, &gates);
        let gate = gates.next();
        let streaming = start(&app, "/", "a", &[]).await;
        assert_eq!(seen(&streaming), "200 1,1,0,-", "{backend}");
        // 1.2 s, then 2.4 s after it was taken: past its lease, twice over, the slot is taken.
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_millis(1_200)).await;
            let _unused = gates.next();
            let denied = start(&app, "/", "a", &[]).await;
            assert_eq!(seen(&denied), "429 1,1,0,1", "{backend}");
            gates.clear();
        }
        finish(streaming, Some(gate)).await;
        // Past the next renewal's time: the renewals ended with the body, and none came back.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let next_gate = gates.next();
        let next = start(&app, "/", "a", &[]).await;
        assert_eq!(seen(&next), "200 1,1,0,-", "{backend}");
        finish(next, Some(next_gate)).await;
    }
}

/// A runtime without its timer cannot renew a lease: the request is still decided (the
/// renewals' schedule is made in their own task, which alone fails), and its lease lives
/// `lease_s`, as without renewals.
#[test]
fn a_runtime_without_a_timer_still_decides_a_leased_request() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let limits = PlugLimit::memory();
        let first = limits
            .check(limit("concurrency", &OPTS), "k")
            .await
            .unwrap();
        assert_eq!(remaining(&first), (true, "1".to_owned()));
        drop(first);
        let again = limits
            .check(limit("concurrency", &OPTS), "k")
            .await
            .unwrap();
        assert_eq!(remaining(&again), (true, "1".to_owned()));
    });
}

/// A backend timeout longer than the lease does not speed renewals up: one every third of the
/// lease, each given that third at most. Over 2 s of a one-second lease: the admission (its
/// first `EVALSHA` fails with `NOSCRIPT` and runs as `EVAL`: 2 calls), 6 renewals and the
/// release, 9 calls; a 7th renewal may slip in before the release on a slow machine. Renewals
/// paced by the timeout (every 100 ms here) would make about 20.
#[tokio::test]
async fn renewals_keep_their_pace_whatever_the_timeout() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .prefix(unique_prefix("renewal-pace"))
        .key(key::header("x-client"))
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let gates = Gates::default();
    let app = one_second_app(limits, &gates);
    let before = redis.script_calls().await;
    let gate = gates.next();
    let streaming = start(&app, "/", "a", &[]).await;
    assert_eq!(seen(&streaming), "200 1,1,0,-");
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    finish(streaming, Some(gate)).await;
    // The release, and no renewal after it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let calls = redis.script_calls().await - before;
    assert!((9..=10).contains(&calls), "{calls} script calls");
}

/// With a clock set, that clock alone ends leases: none is renewed on real time (a renewal
/// would stamp the set clock's time, and a lease the clock let run out would come back).
#[tokio::test]
async fn with_a_set_clock_leases_are_not_renewed() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    for (backend, limits) in backends(&redis, configured(&clock, "no-renewal")) {
        let gates = Gates::default();
        let app = one_second_app(limits, &gates);
        let gate = gates.next();
        let streaming = start(&app, "/", "a", &[]).await;
        assert_eq!(seen(&streaming), "200 1,1,0,-", "{backend}");
        // 0.9 s by the clock, then real time enough for a renewal, then past the lease.
        clock.advance(Duration::from_millis(900));
        tokio::time::sleep(Duration::from_millis(500)).await;
        clock.advance(Duration::from_millis(200));
        let next_gate = gates.next();
        let next = start(&app, "/", "a", &[]).await;
        assert_eq!(seen(&next), "200 1,1,0,-", "{backend}");
        finish(next, Some(next_gate)).await;
        finish(streaming, Some(gate)).await;
        clock.advance(Duration::from_secs(60));
    }
}

/// Limits on `url` under `prefix`, timed by `clock`.
fn instance(url: &str, prefix: &str, clock: &ManualClock) -> PlugLimit {
    PlugLimit::builder(pool(url))
        .prefix(prefix)
        .clock(clock.clone())
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

const OPTS: [Opt; 2] = [Opt::Int(2), Opt::Int(30)];

/// Units held under the programmatic key `client`, read from Redis directly.
async fn held(redis: &RedisServer, prefix: &str, client: &str) -> i64 {
    held_under(redis, prefix, &OPTS, client).await
}

/// [`held`] under the concurrency limit of `opts`.
async fn held_under(redis: &RedisServer, prefix: &str, opts: &[Opt], client: &str) -> i64 {
    let mut conn = redis.connection().await;
    plug_limit::redis::cmd("ZCARD")
        .arg(stored_key(
            prefix,
            "concurrency",
            &opts_text(opts),
            "",
            client,
        ))
        .query_async::<i64>(&mut conn)
        .await
        .unwrap()
}

fn remaining(outcome: &plug_limit::Outcome) -> (bool, String) {
    let value = outcome.header("x-ratelimit-remaining").unwrap();
    (outcome.is_allowed(), value.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn instances_share_the_slots_and_each_gives_back_its_own() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let prefix = unique_prefix("in-flight");
    let (a, b) = (
        instance(&redis.url(), &prefix, &clock),
        instance(&redis.url(), &prefix, &clock),
    );
    let on_a = a.check(limit("concurrency", &OPTS), "k").await.unwrap();
    assert_eq!(remaining(&on_a), (true, "1".to_owned()));
    let on_b = b.check(limit("concurrency", &OPTS), "k").await.unwrap();
    assert_eq!(remaining(&on_b), (true, "0".to_owned()));
    for limits in [&a, &b] {
        let full = limits
            .check(limit("concurrency", &OPTS), "k")
            .await
            .unwrap();
        assert_eq!(remaining(&full), (false, "0".to_owned()));
    }
    assert_eq!(held(&redis, &prefix, "k").await, 2);
    // a's outcome drops: its lease goes, b's stays.
    drop(on_a);
    eventually("a's lease is released", async || {
        held(&redis, &prefix, "k").await == 1
    })
    .await;
    let again = b.check(limit("concurrency", &OPTS), "k").await.unwrap();
    assert_eq!(remaining(&again), (true, "0".to_owned()));
    drop((on_b, again));
    eventually("every lease is released", async || {
        held(&redis, &prefix, "k").await == 0
    })
    .await;
}

#[tokio::test]
async fn a_lease_its_instance_never_gave_back_expires() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let clock = ManualClock::new(START);
    let prefix = unique_prefix("in-flight");
    let doomed = instance(&proxy.url(), &prefix, &clock);
    let survivor = instance(&redis.url(), &prefix, &clock);
    let first = doomed
        .check(limit("concurrency", &OPTS), "k")
        .await
        .unwrap();
    let second = doomed
        .check(limit("concurrency", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(remaining(&second), (true, "0".to_owned()));
    // The instance loses Redis before its requests end: its releases never arrive.
    proxy.set(Fault::Blackhole);
    drop((first, second));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(held(&redis, &prefix, "k").await, 2);
    let full = survivor
        .check(limit("concurrency", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(remaining(&full), (false, "0".to_owned()));
    assert_eq!(full.header("x-ratelimit-reset").unwrap(), "30");
    // A lease lives 30 s: one second before, the slots are still held; at 30 s, free.
    clock.advance(Duration::from_secs(29));
    let full = survivor
        .check(limit("concurrency", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(remaining(&full), (false, "0".to_owned()));
    assert_eq!(full.header("x-ratelimit-reset").unwrap(), "1");
    clock.advance(Duration::from_secs(1));
    let free = survivor
        .check(limit("concurrency", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(remaining(&free), (true, "1".to_owned()));
    assert_eq!(held(&redis, &prefix, "k").await, 1);
}

#[tokio::test]
async fn a_lease_whose_reply_was_lost_is_given_back_at_once() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let clock = ManualClock::new(START);
    let prefix = unique_prefix("in-flight");
    let limits = instance(&proxy.url(), &prefix, &clock);
    let warm = limits
        .check(limit("concurrency", &OPTS), "warm")
        .await
        .unwrap();
    assert!(warm.is_allowed());
    // Redis takes the lease, but its reply is lost: the check fails, and the lease it may have
    // taken is given back by a release sent once the network is back.
    proxy.set(Fault::DropReplies);
    let lost = limits.check(limit("concurrency", &OPTS), "k").await;
    assert!(matches!(lost, Err(plug_limit::Error::Redis(_))), "{lost:?}");
    proxy.set(Fault::Forward);
    eventually("the lost lease is released", async || {
        held(&redis, &prefix, "k").await == 0
    })
    .await;
    let first = limits
        .check(limit("concurrency", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(remaining(&first), (true, "1".to_owned()));
}

/// A renewal that timed out on its way to Redis may still run there after the release, on a
/// connection given up for silent, and take the lease again: the renewing task then sends the
/// release a second time, once that renewal's time is surely over (the renewals' interval,
/// 2 s here, or the timeout if longer). Without it, the slot would stay taken until the lease
/// ran out, 6 s after the late renewal.
#[tokio::test]
async fn a_renewal_that_lands_after_the_release_is_released_again() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    let prefix = unique_prefix("late-renewal");
    // One slot, a 6 s lease: renewals every 2 s, each given the 300 ms timeout.
    let opts = [Opt::Int(1), Opt::Int(6)];
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .prefix(&prefix)
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let admitted = limits
        .check(limit("concurrency", &opts), "k")
        .await
        .unwrap();
    assert_eq!(remaining(&admitted), (true, "0".to_owned()));
    // A reply at 1.5 s keeps the connection from being idle at 2 s (an idle one is checked
    // with a `PING` first, which would meet the delay instead of the renewal); a fixed window
    // leaves nothing to release after it.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let window = [Opt::Int(10), Opt::Int(60)];
    let other = limits
        .check(limit("fixed_window", &window), "other")
        .await
        .unwrap();
    assert!(other.is_allowed());
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The first renewal, at 2 s, takes 1.2 s to reach Redis: given up at 2.3 s, when its
    // silent connection is dropped, it runs at about 3.2 s.
    proxy.set(Fault::DelayRequests(Duration::from_millis(1_200)));
    tokio::time::sleep(Duration::from_millis(950)).await;
    proxy.set(Fault::Forward);
    // At 2.5 s the request ends: its release runs at once, on a fresh connection.
    drop(admitted);
    eventually("the release runs", async || {
        held_under(&redis, &prefix, &opts, "k").await == 0
    })
    .await;
    // The late renewal takes the lease again...
    eventually("the late renewal runs", async || {
        held_under(&redis, &prefix, &opts, "k").await == 1
    })
    .await;
    // ...and the second release, at about 4.5 s, gives it back, long before the 9.2 s the
    // late renewal's lease would otherwise end.
    let late = tokio::time::Instant::now();
    while held_under(&redis, &prefix, &opts, "k").await != 0 {
        assert!(
            late.elapsed() < Duration::from_millis(3_000),
            "the late renewal's lease is still held"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_concurrency_limit_cannot_be_stacked_at_run_time() {
    let limits = PlugLimit::memory();
    let stacked = limits
        .check_all(&[
            (limit("fixed_window", &[Opt::Int(5), Opt::Int(60)]), "k"),
            (limit("concurrency", &OPTS), "k"),
        ])
        .await;
    assert_eq!(
        stacked.unwrap_err().to_string(),
        "invalid limiter input: concurrency: cannot be stacked: its lease outlives the call"
    );
    // Alone, it leases.
    let alone = limits
        .check(limit("concurrency", &OPTS), "k")
        .await
        .unwrap();
    assert_eq!(remaining(&alone), (true, "1".to_owned()));
}

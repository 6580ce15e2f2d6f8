//! A denied stack gives back what the limits before the denying one took (by their own
//! refunds, a token bucket by the state it held before); the limits must then decide every
//! later call as if the denied one never came.
//! Each test runs the same calls in two worlds (two prefixes of one Redis): the first also
//! makes a stack that some later limit denies, the second never makes it. Every later call
//! must get the same answer in both.
//!
//! Two servers share the Redis here, one with a clock `AHEAD` of the other's (each passes its
//! own `now`, which the scripts accept: "a caller's clock running ahead of the server's is
//! fine"), and a stack is denied on the one behind.

use plug_limit::{ManualClock, Opt, Outcome, PlugLimit};
use plug_limit_tests::{RedisServer, unique_prefix};
use plug_limit_tests::{limit, limit_cost};

/// 2084-03-01T04:59:54Z: a time whose expiries are never in a real Redis' past.
const START: i64 = 3_602_725_194_000;
/// How far the clock of one server runs ahead of the other's.
const AHEAD: i64 = 500;

/// Always denies once exhausted: one request an hour.
const DENIER: (&str, &[Opt]) = ("fixed_window", &[Opt::Int(1), Opt::Int(3_600)]);

/// One world: a server ahead, a server behind, on one prefix.
struct World {
    ahead: PlugLimit,
    behind: PlugLimit,
}

fn world(redis: &RedisServer, ahead: &ManualClock, behind: &ManualClock, name: &str) -> World {
    let prefix = unique_prefix(name);
    let build = |clock: &ManualClock| {
        PlugLimit::builder(redis.pool())
            .prefix(prefix.clone())
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    World {
        ahead: build(ahead),
        behind: build(behind),
    }
}

fn render(outcome: &Outcome) -> (bool, Vec<String>) {
    let headers = outcome
        .headers()
        .iter()
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or("<bytes>")))
        .collect();
    (outcome.is_allowed(), headers)
}

/// On `world`'s server behind: exhausts the [`DENIER`], then makes a stack of `limiter`
/// (cost 1) and the denier, which the denier denies.
async fn deny_a_stack(world: &World, limiter: &str, opts: &[Opt]) {
    let (denier, denier_opts) = DENIER;
    assert!(
        world
            .behind
            .check(limit(denier, denier_opts), "d")
            .await
            .unwrap()
            .is_allowed()
    );
    let stack = world
        .behind
        .check_all(&[
            (limit(limiter, opts), "k"),
            (limit(denier, denier_opts), "d"),
        ])
        .await
        .unwrap();
    assert!(!stack.is_allowed(), "the stack is denied");
}

/// A check of `limiter` (cost `cost`) that each of `servers` must allow.
async fn allowed_on_each(servers: [&PlugLimit; 2], limiter: &str, opts: &[Opt], cost: u32) {
    for server in servers {
        assert!(
            server
                .check(limit_cost(limiter, opts, cost), "k")
                .await
                .unwrap()
                .is_allowed()
        );
    }
}

/// A check of `limiter` (cost `cost`) on the server behind must get one answer in the world
/// that saw a denied stack and in the one that never did.
async fn same_answer(denied_too: &World, never: &World, limiter: &str, opts: &[Opt], cost: u32) {
    let with_denial = render(
        &denied_too
            .behind
            .check(limit_cost(limiter, opts, cost), "k")
            .await
            .unwrap(),
    );
    let without = render(
        &never
            .behind
            .check(limit_cost(limiter, opts, cost), "k")
            .await
            .unwrap(),
    );
    assert_eq!(
        with_denial, without,
        "{limiter}: a denied stack changed a later answer (left: after the denied stack, right: without it)"
    );
}

/// Runs `before` (cost `first`) on the server ahead in both worlds, then, in the first world
/// only, a stack on the server behind: `limiter` (cost 1), then the exhausted `DENIER`. Then,
/// `later` ms on, a check of cost `then` on the server behind must get one answer in both.
async fn undo_on_a_clock_behind(limiter: &str, opts: &[Opt], first: u32, later: i64, then: u32) {
    let redis = RedisServer::start();
    let ahead = ManualClock::new(START + AHEAD);
    let behind = ManualClock::new(START);
    let denied_too = world(&redis, &ahead, &behind, "undo-skew-all");
    let never = world(&redis, &ahead, &behind, "undo-skew-never");

    allowed_on_each([&denied_too.ahead, &never.ahead], limiter, opts, first).await;
    deny_a_stack(&denied_too, limiter, opts).await;
    behind.set(START + later);
    same_answer(&denied_too, &never, limiter, opts, then).await;
}

/// sliding_log: the refund takes the newest entry off the log, and the newest is the one the
/// server ahead logged at its later `now`, not the one the stack just logged: the log keeps
/// an entry that leaves `AHEAD` ms sooner.
#[tokio::test]
async fn sliding_log_undo_removes_the_entry_it_logged() {
    undo_on_a_clock_behind(
        "sliding_log",
        &[Opt::Int(2), Opt::Int(2)],
        1,
        2_000 + AHEAD / 5,
        2,
    )
    .await;
}

/// token_bucket: the take moves the bucket's last refill back to the stack's `now`, and the
/// refund leaves it there: the bucket refills from `AHEAD` ms earlier than it did.
#[tokio::test]
async fn token_bucket_undo_keeps_the_last_refill() {
    // 10 a 10 s, burst 2: 0.8 tokens a second. 1 token left at START + AHEAD.
    undo_on_a_clock_behind(
        "token_bucket",
        &[Opt::Int(10), Opt::Int(10), Opt::Int(2)],
        1,
        1_700,
        2,
    )
    .await;
}

/// leaky_bucket: the take moves the bucket's time back to the stack's `now`, and the refund
/// leaves it there: the bucket leaks from `AHEAD` ms earlier than it did.
#[tokio::test]
async fn leaky_bucket_undo_keeps_the_last_leak() {
    // 4 a 2 s: one unit leaks every 500 ms.
    undo_on_a_clock_behind("leaky_bucket", &[Opt::Int(4), Opt::Int(2)], 3, 600, 2).await;
}

/// token_bucket on one clock: the take and refund rebase the bucket's refill on the stack's
/// `now`, and refill summed in two steps is not refill summed in one: at a later call that
/// needs exactly the tokens refilled by then, the bucket that saw the denied stack is
/// 2^-52 short and denies.
#[tokio::test]
async fn token_bucket_undo_on_one_clock_is_exact() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    let opts: &[Opt] = &[Opt::Int(4), Opt::Int(1), Opt::Int(2)];
    let denied_too = world(&redis, &clock, &clock, "undo-one-clock-all");
    let never = world(&redis, &clock, &clock, "undo-one-clock-never");

    let behind = [&denied_too.behind, &never.behind];
    allowed_on_each(behind, "token_bucket", opts, 1).await;
    clock.set(START + 295);
    deny_a_stack(&denied_too, "token_bucket", opts).await;

    // 1 + 2 x 0.5 s = 2 tokens at 500 ms.
    clock.set(START + 500);
    same_answer(&denied_too, &never, "token_bucket", opts, 2).await;
}

/// token_bucket's retry-after counts from the last take: the denied stack's take and refund
/// make it the last, so a later denial answers another retry-after than without it.
#[tokio::test]
async fn token_bucket_undo_keeps_retry_after() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(START);
    // 10 a 10 s, burst 2: 0.8 tokens a second, 1.25 s a token.
    let opts: &[Opt] = &[Opt::Int(10), Opt::Int(10), Opt::Int(2)];
    let denied_too = world(&redis, &clock, &clock, "undo-retry-all");
    let never = world(&redis, &clock, &clock, "undo-retry-never");

    let behind = [&denied_too.behind, &never.behind];
    allowed_on_each(behind, "token_bucket", opts, 2).await;
    clock.set(START + 2_400);
    // 1.92 tokens, 0.92 left.
    allowed_on_each(behind, "token_bucket", opts, 1).await;
    clock.set(START + 2_550);
    // 1.04 tokens: the bucket allows, and the stack is denied by the denier alone.
    assert!(
        denied_too
            .behind
            .peek(limit("token_bucket", opts), "k")
            .await
            .unwrap()
            .is_allowed()
    );
    deny_a_stack(&denied_too, "token_bucket", opts).await;

    clock.set(START + 2_600);
    same_answer(&denied_too, &never, "token_bucket", opts, 2).await;
}

//! The memory backend's key bound: a spray of new keys cannot grow it past `memory_capacity`,
//! and what it evicts is the state that would expire soonest anyway.
//!
//! The bound is kept per shard and keys land in shards by a hash with a random seed, so the
//! sprays below send ten times the capacity: every shard fills and evicts many times over,
//! whichever way the keys fall, and the assertions hold for any seed.

use std::time::Duration;

use plug_limit::{Config, ManualClock, Opt, Outcome, PlugLimit, Store};
use plug_limit_tests::limit;
use plug_limit_tests::{dead_url, pool};

/// A memory backend bounded to `capacity` keys, on a clock that moves only when told.
fn bounded(capacity: usize) -> (PlugLimit, ManualClock) {
    let clock = ManualClock::starting_now();
    let limits = PlugLimit::builder(Store::memory())
        .clock(clock.clone())
        .memory_capacity(capacity)
        .build()
        .unwrap();
    (limits, clock)
}

/// Sends one fixed-window check for each of `count` new keys named `{name}{i}`.
async fn spray(limits: &PlugLimit, name: &str, count: usize, opts: &[Opt]) {
    for i in 0..count {
        let outcome = limits
            .check(limit("fixed_window", opts), &format!("{name}{i}"))
            .await
            .unwrap();
        assert!(outcome.is_allowed(), "{name}{i}: a new key has its budget");
    }
}

/// The victim's limit: three requests an hour.
const HOURLY: [Opt; 2] = [Opt::Int(3), Opt::Int(3600)];

/// The victim's next request.
async fn victim(limits: &PlugLimit) -> Outcome {
    limits
        .check(limit("fixed_window", &HOURLY), "victim")
        .await
        .unwrap()
}

/// Spends the victim's hourly budget, and one request more: it is denied for an hour.
async fn exhaust_victim(limits: &PlugLimit) {
    for _ in 0..3 {
        assert!(victim(limits).await.is_allowed());
    }
    assert!(!victim(limits).await.is_allowed());
}

/// Checks what `key`'s five-request limit shows, without spending any of it.
async fn assert_shows(limits: &PlugLimit, key: &str, window: i64, remaining: &str, reset: &str) {
    let five = [Opt::Int(5), Opt::Int(window)];
    let shown = limits
        .peek(limit("fixed_window", &five), key)
        .await
        .unwrap();
    assert_eq!(header(&shown, "x-ratelimit-remaining"), remaining, "{key}");
    assert_eq!(header(&shown, "x-ratelimit-reset"), reset, "{key}");
}

fn header<'a>(outcome: &'a Outcome, name: &str) -> &'a str {
    outcome.header(name).unwrap().to_str().unwrap()
}

#[tokio::test]
async fn capacity_n_holds_at_most_n_keys_under_a_spray_of_ten_n() {
    // 1000 over 64 shards: 40 shards of 16 keys and 24 of 15, adding up to exactly 1000.
    let (limits, _clock) = bounded(1000);
    spray(&limits, "spray", 10_000, &[Opt::Int(5), Opt::Int(60)]).await;
    let held = limits.memory_keys().unwrap();
    // A full shard frees two keys (an eighth of 15 or 16, rounded up) and takes the new one:
    // each shard holds between its share minus one and its share.
    assert!((936..=1000).contains(&held), "{held} keys held");
}

#[tokio::test]
async fn a_victim_denied_for_an_hour_stays_denied_through_a_spray_of_shorter_windows() {
    let (limits, clock) = bounded(1000);
    exhaust_victim(&limits).await;

    // Ten times the capacity of one-minute keys, over ten seconds.
    for second in 0..10 {
        let name = format!("spray{second}-");
        spray(&limits, &name, 1000, &[Opt::Int(100), Opt::Int(60)]).await;
        clock.advance(Duration::from_secs(1));
    }
    assert!(limits.memory_keys().unwrap() <= 1000);

    let still = victim(&limits).await;
    assert!(!still.is_allowed());
    assert_eq!(header(&still, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&still, "x-ratelimit-reset"), "3590");
}

#[tokio::test]
async fn the_keys_nearest_expiry_are_evicted_first() {
    // 64 shards of 10 keys: a full shard evicts its 2 soonest-expiring.
    let (limits, clock) = bounded(640);
    let limit = |window| [Opt::Int(5), Opt::Int(window)];
    spray(&limits, "late", 20, &limit(7200)).await;
    spray(&limits, "early", 20, &limit(60)).await;
    clock.advance(Duration::from_secs(1));
    // Expiring after the early keys and before the late ones.
    spray(&limits, "spray", 6400, &limit(3600)).await;
    assert!(limits.memory_keys().unwrap() <= 640);

    // A kept key has spent one request of its five; an evicted one starts afresh.
    for i in 0..20 {
        assert_shows(&limits, &format!("late{i}"), 7200, "3", "7199").await;
        assert_shows(&limits, &format!("early{i}"), 60, "4", "60").await;
    }
}

#[tokio::test]
async fn a_spray_that_outlasts_the_victim_evicts_it_once_it_fills_the_capacity() {
    // The documented limit of the rule: fresh keys through the victim's own limiter expire
    // after it, so ten times the capacity of them push it out and its budget comes back.
    let (limits, clock) = bounded(1000);
    exhaust_victim(&limits).await;
    clock.advance(Duration::from_secs(1));
    spray(&limits, "spray", 10_000, &HOURLY).await;
    let back = victim(&limits).await;
    assert!(back.is_allowed());
    assert_eq!(header(&back, "x-ratelimit-remaining"), "2");
}

#[tokio::test]
async fn the_capacity_can_come_from_a_config() {
    let config: Config =
        serde_json::from_value(serde_json::json!({ "memory_capacity": 64 })).unwrap();
    let limits = PlugLimit::builder(Store::memory())
        .clock(ManualClock::starting_now())
        .config(config)
        .build()
        .unwrap();
    spray(&limits, "spray", 2000, &[Opt::Int(5), Opt::Int(60)]).await;
    // 64 shards of one key each, every one of them filled by some of the 2000.
    assert_eq!(limits.memory_keys(), Some(64));
}

#[test]
fn build_refuses_a_zero_capacity() {
    let expected = "invalid `memory_capacity`: must be at least 1";
    let memory = PlugLimit::builder(Store::memory())
        .memory_capacity(0)
        .build()
        .unwrap_err();
    assert_eq!(memory.to_string(), expected);
    // On Redis it bounds the memory fallback, and is checked alike.
    let redis = PlugLimit::builder(pool(&dead_url()))
        .memory_capacity(0)
        .build()
        .unwrap_err();
    assert_eq!(redis.to_string(), expected);
    let config: Config =
        serde_json::from_value(serde_json::json!({ "memory_capacity": 0 })).unwrap();
    let from_config = PlugLimit::builder(Store::memory())
        .config(config)
        .build()
        .unwrap_err();
    assert_eq!(from_config.to_string(), expected);
}

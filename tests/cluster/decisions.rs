//! Decisions on a healthy cluster: each routed to the node owning its key's slot, with the same
//! answers as on a single Redis.

use std::collections::BTreeSet;

use axum::{Router, routing::get};
use plug_limit::redis::{self, Script};
use plug_limit::{FixedWindow, Opt, Outcome, PlugLimit, RateLimited, key};
use plug_limit_tests::{RedisCluster, get as send_get, opts_text, stored_key, unique_prefix};

use crate::slots::Slots;
use plug_limit_tests::limit;

/// Keys a test spreads over the cluster; enough that every node owns some.
const KEYS: usize = 30;

/// One decision as the assertions read it: allowed, `x-ratelimit-limit`,
/// `x-ratelimit-remaining`.
type Seen = (bool, String, String);

/// Each built-in, its opts, and what five calls on a fresh key get: three admitted.
const BUILTINS: [(&str, &[Opt], &str, [&str; 5]); 8] = [
    (
        "fixed_window",
        &[Opt::Int(3), Opt::Int(60)],
        "3",
        ["2", "1", "0", "0", "0"],
    ),
    (
        "token_bucket",
        &[Opt::Int(5), Opt::Int(60), Opt::Int(3)],
        "5 5;w=60;burst=3;policy=token_bucket",
        // The window's 5 are not spent: the burst of 3 is, and 2 more refill over 60 s.
        ["4", "3", "2", "2", "2"],
    ),
    (
        "sliding_window",
        &[Opt::Int(3), Opt::Int(60)],
        "3",
        ["2", "1", "0", "0", "0"],
    ),
    (
        "sliding_log",
        &[Opt::Int(3), Opt::Int(60)],
        "3",
        ["2", "1", "0", "0", "0"],
    ),
    (
        "leaky_bucket",
        &[Opt::Int(3), Opt::Int(60)],
        "3",
        ["2", "1", "0", "0", "0"],
    ),
    (
        "gcra",
        &[Opt::Int(3), Opt::Int(60), Opt::Int(3)],
        "3",
        ["2", "1", "0", "0", "0"],
    ),
    (
        "multi_window",
        &[Opt::Str("3/60"), Opt::Str("10/3600")],
        "3",
        ["2", "1", "0", "0", "0"],
    ),
    (
        "calendar_quota",
        &[Opt::Int(3), Opt::Str("month"), Opt::Int(-300)],
        "3",
        ["2", "1", "0", "0", "0"],
    ),
];

fn seen(outcome: &Outcome) -> Seen {
    let header = |name| {
        outcome
            .header(name)
            .unwrap_or_else(|| panic!("no {name}: {outcome:?}"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    (
        outcome.is_allowed(),
        header("x-ratelimit-limit"),
        header("x-ratelimit-remaining"),
    )
}

fn expected(limit: &str, remaining: [&str; 5]) -> Vec<Seen> {
    remaining
        .iter()
        .enumerate()
        .map(|(call, remaining)| (call < 3, limit.to_owned(), (*remaining).to_owned()))
        .collect()
}

/// Whether the master on `port` holds `key` itself (a plain connection follows no `MOVED`).
async fn node_holds(cluster: &RedisCluster, port: u16, key: &str) -> bool {
    let mut node = cluster.node(port).await;
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(&mut node)
        .await
        .unwrap()
        == 1
}

fn all_ports(cluster: &RedisCluster) -> BTreeSet<u16> {
    cluster.ports().iter().copied().collect()
}

#[tokio::test]
async fn every_builtin_decides_on_the_node_owning_its_key() {
    let cluster = RedisCluster::start();
    let prefix = unique_prefix("builtins");
    let limits = PlugLimit::builder(cluster.pool())
        .prefix(&prefix)
        .build()
        .unwrap();
    let mut slots = Slots::read(&cluster).await;
    for (limiter, opts, most, remaining) in BUILTINS {
        let mut owners = BTreeSet::new();
        for i in 0..KEYS {
            let key = format!("client-{i}");
            let mut calls = Vec::new();
            for _ in 0..5 {
                calls.push(seen(
                    &limits.check(limit(limiter, opts), &key).await.unwrap(),
                ));
            }
            assert_eq!(calls, expected(most, remaining), "{limiter} {key}");
            let stored = stored_key(&prefix, limiter, &opts_text(opts), "", &key);
            let owner = slots.owner(&stored).await;
            assert!(
                node_holds(&cluster, owner, &stored).await,
                "{stored} is not on its owner {owner}"
            );
            owners.insert(owner);
        }
        assert_eq!(owners, all_ports(&cluster), "{limiter}");
    }
}

type Two = RateLimited<FixedWindow<2, 60>>;

async fn two(limited: Two) -> (Two, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new().route("/", get(two)).with_state(limits)
}

fn cluster_limits(cluster: &RedisCluster) -> PlugLimit {
    PlugLimit::builder(cluster.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_route_counts_down_then_denies_with_429() {
    let cluster = RedisCluster::start();
    let app = app(cluster_limits(&cluster));
    let first = send_get(&app, "/", "alice").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body, "ok");
    assert_eq!(
        first.rate_headers(),
        [Some("2"), Some("60"), Some("1"), None]
    );
    let second = send_get(&app, "/", "alice").await;
    assert_eq!(second.status, 200);
    assert_eq!(
        second.rate_headers(),
        [Some("2"), Some("60"), Some("0"), None]
    );
    let denied = send_get(&app, "/", "alice").await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.body, "Too Many Requests");
    assert_eq!(
        denied.rate_headers(),
        [Some("2"), Some("60"), Some("0"), Some("60")]
    );
    // Another client has its own budget, wherever its key lives.
    let other = send_get(&app, "/", "bob").await;
    assert_eq!(
        other.rate_headers(),
        [Some("2"), Some("60"), Some("1"), None]
    );
}

type Fifty = RateLimited<FixedWindow<50, 60>>;

async fn fifty(limited: Fifty) -> (Fifty, &'static str) {
    (limited, "ok")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_requests_from_two_instances_admit_exactly_the_limit() {
    let cluster = RedisCluster::start();
    // Two app instances: separate PlugLimit handles, separate cluster pools, one cluster.
    let apps: Vec<Router> = (0..2)
        .map(|_| {
            Router::new()
                .route("/", get(fifty))
                .with_state(cluster_limits(&cluster))
        })
        .collect();
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let app = apps[i % apps.len()].clone();
            tokio::spawn(async move { send_get(&app, "/", "racer").await.status.as_u16() })
        })
        .collect();
    let (mut ok, mut denied) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            200 => ok += 1,
            429 => denied += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!((ok, denied), (50, 150));
}

/// Whether each master has the fixed-window script loaded, in port order.
async fn script_loaded(cluster: &RedisCluster) -> Vec<bool> {
    let hash = Script::new(include_str!("../../lua/fixed_window.lua"))
        .get_hash()
        .to_owned();
    let mut loaded = Vec::new();
    for &port in cluster.ports() {
        let mut node = cluster.node(port).await;
        let exists: Vec<bool> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&hash)
            .query_async(&mut node)
            .await
            .unwrap();
        loaded.push(exists == [true]);
    }
    loaded
}

#[tokio::test]
async fn scripts_survive_script_flush_on_every_node() {
    let cluster = RedisCluster::start();
    // The default settings: `plug_limit` is the key prefix.
    let limits = PlugLimit::builder(cluster.pool()).build().unwrap();
    let opts = [Opt::Int(3), Opt::Int(60)];
    let mut slots = Slots::read(&cluster).await;
    let mut owners = BTreeSet::new();
    for i in 0..KEYS {
        let key = format!("client-{i}");
        let outcome = limits
            .check(limit("fixed_window", &opts), &key)
            .await
            .unwrap();
        assert_eq!(
            seen(&outcome),
            (true, "3".to_owned(), "2".to_owned()),
            "{key}"
        );
        owners.insert(
            slots
                .owner(&stored_key(
                    "plug_limit",
                    "fixed_window",
                    &opts_text(&opts),
                    "",
                    &key,
                ))
                .await,
        );
    }
    assert_eq!(owners, all_ports(&cluster));
    assert_eq!(script_loaded(&cluster).await, [true; 3]);

    for &port in cluster.ports() {
        let mut node = cluster.node(port).await;
        let flushed: String = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut node)
            .await
            .unwrap();
        assert_eq!(flushed, "OK");
    }
    assert_eq!(script_loaded(&cluster).await, [false; 3]);

    // Each node answers NOSCRIPT once; the script is loaded again and the count goes on.
    for i in 0..KEYS {
        let key = format!("client-{i}");
        let outcome = limits
            .check(limit("fixed_window", &opts), &key)
            .await
            .unwrap();
        assert_eq!(
            seen(&outcome),
            (true, "3".to_owned(), "1".to_owned()),
            "{key}"
        );
    }
    assert_eq!(script_loaded(&cluster).await, [true; 3]);
}

#[tokio::test]
async fn reset_and_peek_reach_the_node_owning_the_key() {
    let cluster = RedisCluster::start();
    let prefix = unique_prefix("reset");
    let limits = PlugLimit::builder(cluster.pool())
        .prefix(&prefix)
        .build()
        .unwrap();
    let mut slots = Slots::read(&cluster).await;
    let mut owners = BTreeSet::new();
    for (limiter, opts, most, remaining) in [BUILTINS[0], BUILTINS[1]] {
        let fresh = (true, most.to_owned(), remaining[0].to_owned());
        for i in 0..KEYS {
            let key = format!("client-{i}");
            let stored = stored_key(&prefix, limiter, &opts_text(opts), "", &key);
            let owner = slots.owner(&stored).await;
            owners.insert(owner);

            // A peek on a fresh key answers as a first request would, and writes nothing.
            let peek = limits.peek(limit(limiter, opts), &key).await.unwrap();
            assert_eq!(seen(&peek), fresh, "{limiter} {key}");
            assert!(!node_holds(&cluster, owner, &stored).await, "{stored}");

            for _ in 0..3 {
                assert!(
                    limits
                        .check(limit(limiter, opts), &key)
                        .await
                        .unwrap()
                        .is_allowed()
                );
            }
            let spent = (false, most.to_owned(), remaining[3].to_owned());
            let peek = limits.peek(limit(limiter, opts), &key).await.unwrap();
            assert_eq!(seen(&peek), spent, "{limiter} {key}");
            let denied = limits.check(limit(limiter, opts), &key).await.unwrap();
            assert_eq!(seen(&denied), spent, "{limiter} {key}");
            assert!(node_holds(&cluster, owner, &stored).await, "{stored}");

            limits.reset(limit(limiter, opts), &key).await.unwrap();
            assert!(!node_holds(&cluster, owner, &stored).await, "{stored}");
            let peek = limits.peek(limit(limiter, opts), &key).await.unwrap();
            assert_eq!(seen(&peek), fresh, "{limiter} {key}");
            let again = limits.check(limit(limiter, opts), &key).await.unwrap();
            assert_eq!(seen(&again), fresh, "{limiter} {key}");
        }
    }
    assert_eq!(owners, all_ports(&cluster));
}

#[tokio::test]
async fn reset_all_forgets_its_prefix_on_every_primary_and_nothing_else() {
    let cluster = RedisCluster::start();
    let (prefix, other) = (unique_prefix("reset_all"), unique_prefix("kept"));
    let handle = |prefix: &str| {
        PlugLimit::builder(cluster.pool())
            .prefix(prefix)
            .build()
            .unwrap()
    };
    let (limits, kept) = (handle(&prefix), handle(&other));
    let mut slots = Slots::read(&cluster).await;
    let mut stored = Vec::new();
    for (limiter, opts, _, _) in [BUILTINS[0], BUILTINS[1]] {
        for i in 0..KEYS {
            let key = format!("client-{i}");
            for handle in [&limits, &kept] {
                assert!(
                    handle
                        .check(limit(limiter, opts), &key)
                        .await
                        .unwrap()
                        .is_allowed()
                );
            }
            for of in [&prefix, &other] {
                let name = stored_key(of, limiter, &opts_text(opts), "", &key);
                stored.push((of == &prefix, slots.owner(&name).await, name));
            }
        }
    }
    let owners: BTreeSet<u16> = stored.iter().map(|(_, owner, _)| *owner).collect();
    assert_eq!(owners, all_ports(&cluster));

    // One key per client and limiter, on whichever primary owns its slot.
    assert_eq!(limits.reset_all().await.unwrap(), 2 * KEYS as u64);
    for (reset, owner, name) in &stored {
        assert_eq!(node_holds(&cluster, *owner, name).await, !reset, "{name}");
    }
    assert_eq!(limits.reset_all().await.unwrap(), 0);
    let (limiter, opts, most, remaining) = BUILTINS[0];
    let fresh = limits
        .check(limit(limiter, opts), "client-0")
        .await
        .unwrap();
    assert_eq!(
        seen(&fresh),
        (true, most.to_owned(), remaining[0].to_owned())
    );
}

/// `reset_key` finds a client's keys of one limiter under every options on the primary that
/// owns their slot (every key of a client shares its tag), and deletes no other client's.
#[tokio::test]
async fn reset_key_forgets_a_client_on_the_primary_that_holds_it() {
    let cluster = RedisCluster::start();
    let prefix = unique_prefix("reset_key");
    let limits = PlugLimit::builder(cluster.pool())
        .prefix(&prefix)
        .build()
        .unwrap();
    let mut slots = Slots::read(&cluster).await;
    let options: [&[Opt]; 2] = [&[Opt::Int(1), Opt::Int(60)], &[Opt::Int(5), Opt::Int(60)]];
    let mut stored = Vec::new();
    for i in 0..KEYS {
        let key = format!("client-{i}");
        for opts in options {
            assert!(
                limits
                    .check(limit("fixed_window", opts), &key)
                    .await
                    .unwrap()
                    .is_allowed()
            );
            let name = stored_key(&prefix, "fixed_window", &opts_text(opts), "", &key);
            stored.push((i % 2 == 0, slots.owner(&name).await, name));
        }
    }
    let owners: BTreeSet<u16> = stored.iter().map(|(_, owner, _)| *owner).collect();
    assert_eq!(owners, all_ports(&cluster));
    for i in (0..KEYS).step_by(2) {
        let deleted = limits
            .reset_key("fixed_window", &format!("client-{i}"))
            .await
            .unwrap();
        assert_eq!(deleted, 2, "client-{i}");
    }
    for (reset, owner, name) in &stored {
        assert_eq!(node_holds(&cluster, *owner, name).await, !reset, "{name}");
    }
}

type Item = RateLimited<FixedWindow<5, 60>>;

async fn item(limited: Item) -> (Item, &'static str) {
    (limited, "item")
}

/// How many keys each master holds, in port order (`DBSIZE` on each node).
async fn keys_per_node(cluster: &RedisCluster) -> Vec<i64> {
    let mut sizes = Vec::new();
    for &port in cluster.ports() {
        let mut node = cluster.node(port).await;
        sizes.push(
            redis::cmd("DBSIZE")
                .query_async::<i64>(&mut node)
                .await
                .unwrap(),
        );
    }
    sizes
}

#[tokio::test]
async fn clients_of_a_parameterised_route_spread_over_every_master() {
    let cluster = RedisCluster::start();
    let limits = PlugLimit::builder(cluster.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/items/{id}", get(item))
        .with_state(limits);
    // `{id}` in the route, and braces in the clients' own keys: neither may pick the slot.
    for i in 0..300 {
        let client = if i % 2 == 0 {
            format!("client-{i}")
        } else {
            format!("{{same}}-{i}")
        };
        let reply = send_get(&app, &format!("/items/{i}"), &client).await;
        assert_eq!(reply.header("x-ratelimit-remaining"), Some("4"), "{client}");
    }
    let sizes = keys_per_node(&cluster).await;
    assert_eq!(sizes.iter().sum::<i64>(), 300);
    // Even is 100 a master; every one within 20% of it.
    assert!(
        sizes.iter().all(|&n| (80..=120).contains(&n)),
        "keys per master: {sizes:?}"
    );
}

/// `remaining` of a fixed window after `limits` peeks at it.
async fn fixed_window_left(limits: &PlugLimit, client: &str, opts: &[Opt]) -> String {
    let peek = limits
        .peek(limit("fixed_window", opts), client)
        .await
        .unwrap();
    seen(&peek).2
}

#[tokio::test]
async fn stacked_limits_of_one_slot_are_atomic_and_across_slots_keep_what_they_counted() {
    let cluster = RedisCluster::start();
    let prefix = unique_prefix("stack");
    let limits = PlugLimit::builder(cluster.pool())
        .prefix(&prefix)
        .build()
        .unwrap();
    let mut slots = Slots::read(&cluster).await;
    let window = [Opt::Int(5), Opt::Int(60)];
    let bucket = [Opt::Int(1), Opt::Int(60), Opt::Int(1)];

    // One client's limits share a hash tag, so a slot: one call, and a denial by the bucket
    // restores the window.
    let same_slot = [
        (limit("fixed_window", &window[..]), "ann"),
        (limit("token_bucket", &bucket[..]), "ann"),
    ];
    assert!(limits.check_all(&same_slot).await.unwrap().is_allowed());
    assert!(!limits.check_all(&same_slot).await.unwrap().is_allowed());
    assert!(!limits.check_all(&same_slot).await.unwrap().is_allowed());
    // Peeks answer as a next request would: 5 - 1 counted - 1.
    assert_eq!(fixed_window_left(&limits, "ann", &window).await, "3");

    // A team's limit in another slot: each slot's group is one call, in stack order. A denial
    // in the team's slot cannot undo what the client's slot already counted.
    let client_node = slots
        .owner(&stored_key(&prefix, "fixed_window", "5,60", "", "bob"))
        .await;
    let mut team = String::new();
    let mut team_node = client_node;
    for i in 0.. {
        team = format!("team-{i}");
        team_node = slots
            .owner(&stored_key(&prefix, "fixed_window", "5,60", "", &team))
            .await;
        if team_node != client_node {
            break;
        }
    }
    let team_window = [Opt::Int(1), Opt::Int(60)];
    let cross_slot = [
        (limit("fixed_window", &window[..]), "bob"),
        (limit("fixed_window", &team_window[..]), team.as_str()),
    ];
    assert!(limits.check_all(&cross_slot).await.unwrap().is_allowed());
    let denied = limits.check_all(&cross_slot).await.unwrap();
    assert_eq!(seen(&denied), (false, "1".to_owned(), "0".to_owned()));
    assert_eq!(
        fixed_window_left(&limits, "bob", &window).await,
        "2",
        "bob's node ({client_node}) and the team's ({team_node}): both requests counted for bob"
    );
}

//! Redis settings that break limits, said out loud: a `maxmemory-policy` that may evict
//! counters is read once in the background, warned of once, and answered by
//! `PlugLimit::redis_eviction` and the `plug_limit_redis_evicts` gauge.

use std::time::Duration;

use crate::metric_values::metric_values;
use deadpool_redis::redis::{self, aio::MultiplexedConnection};
use metrics_util::debugging::DebuggingRecorder;
use plug_limit::{EvictionPolicy, FixedWindow, PlugLimit, Store};
use plug_limit_tests::{Logs, RedisServer, checked_then_read, pool};

/// The lines of `logs` that speak of `maxmemory-policy`.
fn policy_lines(logs: &Logs) -> Vec<String> {
    logs.text()
        .lines()
        .filter(|line| line.contains("maxmemory-policy"))
        .map(|line| line.trim().to_owned())
        .collect()
}

/// The warning of `policy`, as the tests' subscriber writes it.
fn warning(policy: &str) -> String {
    format!(
        "WARN plug_limit: Redis's maxmemory-policy is `{policy}`: under memory pressure Redis \
         may evict rate-limit counters, and an evicted counter admits requests past its limit; \
         set `maxmemory-policy noeviction`, or give the limits a Redis of their own with enough \
         memory pool=\"default\" policy={policy}"
    )
}

/// Closes every client connection of the server but `admin`'s own, the backend's among them:
/// the next check connects anew.
async fn drop_clients(admin: &mut MultiplexedConnection) {
    let killed: u64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query_async(admin)
        .await
        .unwrap();
    assert!(killed >= 1, "the backend's connection was not closed");
}

#[tokio::test]
async fn noeviction_the_default_is_known_safe_without_a_word() {
    let redis = RedisServer::start();
    let (logs, _guard) = Logs::capture();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let limits = PlugLimit::builder(redis.pool()).build().unwrap();
    // Nothing connects before the first check.
    assert_eq!(limits.redis_eviction(), Some(EvictionPolicy::Unknown));
    assert_eq!(checked_then_read(&limits).await, EvictionPolicy::NoEviction);
    assert_eq!(policy_lines(&logs), Vec::<String>::new());
    let values = metric_values(&snapshotter);
    assert_eq!(
        values.get("gauge plug_limit_redis_evicts{pool=default}"),
        Some(&"0".to_owned()),
        "{values:?}"
    );
    assert_eq!(PlugLimit::memory().redis_eviction(), None);
}

#[tokio::test]
async fn an_evicting_policy_is_warned_of_once_and_answered() {
    for policy in ["allkeys-lru", "volatile-lru"] {
        let redis = RedisServer::start_with(&["--maxmemory-policy", policy]);
        let (logs, _guard) = Logs::capture();
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let _recording = metrics::set_default_local_recorder(&recorder);
        let limits = PlugLimit::builder(redis.pool()).build().unwrap();
        assert_eq!(
            checked_then_read(&limits).await,
            EvictionPolicy::Evicts(policy.to_owned())
        );
        // A second connection, and more checks: the policy is not read, nor warned of, again.
        let mut admin = redis.connection().await;
        let reads = redis.calls("config|get").await;
        drop_clients(&mut admin).await;
        for _ in 0..3 {
            assert!(
                limits
                    .check(FixedWindow::<5, 60>, "bob")
                    .await
                    .unwrap()
                    .is_allowed()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(redis.calls("config|get").await, reads, "{policy}");
        assert_eq!(policy_lines(&logs), [warning(policy)], "{policy}");
        assert_eq!(
            limits.redis_eviction(),
            Some(EvictionPolicy::Evicts(policy.to_owned()))
        );
        let values = metric_values(&snapshotter);
        assert_eq!(
            values.get("gauge plug_limit_redis_evicts{pool=default}"),
            Some(&"1".to_owned()),
            "{policy}: {values:?}"
        );
    }
}

#[tokio::test]
async fn an_applications_own_connection_is_read_too() {
    let redis = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lfu"]);
    let (logs, _guard) = Logs::capture();
    let own = redis.connection().await;
    let limits = PlugLimit::builder(Store::connection(own)).build().unwrap();
    assert_eq!(
        checked_then_read(&limits).await,
        EvictionPolicy::Evicts("allkeys-lfu".to_owned())
    );
    assert_eq!(policy_lines(&logs), [warning("allkeys-lfu")]);
}

#[tokio::test]
async fn a_policy_the_server_refuses_to_tell_is_unreadable_and_said_once() {
    let redis = RedisServer::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let mut admin = redis.connection().await;
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "limited", "on", ">pw", "~*", "+@all", "-config"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let (logs, _guard) = Logs::capture();
    let url = format!("redis://limited:pw@127.0.0.1:{}/", redis.port());
    let limits = PlugLimit::builder(pool(&url)).build().unwrap();
    // The check itself is decided as ever.
    assert_eq!(checked_then_read(&limits).await, EvictionPolicy::Unreadable);
    drop_clients(&mut admin).await;
    assert!(
        limits
            .check(FixedWindow::<5, 60>, "bob")
            .await
            .unwrap()
            .is_allowed()
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        policy_lines(&logs),
        [
            "INFO plug_limit: could not read Redis's maxmemory-policy: if it is not `noeviction`, \
             Redis may evict rate-limit counters under memory pressure, and an evicted counter \
             admits requests past its limit pool=\"default\" why=NoPerm: this user has no \
             permissions to run the 'config|get' command"
        ]
    );
    assert_eq!(limits.redis_eviction(), Some(EvictionPolicy::Unreadable));
}

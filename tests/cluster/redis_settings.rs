//! The `maxmemory-policy` of a cluster: every master keeps counters of its own, so every
//! master is read, and one that may evict them is found whichever node answers first.

use plug_limit::redis;
use plug_limit::{EvictionPolicy, PlugLimit};
use plug_limit_tests::{RedisCluster, checked_then_read, unique_prefix};

#[tokio::test]
async fn one_evicting_master_of_three_is_found() {
    let cluster = RedisCluster::start();
    let masters = cluster.ports().to_vec();
    assert_eq!(masters.len(), 3);
    // Each master evicts in its turn: a read of one node at random would find it one time in
    // three, all three rounds one time in 27.
    for &evicting in &masters {
        for &port in &masters {
            let policy = if port == evicting {
                "allkeys-lru"
            } else {
                "noeviction"
            };
            let _: () = redis::cmd("CONFIG")
                .arg(&["SET", "maxmemory-policy", policy])
                .query_async(&mut cluster.node(port).await)
                .await
                .unwrap();
        }
        let limits = PlugLimit::builder(cluster.pool())
            .prefix(unique_prefix("eviction"))
            .build()
            .unwrap();
        assert_eq!(
            checked_then_read(&limits).await,
            EvictionPolicy::Evicts("allkeys-lru".to_owned()),
            "master {evicting} evicts"
        );
    }
}

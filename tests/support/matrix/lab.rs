//! The servers of one run, and the incident done to them on the plan's schedule.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_redis::redis::{self, PushInfo, PushKind};
use plug_limit::Store;
use tokio::time::Instant;

use super::deployment::CLIENT;
use super::plan::{Incident, Plan, Topology};
use crate::{Fault, FaultProxy, RedisCluster, RedisServer, SentinelSet, pool};

/// Where a run takes place: fresh servers for each run, so no run inherits another's state.
#[derive(Debug)]
pub enum Lab {
    /// One server behind a fault proxy; a second, empty one for [`Incident::ReadOnly`].
    Single {
        /// The server.
        server: RedisServer,
        /// The proxy every instance reaches it through.
        proxy: FaultProxy,
        /// The empty primary the server is made a replica of.
        decoy: Option<RedisServer>,
    },
    /// A cluster whose first master holds the shared client's slot.
    Cluster(RedisCluster),
    /// A primary, its replica and a Sentinel.
    Sentinel(SentinelSet),
}

/// When the incident began and ended (the store known to serve again), from the start of
/// the load, and the shared client's keys evicted meanwhile.
#[derive(Debug, Clone, Copy)]
pub struct Timeline {
    /// The incident's start.
    pub began: Duration,
    /// Its end.
    pub ended: Duration,
    /// Keys of the shared client's the server evicted.
    pub evicted: u64,
}

impl Lab {
    /// Starts the servers `plan` needs.
    pub async fn start(plan: &Plan) -> Self {
        match plan.topology() {
            Topology::Single => {
                let server = tokio::task::block_in_place(RedisServer::start);
                let proxy = FaultProxy::start(server.addr());
                Self::Single {
                    server,
                    proxy,
                    decoy: None,
                }
            }
            Topology::Cluster => {
                let cluster = tokio::task::block_in_place(|| {
                    if plan.incident == Incident::ReplicaPromoted {
                        RedisCluster::start_with_replica()
                    } else {
                        RedisCluster::start()
                    }
                });
                Self::Cluster(cluster)
            }
            Topology::Sentinel => Self::Sentinel(tokio::task::block_in_place(SentinelSet::start)),
        }
    }

    /// A store for one instance: a pool of its own.
    #[must_use]
    pub fn store(&self) -> Store {
        match self {
            Self::Single { proxy, .. } => Store::from(pool(&proxy.url())),
            Self::Cluster(cluster) => Store::from(cluster.pool()),
            Self::Sentinel(set) => Store::from(set.pool()),
        }
    }

    /// Does `plan`'s incident at its time from `start`, then undoes it, and returns once the
    /// store is known to serve again.
    pub async fn stage(&mut self, plan: &Plan, start: Instant) -> Timeline {
        tokio::time::sleep_until(start + plan.incident_at).await;
        let began = start.elapsed();
        let until = start + plan.incident_at + plan.incident_for;
        let mut evicted = 0;
        match self {
            Self::Single {
                server,
                proxy,
                decoy,
            } => match plan.incident {
                Incident::Nothing => tokio::time::sleep_until(until).await,
                Incident::Latency(delay) => {
                    proxy.set(Fault::Latency(delay));
                    tokio::time::sleep_until(until).await;
                }
                Incident::Jitter => {
                    for (step, delay) in plan.jitter.iter().enumerate() {
                        proxy.set(Fault::Latency(*delay));
                        let next = start
                            + plan.incident_at
                            + Duration::from_millis(25) * (step as u32 + 1);
                        tokio::time::sleep_until(next.min(until)).await;
                    }
                    tokio::time::sleep_until(until).await;
                }
                Incident::Resets | Incident::Partition | Incident::LostReplies => {
                    proxy.set(match plan.incident {
                        Incident::Resets => Fault::Refuse,
                        Incident::Partition => Fault::Partition,
                        _ => Fault::DropLaterReplies,
                    });
                    tokio::time::sleep_until(until).await;
                }
                Incident::Pause => {
                    server.pause();
                    tokio::time::sleep_until(until).await;
                    server.resume();
                }
                Incident::KillRestart => {
                    tokio::task::block_in_place(|| server.stop());
                    tokio::time::sleep_until(until).await;
                    tokio::task::block_in_place(|| server.restart());
                }
                Incident::ScriptFlush => {
                    let mut conn = server.connection().await;
                    while Instant::now() < until {
                        let _: redis::RedisResult<()> = redis::cmd("SCRIPT")
                            .arg("FLUSH")
                            .query_async(&mut conn)
                            .await;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                Incident::OutOfMemory => {
                    let mut conn = server.connection().await;
                    config_set(&mut conn, "maxmemory", "1").await;
                    tokio::time::sleep_until(until).await;
                    config_set(&mut conn, "maxmemory", "0").await;
                }
                Incident::ReadOnly => {
                    let primary = tokio::task::block_in_place(RedisServer::start);
                    let mut conn = server.connection().await;
                    let _: () = redis::cmd("REPLICAOF")
                        .arg("127.0.0.1")
                        .arg(primary.port())
                        .query_async(&mut conn)
                        .await
                        .expect("REPLICAOF");
                    *decoy = Some(primary);
                    tokio::time::sleep_until(until).await;
                    let _: () = redis::cmd("REPLICAOF")
                        .arg("NO")
                        .arg("ONE")
                        .query_async(&mut conn)
                        .await
                        .expect("REPLICAOF NO ONE");
                }
                Incident::Eviction => evicted = evict_until(server, until).await,
                other => unreachable!("{other:?} does not run on a single server"),
            },
            Self::Cluster(cluster) => {
                let first = cluster.ports()[0];
                tokio::task::block_in_place(|| cluster.stop(first));
                if plan.incident == Incident::ReplicaPromoted {
                    let replica = cluster.replica().expect("a cluster with a replica");
                    wait_until(|| cluster.is_master(replica)).await;
                    // Promoted, and serving its slots: the cluster agrees.
                    tokio::task::block_in_place(|| cluster.wait_serving(replica));
                } else {
                    tokio::time::sleep_until(until).await;
                    tokio::task::block_in_place(|| {
                        cluster.restart(first);
                        cluster.wait_serving(first);
                    });
                }
            }
            Self::Sentinel(set) => {
                let promoted = set.replica.port();
                tokio::task::block_in_place(|| set.primary.stop());
                wait_until(|| set.serves_as_primary(promoted)).await;
            }
        }
        if let Self::Single { proxy, .. } = self {
            proxy.set(Fault::Forward);
        }
        Timeline {
            began,
            ended: start.elapsed(),
            evicted,
        }
    }
}

async fn config_set(conn: &mut redis::aio::MultiplexedConnection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async(conn)
        .await
        .expect("CONFIG SET");
}

/// Lets the server evict any key (`allkeys-random`) under a `maxmemory` just above what it
/// uses, and fills it until `until`: keys go, perhaps the shared client's. Returns how many of
/// the shared client's went, as the server's keyspace notifications name them (the filler's
/// and the one-request clients' evictions give the shared client no budget).
async fn evict_until(server: &RedisServer, until: Instant) -> u64 {
    let mut conn = server.connection().await;
    config_set(&mut conn, "notify-keyspace-events", "Ee").await;
    let shared_evicted = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&shared_evicted);
    let config = redis::AsyncConnectionConfig::new().set_push_sender(move |push: PushInfo| {
        let shared = push.kind == PushKind::Message
            && matches!(push.data.get(1), Some(redis::Value::BulkString(key))
                if key.windows(CLIENT.len()).any(|part| part == CLIENT.as_bytes()));
        if shared {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        Ok::<(), redis::aio::SendError>(())
    });
    // Pushes need RESP3.
    let mut events = redis::Client::open(format!("{}?protocol=resp3", server.url()))
        .expect("redis url")
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("a connection for keyspace notifications");
    events
        .subscribe("__keyevent@0__:evicted")
        .await
        .expect("SUBSCRIBE to evictions");
    let stat = |info: &str, field: &str| -> u64 {
        info.lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    let reader = conn.clone();
    let read = |section: &'static str| {
        let mut conn = reader.clone();
        async move {
            redis::cmd("INFO")
                .arg(section)
                .query_async::<String>(&mut conn)
                .await
                .expect("INFO")
        }
    };
    let before = stat(&read("stats").await, "evicted_keys:");
    let used = stat(&read("memory").await, "used_memory:");
    config_set(&mut conn, "maxmemory-policy", "allkeys-random").await;
    config_set(&mut conn, "maxmemory", &(used + 256 * 1024).to_string()).await;
    let filler = "x".repeat(4 * 1024);
    let mut next = 0_u64;
    while Instant::now() < until {
        for _ in 0..16 {
            let _: redis::RedisResult<()> = redis::cmd("SET")
                .arg(format!("filler:{next}"))
                .arg(&filler)
                .query_async(&mut conn)
                .await;
            next += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    config_set(&mut conn, "maxmemory", "0").await;
    config_set(&mut conn, "maxmemory-policy", "noeviction").await;
    // Every notification was written before this reply: one more round trip on the events'
    // connection reads them all.
    let _: () = redis::cmd("PING")
        .query_async(&mut events)
        .await
        .expect("PING");
    let evicted = stat(&read("stats").await, "evicted_keys:") - before;
    let shared = shared_evicted.load(Ordering::Relaxed);
    assert!(shared <= evicted, "{shared} of {evicted} evictions");
    shared
}

/// Polls `ready` every 50 ms, for up to 30 s.
async fn wait_until(mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !tokio::task::block_in_place(&mut ready) {
        assert!(
            Instant::now() < deadline,
            "the store did not serve again within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

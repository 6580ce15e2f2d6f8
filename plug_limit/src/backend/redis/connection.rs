//! The link to one Redis: where its multiplexed connection comes from, checking one out,
//! and when it is replaced.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

#[cfg(feature = "cluster")]
use deadpool_redis::cluster;
use deadpool_redis::redis::Value;
#[cfg(feature = "sentinel")]
use deadpool_redis::sentinel;
use deadpool_redis::{Connection, Pool};

use super::eviction::Eviction;
use super::multiplexed::{Multiplexed, OwnConnection};
use crate::error::Error;

/// A connection idle this long is checked with `PING` before a decision is sent on it: a
/// decision is never sent twice, so it must not be the request that finds a connection dead.
const IDLE: Duration = Duration::from_secs(1);

/// Where the shared connection comes from: a deadpool pool, or the application's own
/// connection.
#[derive(Clone)]
pub(crate) enum ConnectionSource {
    Single(Pool),
    #[cfg(feature = "cluster")]
    Cluster(cluster::Pool),
    /// A pool whose every connection goes to the primary Sentinel names at the time.
    #[cfg(feature = "sentinel")]
    Sentinel(sentinel::Pool),
    Own(Box<dyn OwnConnection>),
}

/// Checking a connection out of a deadpool pool costs a `PING` + `UNWATCH` round trip (its
/// recycle check), which would double the cost of every decision. So one connection is taken
/// out of the pool and shared: a multiplexed connection pipelines concurrent requests by
/// itself. When it breaks, a fresh one is taken from the pool, which reconnects as usual.
///
/// A cluster connection is shared the same way: it multiplexes too, routes each `EVALSHA` to
/// the node owning the slot of `KEYS[1]`, and follows `MOVED` by itself. It holds one
/// connection per node and repairs each itself, so it is replaced only when it refuses a
/// command at once (its driver is gone), never for one node's failure or silence, and it is
/// not pinged when idle.
pub(crate) struct Link {
    source: ConnectionSource,
    current: Mutex<Option<Current>>,
    // Serialises checkouts, so a burst of first requests takes one connection, not one each.
    checkout: tokio::sync::Mutex<()>,
    /// The client's own response timeout, set above the backend's so that only the backend's
    /// timeout decides when a call has failed.
    response_timeout: Duration,
    generations: AtomicU64,
    /// How many replies have arrived, on any connection: a call that timed out with this
    /// unchanged heard nothing at all, and its connection is taken for dead.
    replies: AtomicU64,
    /// When a reply last arrived, in milliseconds since `epoch`.
    last_reply_ms: AtomicU64,
    epoch: Instant,
    /// The server's `maxmemory-policy`, read on the first connection made.
    eviction: Arc<Eviction>,
}

/// The shared connection and which checkout made it.
#[derive(Clone)]
pub(crate) struct Current {
    pub(crate) conn: Multiplexed,
    pub(crate) generation: u64,
}

impl Link {
    pub(crate) fn new(
        source: ConnectionSource,
        response_timeout: Duration,
        eviction: Arc<Eviction>,
    ) -> Self {
        Self {
            source,
            current: Mutex::new(None),
            checkout: tokio::sync::Mutex::new(()),
            response_timeout,
            generations: AtomicU64::new(0),
            replies: AtomicU64::new(0),
            last_reply_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            eviction,
        }
    }

    /// The shared connection, checked out first if there is none, and checked with `PING` if
    /// it has been idle: a dead one is replaced before anything that counts is sent on it.
    pub(crate) async fn get(&self) -> Result<Current, Error> {
        let current = self.lock().clone();
        let Some(mut current) = current else {
            // Boxed: the pool's checkout future is kilobytes, and inline it would be part of
            // every check's future, moved and allocated with it on every request.
            return Box::pin(self.checkout()).await;
        };
        // A cluster connection is one connection per node, each repaired by the cluster
        // client; a `PING` would go to every master and fail while one is down.
        if self.idle_for() < IDLE || self.is_cluster() {
            return Ok(current);
        }
        // Boxed for the same reason: rare, and kept out of every check's future.
        Box::pin(async move {
            let ping = deadpool_redis::redis::cmd("PING");
            // Half the call's time at most: a silent connection must leave time for a new one.
            let deadline = self.response_timeout / 4;
            let pong = tokio::time::timeout(deadline, ping.query_async::<Value>(&mut current.conn));
            if matches!(pong.await, Ok(Ok(_))) {
                self.replied();
                return Ok(current);
            }
            // A PING counts nothing: after it fails, a fresh connection is safe to try.
            self.forget(&current);
            self.checkout().await
        })
        .await
    }

    /// How many replies have arrived so far: see [`forget_if_silent`](Self::forget_if_silent).
    pub(crate) fn replies(&self) -> u64 {
        self.replies.load(Ordering::Relaxed)
    }

    /// Drops the connection of `generation` if no reply at all arrived since `replies` was
    /// read: a call that timed out on it heard nothing, so the connection is silent (a dead
    /// host, a lost route), not merely slow. Dropping it resends nothing.
    ///
    /// Not a cluster connection: it holds one connection per node and repairs each itself, and
    /// a replacement would cost the checks of every healthy master a new connection to each.
    pub(crate) fn forget_if_silent(&self, generation: u64, replies: u64) {
        if !self.is_cluster() && self.replies() == replies {
            self.forget_generation(generation);
        }
    }

    /// A command on `current` failed with an error that says its connection is broken: on a
    /// single Redis the shared connection is dropped, so the next check takes a fresh one. On
    /// a cluster the broken connection was one node's, which the cluster client repairs by
    /// itself: the shared connection is kept.
    pub(crate) fn failed(&self, current: &Current) {
        if !self.is_cluster() {
            self.forget(current);
        }
    }

    /// The shared connection, if there is one now.
    #[cfg(feature = "cluster")]
    pub(crate) fn current(&self) -> Option<Current> {
        self.lock().clone()
    }

    /// A reply arrived on the shared connection.
    pub(crate) fn replied(&self) {
        self.replies.fetch_add(1, Ordering::Relaxed);
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_reply_ms.store(now, Ordering::Relaxed);
    }

    /// Drops `current` if it is still the shared connection, so the next check takes a fresh
    /// one; a newer connection made meanwhile is kept.
    pub(crate) fn forget(&self, current: &Current) {
        self.forget_generation(current.generation);
    }

    /// Drops the shared connection if `generation` made it.
    fn forget_generation(&self, generation: u64) {
        let mut shared = self.lock();
        if shared
            .as_ref()
            .is_some_and(|shared| shared.generation == generation)
        {
            *shared = None;
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        match self.source {
            ConnectionSource::Single(_) | ConnectionSource::Own(_) => false,
            #[cfg(feature = "cluster")]
            ConnectionSource::Cluster(_) => true,
            #[cfg(feature = "sentinel")]
            ConnectionSource::Sentinel(_) => false,
        }
    }

    /// The server's `maxmemory-policy`, as far as it is known.
    pub(crate) fn eviction(&self) -> &Eviction {
        &self.eviction
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.lock().is_some()
    }

    /// The kind of connection, and the pool's status (none for the application's own).
    pub(crate) fn status(&self) -> (&'static str, Option<deadpool_redis::Status>) {
        match &self.source {
            ConnectionSource::Single(pool) => ("single", Some(pool.status())),
            #[cfg(feature = "cluster")]
            ConnectionSource::Cluster(pool) => ("cluster", Some(pool.status())),
            #[cfg(feature = "sentinel")]
            ConnectionSource::Sentinel(pool) => ("sentinel", Some(pool.status())),
            ConnectionSource::Own(_) => ("own connection", None),
        }
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_reply_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    async fn checkout(&self) -> Result<Current, Error> {
        let _checkout = self.checkout.lock().await;
        if let Some(current) = self.lock().clone() {
            return Ok(current);
        }
        let conn = match &self.source {
            ConnectionSource::Single(pool) => {
                let mut conn = Connection::take(pool.get().await?);
                conn.set_response_timeout(self.response_timeout);
                Multiplexed::Single(conn)
            }
            #[cfg(feature = "cluster")]
            ConnectionSource::Cluster(pool) => {
                Multiplexed::Cluster(cluster::Connection::take(pool.get().await?))
            }
            // Made afresh, so Sentinel names the primary of the moment.
            #[cfg(feature = "sentinel")]
            ConnectionSource::Sentinel(pool) => {
                let mut conn = sentinel::Connection::take(pool.get().await?);
                conn.set_response_timeout(self.response_timeout);
                Multiplexed::Single(conn)
            }
            // Its own reconnection, if any, is its own: the backend's timeout bounds each call.
            ConnectionSource::Own(conn) => Multiplexed::Own(conn.clone()),
        };
        let current = Current {
            conn,
            generation: self.generations.fetch_add(1, Ordering::Relaxed),
        };
        self.replied();
        *self.lock() = Some(current.clone());
        // Here, where connections are made, rather than on a check's path: read in the
        // background once, it costs checks nothing.
        self.eviction.connected(&current.conn);
        Ok(current)
    }

    fn lock(&self) -> MutexGuard<'_, Option<Current>> {
        // The guarded value is a plain `Option` that no panic can leave half-written.
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

//! The ways to make a [`PlugLimit`]: with the default settings, or a [`Builder`] for each kind
//! of store.

use deadpool_redis::Pool;

use super::handler_uses::warn_unless_builtin;
use deadpool_redis::redis::aio::ConnectionLike;

use super::Builder;
use crate::handle::PlugLimit;

impl PlugLimit {
    /// Limits on the Redis behind `pool`, with the default settings: always enabled, keys by
    /// peer IP, fail open, 500 ms timeout.
    ///
    /// No connection is made until the first check.
    ///
    /// It knows only the built-in limiters: when a `#[rate_limit]` handler of this program
    /// uses another, it logs a warning naming the handler (it has no error to return). Register
    /// custom limiters with [`PlugLimit::builder`], whose [`build`](Builder::build) refuses
    /// such a handler with an error (see [`Builder::check_handlers`]).
    #[must_use]
    pub fn redis(pool: Pool) -> Self {
        warn_unless_builtin();
        Builder::new(pool).build_default()
    }

    /// Limits kept in this process's memory, with the default settings: for a single
    /// instance, tests and local development. Every built-in limiter decides exactly as its
    /// Lua script does on Redis; custom Lua limiters need Redis.
    ///
    /// As [`redis`](Self::redis), it warns of a `#[rate_limit]` handler of this program
    /// that uses a limiter that is not built in.
    #[must_use]
    pub fn memory() -> Self {
        warn_unless_builtin();
        Builder::memory().build_default()
    }

    /// A [`Builder`] for limits on the Redis behind `pool`, with every setting: enabled flag,
    /// prefix, timeout, key, hook, failure policy, log level, clock, and custom limiters.
    pub fn builder(pool: Pool) -> Builder {
        Builder::new(pool)
    }

    /// A [`Builder`] for limits kept in this process's memory.
    pub fn memory_builder() -> Builder {
        Builder::memory()
    }

    /// A builder of limits decided in Redis over a connection the application already holds
    /// (the seed's `cmd`): any redis-rs async connection that is cheap to clone and shares one
    /// socket between its clones, e.g. a `redis::aio::ConnectionManager` or a
    /// `MultiplexedConnection`.
    ///
    /// Every call on it keeps the rules of a pooled one: `EVALSHA`, then `EVAL` on `NOSCRIPT` in
    /// the same call; never resent once it may have reached Redis; bounded by the
    /// [timeout](crate::Builder::timeout); behind the circuit breaker. What differs is
    /// reconnection: from a pool, a connection that went silent is replaced by a fresh one; yours
    /// is yours to replace, so prefer one that reconnects by itself (`ConnectionManager`). A
    /// `MultiplexedConnection` that lost its socket keeps failing, by the failure policy, until
    /// the application makes a new one.
    ///
    /// It is meant for one Redis server: a cluster connection of your own decides as well, but
    /// [`PlugLimit::reset_all`](crate::PlugLimit::reset_all) would scan only the node it reaches;
    /// give a cluster to [`PlugLimit::cluster_builder`](crate::PlugLimit::cluster_builder).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use plug_limit::PlugLimit;
    ///
    /// # async fn make() -> Result<PlugLimit, Box<dyn std::error::Error>> {
    /// let client = plug_limit::redis::Client::open("redis://127.0.0.1:6379/")?;
    /// let conn = client.get_multiplexed_async_connection().await?;
    /// let limits = PlugLimit::connection_builder(conn).prefix("myapp").build()?;
    /// # Ok(limits)
    /// # }
    /// ```
    pub fn connection_builder(
        conn: impl ConnectionLike + Clone + Send + Sync + 'static,
    ) -> Builder {
        Builder::connection(conn)
    }

    /// Limits on the Redis Cluster behind `pool`, with the default settings of
    /// [`redis`](Self::redis).
    ///
    /// Every check is one `EVALSHA` on a shared cluster connection, routed to the node owning
    /// the slot of its key. Every key of one request carries the same hash tag, chosen by the
    /// library, so a custom script given several keys always finds them in one slot.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use plug_limit::PlugLimit;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let nodes = ["redis://cache-1/", "redis://cache-2/", "redis://cache-3/"];
    /// let pool = deadpool_redis::cluster::Config::from_urls(nodes.map(String::from).to_vec())
    ///     .create_pool(Some(deadpool_redis::Runtime::Tokio1))?;
    /// let limits = PlugLimit::redis_cluster(pool);
    /// # let _ = limits;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// As [`redis`](Self::redis), it warns of a `#[rate_limit]` handler of this program
    /// that uses a limiter that is not built in.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    #[must_use]
    pub fn redis_cluster(pool: deadpool_redis::cluster::Pool) -> Self {
        warn_unless_builtin();
        Builder::cluster(pool).build_default()
    }

    /// A [`Builder`] for limits on the Redis Cluster behind `pool`, with every setting of
    /// [`builder`](Self::builder). A limiter's own [`pool`](crate::Limiter::pool) is still a
    /// single Redis.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub fn cluster_builder(pool: deadpool_redis::cluster::Pool) -> Builder {
        Builder::cluster(pool)
    }
}

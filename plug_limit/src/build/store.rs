//! [`Store`]: where a [`Builder`](crate::Builder)'s limits are kept.

use deadpool_redis::Pool;
use deadpool_redis::redis::aio::ConnectionLike;

use crate::backend::ConnectionSource;

/// Where limits are kept, for [`PlugLimit::builder`](crate::PlugLimit::builder): a Redis pool
/// (a `deadpool_redis::Pool` converts), a Redis Cluster pool (feature `cluster`), a Redis
/// Sentinel pool (feature `sentinel`), a connection
/// the application already holds ([`connection`](Self::connection)), or this process's memory
/// ([`memory`](Self::memory)).
///
/// # Example
///
/// ```
/// use plug_limit::{PlugLimit, Store};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let in_process = PlugLimit::builder(Store::memory()).prefix("app").build()?;
/// let pool = deadpool_redis::Config::from_url("redis://127.0.0.1:6379/")
///     .create_pool(Some(deadpool_redis::Runtime::Tokio1))?;
/// let shared = PlugLimit::builder(pool).prefix("app").build()?;
/// # let _ = (in_process, shared);
/// # Ok(())
/// # }
/// ```
pub struct Store(pub(super) Kind);

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.0 {
            Kind::Redis(_) => "redis",
            Kind::Memory => "memory",
        };
        f.debug_tuple("Store").field(&kind).finish()
    }
}

/// What a [`Store`] is.
pub(super) enum Kind {
    Redis(ConnectionSource),
    Memory,
}

impl Store {
    /// This process's memory: for a single instance, tests and local development. Every
    /// built-in limiter decides exactly as its Lua script does on Redis; custom Lua limiters
    /// need Redis.
    #[must_use]
    pub fn memory() -> Self {
        Self(Kind::Memory)
    }

    /// A connection the application already holds (the seed's `cmd`): any redis-rs async
    /// connection that is cheap to clone and shares one socket between its clones, e.g. a
    /// `redis::aio::ConnectionManager` or a `MultiplexedConnection`.
    ///
    /// Every call on it keeps the rules of a pooled one: `EVALSHA`, then `EVAL` on `NOSCRIPT`
    /// in the same call; never resent once it may have reached Redis; bounded by the
    /// [timeout](crate::Builder::timeout); behind the circuit breaker. What differs is
    /// reconnection: from a pool, a connection that went silent is replaced by a fresh one;
    /// yours is yours to replace, so prefer one that reconnects by itself
    /// (`ConnectionManager`). A `MultiplexedConnection` that lost its socket keeps failing, by
    /// the failure policy, until the application makes a new one.
    ///
    /// It is meant for one Redis server: a cluster connection of your own decides as well, but
    /// [`PlugLimit::reset_all`](crate::PlugLimit::reset_all) would scan only the node it
    /// reaches; give a cluster as its pool.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use plug_limit::{PlugLimit, Store};
    ///
    /// # async fn make() -> Result<PlugLimit, Box<dyn std::error::Error>> {
    /// let client = plug_limit::redis::Client::open("redis://127.0.0.1:6379/")?;
    /// let conn = client.get_multiplexed_async_connection().await?;
    /// let limits = PlugLimit::builder(Store::connection(conn)).prefix("myapp").build()?;
    /// # Ok(limits)
    /// # }
    /// ```
    #[must_use]
    pub fn connection(conn: impl ConnectionLike + Clone + Send + Sync + 'static) -> Self {
        Self(Kind::Redis(ConnectionSource::Own(Box::new(conn))))
    }
}

impl From<Pool> for Store {
    fn from(pool: Pool) -> Self {
        Self(Kind::Redis(ConnectionSource::Single(pool)))
    }
}

#[cfg(feature = "cluster")]
#[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
impl From<deadpool_redis::cluster::Pool> for Store {
    fn from(pool: deadpool_redis::cluster::Pool) -> Self {
        Self(Kind::Redis(ConnectionSource::Cluster(pool)))
    }
}

/// One Redis with replicas under Sentinel (feature `sentinel`): each connection the pool makes
/// asks Sentinel for the current primary. After a failover the connection to the old primary
/// breaks (it is gone, or Sentinel closed its clients as it made it a replica), and the next
/// check takes a connection to the promoted one (see the failures guide).
#[cfg(feature = "sentinel")]
#[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
impl From<deadpool_redis::sentinel::Pool> for Store {
    fn from(pool: deadpool_redis::sentinel::Pool) -> Self {
        Self(Kind::Redis(ConnectionSource::Sentinel(pool)))
    }
}

//! The ways to make a [`PlugLimit`]: with the default settings, on Redis or in memory, or a
//! [`Builder`] for any [`Store`].

use deadpool_redis::Pool;

use super::handler_uses::warn_unless_builtin;
use super::{Builder, Store};
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
        Builder::new(pool.into()).build_default()
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
        Builder::new(Store::memory()).build_default()
    }

    /// A [`Builder`] for limits kept in `store`, with every setting: enabled flag, prefix,
    /// timeout, key, hook, failure policy, log level, clock, and custom limiters. `store` is a
    /// Redis pool, a Redis Cluster pool (feature `cluster`: every check is one `EVALSHA` on a
    /// shared cluster connection, routed to the node owning its key's slot), a connection
    /// ([`Store::connection`]) or [`Store::memory`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// use plug_limit::{PlugLimit, Store};
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let nodes = ["redis://cache-1/", "redis://cache-2/", "redis://cache-3/"];
    /// # #[cfg(feature = "cluster")]
    /// let pool = deadpool_redis::cluster::Config::from_urls(nodes.map(String::from).to_vec())
    ///     .create_pool(Some(deadpool_redis::Runtime::Tokio1))?;
    /// # #[cfg(not(feature = "cluster"))]
    /// # let pool = Store::memory();
    /// let limits = PlugLimit::builder(pool).prefix("myapp").build()?;
    /// # let _ = (limits, nodes);
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(store: impl Into<Store>) -> Builder {
        Builder::new(store.into())
    }
}

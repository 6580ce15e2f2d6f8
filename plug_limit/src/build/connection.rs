//! [`RedisConnection`]: a Redis connection the application already holds, instead of a pool.

use deadpool_redis::redis::aio::ConnectionLike;

/// A connection the application already holds, for
/// [`PlugLimit::connection_builder`](crate::PlugLimit::connection_builder) and
/// [`Limiter::connection`](crate::Limiter::connection) (the seed's `cmd`): any redis-rs
/// async connection that is cheap to clone and shares one socket between its clones, e.g. a
/// `redis::aio::ConnectionManager` or a `MultiplexedConnection`.
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
/// Implemented for every type that qualifies; it is not to be implemented by hand.
pub trait RedisConnection: ConnectionLike + Clone + Send + Sync + 'static {}

impl<C> RedisConnection for C where C: ConnectionLike + Clone + Send + Sync + 'static {}

//! A Redis connection the application already holds, instead of a pool.

use deadpool_redis::redis::aio::ConnectionLike;

/// A connection the application already holds (the seed's `cmd`): any redis-rs async
/// connection that is cheap to clone and shares one socket between its clones (see
/// [`PlugLimit::connection_builder`](crate::PlugLimit::connection_builder)); implemented for
/// every type that qualifies.
pub(crate) trait RedisConnection: ConnectionLike + Clone + Send + Sync + 'static {}

impl<C> RedisConnection for C where C: ConnectionLike + Clone + Send + Sync + 'static {}

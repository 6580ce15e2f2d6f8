//! One multiplexed connection to Redis (or to a cluster, or the application's own), as every
//! call shares it: a cheap clone of a handle.

#[cfg(feature = "cluster")]
use deadpool_redis::cluster::ClusterConnection;
use deadpool_redis::redis::aio::{ConnectionLike, MultiplexedConnection};
use deadpool_redis::redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// A cheap clone of a handle to one multiplexer.
#[derive(Clone)]
pub(crate) enum Multiplexed {
    Single(MultiplexedConnection),
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
    Own(Box<dyn OwnConnection>),
}

/// An application's own connection (a `ConnectionManager`, a multiplexed connection, ...):
/// cloned for use, never replaced, since only the application knows how to make one.
pub(crate) trait OwnConnection: ConnectionLike + Send + Sync + 'static {
    fn clone_box(&self) -> Box<dyn OwnConnection>;
}

impl<C> OwnConnection for C
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn clone_box(&self) -> Box<dyn OwnConnection> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn OwnConnection> {
    fn clone(&self) -> Self {
        (**self).clone_box()
    }
}

impl ConnectionLike for Multiplexed {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => conn.req_packed_command(cmd),
            Self::Own(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(cmd, offset, count),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
            Self::Own(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => conn.get_db(),
            Self::Own(conn) => conn.get_db(),
        }
    }
}

/// Sends `cmd` on `conn`.
pub(crate) async fn query(cmd: &Cmd, conn: &mut Multiplexed) -> RedisResult<Value> {
    cmd.query_async(conn).await
}

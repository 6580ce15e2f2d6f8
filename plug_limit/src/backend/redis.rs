//! The Redis backend: scripts evaluated by SHA1 on one shared multiplexed connection, to a
//! single Redis or (feature `cluster`) to a Redis Cluster.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use deadpool_redis::redis::aio::{ConnectionLike, MultiplexedConnection};
use deadpool_redis::redis::{
    Cmd, ErrorKind, Pipeline, RedisFuture, RedisResult, Script, ServerErrorKind, Value,
};
use deadpool_redis::{Connection, Pool};
#[cfg(feature = "cluster")]
use deadpool_redis::{cluster, cluster::ClusterConnection};

use super::Call;
use crate::clock::Clock;
use crate::error::Error;
use crate::limit::Opt;
use crate::outcome::{Outcome, parse_reply};

/// Runs limiter scripts on Redis.
///
/// Checking a connection out of a deadpool pool costs a `PING` + `UNWATCH` round trip (its
/// recycle check), which would double the cost of every decision. So the backend takes one
/// connection out of the pool and shares it: a multiplexed connection pipelines concurrent
/// requests by itself. When that connection breaks, the backend takes a fresh one from the
/// pool, which recycles or reconnects as usual.
///
/// A cluster connection is shared the same way: it multiplexes too, routes each `EVALSHA` to
/// the node owning the slot of `KEYS[1]`, and follows `MOVED` by itself.
pub(crate) struct RedisBackend {
    pool: Pools,
    /// The most a call may take, connection included.
    timeout: Duration,
    /// Set: built-ins decide by this clock instead of the server's `TIME`.
    clock: Option<Arc<dyn Clock>>,
    shared: Mutex<Option<Shared>>,
    // Serialises checkouts, so a burst of first requests takes one connection, not one each.
    checkout: tokio::sync::Mutex<()>,
}

enum Pools {
    Single(Pool),
    #[cfg(feature = "cluster")]
    Cluster(cluster::Pool),
}

/// The connection every check shares; a cheap clone of a handle to one multiplexer.
#[derive(Clone)]
enum Shared {
    Single(MultiplexedConnection),
    #[cfg(feature = "cluster")]
    Cluster(ClusterConnection),
}

impl ConnectionLike for Shared {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => conn.req_packed_command(cmd),
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
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            #[cfg(feature = "cluster")]
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

impl RedisBackend {
    pub(crate) fn new(pool: Pool, timeout: Duration, clock: Option<Arc<dyn Clock>>) -> Self {
        Self::with_pool(Pools::Single(pool), timeout, clock)
    }

    #[cfg(feature = "cluster")]
    pub(crate) fn cluster(
        pool: cluster::Pool,
        timeout: Duration,
        clock: Option<Arc<dyn Clock>>,
    ) -> Self {
        Self::with_pool(Pools::Cluster(pool), timeout, clock)
    }

    fn with_pool(pool: Pools, timeout: Duration, clock: Option<Arc<dyn Clock>>) -> Self {
        Self {
            pool,
            timeout,
            clock,
            shared: Mutex::new(None),
            checkout: tokio::sync::Mutex::new(()),
        }
    }

    /// Evaluates `call` in one `EVALSHA` round trip, within the timeout.
    ///
    /// A built-in gets `ARGV = [opts..., cost, now_ms]`; both trailing values are optional, so
    /// the seed's plain `ARGV = opts` call stays valid and sends nothing extra.
    pub(crate) async fn eval(&self, call: Call<'_>) -> Result<Outcome, Error> {
        let now_ms = self.clock.as_ref().map(|clock| clock.now_ms());
        let extra = [
            Opt::Int(i64::from(call.cost)),
            Opt::Int(now_ms.unwrap_or_default()),
        ];
        let extra = match (call.cost, now_ms) {
            (1, None) => &extra[..0],
            (_, None) => &extra[..1],
            (_, Some(_)) => &extra[..],
        };
        if !extra.is_empty() {
            call.program.builtin_only()?;
        }
        let script = &call.program.script;
        let reply = self
            .within_timeout(self.run(script, call.keys, call.opts, extra))
            .await?;
        Ok(parse_reply(reply, &call.program.headers)?)
    }

    async fn within_timeout<T>(
        &self,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout(self.timeout)),
        }
    }

    /// Sends the `EVALSHA` of `script` with `KEYS = keys` and `ARGV = opts, extra`.
    ///
    /// A script Redis does not know (`NOSCRIPT`) is loaded and the call retried once, as
    /// `redis::Script` does, so scripts survive `SCRIPT FLUSH` and restarts (on a cluster,
    /// `SCRIPT LOAD` goes to every primary). A call that finds the shared connection broken
    /// retries once on a fresh connection.
    async fn run(
        &self,
        script: &Script,
        keys: &[String],
        opts: &[Opt],
        extra: &[Opt],
    ) -> Result<Value, Error> {
        let evalsha = evalsha(script, keys, opts, extra);
        let mut conn = self.connection().await?;
        match invoke(&evalsha, script, &mut conn).await {
            Err(err) if err.is_connection_dropped() || err.is_io_error() => {
                self.forget();
                let mut conn = self.connection().await?;
                Ok(invoke(&evalsha, script, &mut conn).await?)
            }
            reply => Ok(reply?),
        }
    }

    /// Deletes `key`, on the same terms as [`eval`](Self::eval).
    pub(crate) async fn delete(&self, key: &str) -> Result<(), Error> {
        self.within_timeout(self.del(key)).await
    }

    async fn del(&self, key: &str) -> Result<(), Error> {
        let mut del = deadpool_redis::redis::cmd("DEL");
        del.arg(key);
        let mut conn = self.connection().await?;
        match del.query_async::<i64>(&mut conn).await {
            Err(err) if err.is_connection_dropped() || err.is_io_error() => {
                self.forget();
                let mut conn = self.connection().await?;
                del.query_async::<i64>(&mut conn).await?;
            }
            reply => {
                reply?;
            }
        }
        Ok(())
    }

    async fn connection(&self) -> Result<Shared, Error> {
        let shared = self.shared().clone();
        match shared {
            Some(conn) => Ok(conn),
            // Boxed: the pool's checkout future is kilobytes, and inline it would be part of
            // every check's future, moved and allocated with it on every request.
            None => Box::pin(self.checkout()).await,
        }
    }

    async fn checkout(&self) -> Result<Shared, Error> {
        let _checkout = self.checkout.lock().await;
        if let Some(conn) = self.shared().clone() {
            return Ok(conn);
        }
        let conn = match &self.pool {
            Pools::Single(pool) => Shared::Single(Connection::take(pool.get().await?)),
            #[cfg(feature = "cluster")]
            Pools::Cluster(pool) => Shared::Cluster(cluster::Connection::take(pool.get().await?)),
        };
        *self.shared() = Some(conn.clone());
        Ok(conn)
    }

    fn forget(&self) {
        *self.shared() = None;
    }

    fn shared(&self) -> MutexGuard<'_, Option<Shared>> {
        // The guarded value is a plain `Option` that no panic can leave half-written.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The `EVALSHA` command of one check, built straight into one `Cmd` sized up front.
///
/// What `Script::prepare_invoke` would send, without its intermediate buffer per key and per
/// argument.
fn evalsha(script: &Script, keys: &[String], opts: &[Opt], extra: &[Opt]) -> Cmd {
    // An option is at most 20 digits and a sign.
    let data = "EVALSHA".len()
        + script.get_hash().len()
        + 4
        + keys.iter().map(String::len).sum::<usize>()
        + 21 * (opts.len() + extra.len());
    let mut cmd = Cmd::with_capacity(3 + keys.len() + opts.len() + extra.len(), data);
    cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(key.as_str());
    }
    for opt in opts.iter().chain(extra) {
        cmd.arg(opt);
    }
    cmd
}

/// Sends `evalsha`; on `NOSCRIPT`, loads `script` and sends it once more.
async fn invoke(evalsha: &Cmd, script: &Script, conn: &mut Shared) -> RedisResult<Value> {
    match evalsha.query_async(conn).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            // Boxed: once per script and server, so its state stays out of every check's future.
            Box::pin(async {
                script.load_async(conn).await?;
                evalsha.query_async(conn).await
            })
            .await
        }
        reply => reply,
    }
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, status) = match &self.pool {
            Pools::Single(pool) => ("single", pool.status()),
            #[cfg(feature = "cluster")]
            Pools::Cluster(pool) => ("cluster", pool.status()),
        };
        f.debug_struct("RedisBackend")
            .field("kind", &kind)
            .field("pool", &status)
            .field("timeout", &self.timeout)
            .field("connected", &self.shared().is_some())
            .finish_non_exhaustive()
    }
}

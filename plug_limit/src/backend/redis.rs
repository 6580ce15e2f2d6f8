//! The Redis backend: scripts evaluated by SHA1 on one shared multiplexed connection.

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::redis::{Script, Value};
use deadpool_redis::{Connection, Pool};

use crate::{Error, Opt};

/// Runs limiter scripts on Redis.
///
/// Checking a connection out of a deadpool pool costs a `PING` + `UNWATCH` round trip (its
/// recycle check), which would double the cost of every decision. So the backend takes one
/// connection out of the pool and shares it: a multiplexed connection pipelines concurrent
/// requests by itself. When that connection breaks, the backend takes a fresh one from the
/// pool, which recycles or reconnects as usual.
pub(crate) struct RedisBackend {
    pool: Pool,
    shared: Mutex<Option<MultiplexedConnection>>,
    // Serialises checkouts, so a burst of first requests takes one connection, not one each.
    checkout: tokio::sync::Mutex<()>,
}

impl RedisBackend {
    pub(crate) fn new(pool: Pool) -> Self {
        Self {
            pool,
            shared: Mutex::new(None),
            checkout: tokio::sync::Mutex::new(()),
        }
    }

    /// Evaluates `script` with `KEYS = keys` and `ARGV = opts` in one `EVALSHA` round trip.
    ///
    /// `redis::Script` loads the script and retries once on `NOSCRIPT`, so scripts survive
    /// `SCRIPT FLUSH` and restarts. A call that finds the shared connection broken retries once
    /// on a fresh connection: counting a request twice errs on the safe side of a limit.
    pub(crate) async fn eval(
        &self,
        script: &Script,
        keys: &[String],
        opts: &[Opt],
        extra: &[Opt],
    ) -> Result<Value, Error> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for opt in opts.iter().chain(extra) {
            invocation.arg(opt);
        }
        let mut conn = self.connection().await?;
        match invocation.invoke_async(&mut conn).await {
            Err(err) if err.is_connection_dropped() || err.is_io_error() => {
                self.forget();
                let mut conn = self.connection().await?;
                Ok(invocation.invoke_async(&mut conn).await?)
            }
            reply => Ok(reply?),
        }
    }

    /// Deletes `key`, on the same terms as [`eval`](Self::eval).
    pub(crate) async fn delete(&self, key: &str) -> Result<(), Error> {
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

    async fn connection(&self) -> Result<MultiplexedConnection, Error> {
        if let Some(conn) = self.shared().clone() {
            return Ok(conn);
        }
        let _checkout = self.checkout.lock().await;
        if let Some(conn) = self.shared().clone() {
            return Ok(conn);
        }
        let conn = Connection::take(self.pool.get().await?);
        *self.shared() = Some(conn.clone());
        Ok(conn)
    }

    fn forget(&self) {
        *self.shared() = None;
    }

    fn shared(&self) -> MutexGuard<'_, Option<MultiplexedConnection>> {
        // The guarded value is a plain `Option` that no panic can leave half-written.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("pool", &self.pool.status())
            .field("connected", &self.shared().is_some())
            .finish_non_exhaustive()
    }
}

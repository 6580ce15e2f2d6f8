//! What Redis says about itself: `INFO` fields, `EVALSHA`'s counters, a key's memory.

use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig, aio::MultiplexedConnection};

use crate::BoxError;

/// A connection for the bench's own commands, whose replies may take long: `FLUSHALL` of a
/// million keys outlasts the client's default response timeout.
pub(crate) async fn connect(url: &str) -> Result<MultiplexedConnection, BoxError> {
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(120)));
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

pub(crate) async fn version(url: &str) -> Result<String, BoxError> {
    let mut conn = connect(url).await?;
    info_field(&mut conn, "server", "redis_version").await
}

async fn info(conn: &mut MultiplexedConnection, section: &str) -> Result<String, BoxError> {
    Ok(redis::cmd("INFO")
        .arg(section)
        .query_async::<String>(conn)
        .await?)
}

async fn info_field(
    conn: &mut MultiplexedConnection,
    section: &str,
    field: &str,
) -> Result<String, BoxError> {
    let text = info(conn, section).await?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
        .ok_or_else(|| format!("INFO {section}: no {field}").into())
}

/// `used_memory`, in bytes.
pub(crate) async fn used_memory(conn: &mut MultiplexedConnection) -> Result<u64, BoxError> {
    Ok(info_field(conn, "memory", "used_memory").await?.parse()?)
}

/// `EVALSHA`'s calls and microseconds so far (`INFO commandstats`): a script's time inside
/// Redis, its own commands included.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Evalsha {
    pub(crate) calls: u64,
    pub(crate) usec: u64,
}

impl Evalsha {
    pub(crate) async fn now(conn: &mut MultiplexedConnection) -> Result<Self, BoxError> {
        let text = info(conn, "commandstats").await?;
        let Some(line) = text
            .lines()
            .find_map(|line| line.strip_prefix("cmdstat_evalsha:"))
        else {
            return Ok(Self::default());
        };
        let field = |name: &str| -> Result<u64, BoxError> {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .ok_or_else(|| format!("cmdstat_evalsha without {name}"))?
                .parse()
                .map_err(Into::into)
        };
        Ok(Self {
            calls: field("calls")?,
            usec: field("usec")?,
        })
    }

    /// Microseconds per call between `self` and `later`.
    #[allow(clippy::cast_precision_loss)]
    pub(crate) fn usec_per_call_until(self, later: Self) -> f64 {
        let calls = later.calls.saturating_sub(self.calls).max(1);
        later.usec.saturating_sub(self.usec) as f64 / calls as f64
    }

    pub(crate) fn calls_until(self, later: Self) -> u64 {
        later.calls.saturating_sub(self.calls)
    }
}

pub(crate) async fn flushall(conn: &mut MultiplexedConnection) -> Result<(), BoxError> {
    redis::cmd("FLUSHALL").query_async::<()>(conn).await?;
    Ok(())
}

/// The one key of an otherwise empty database, its `MEMORY USAGE` counting every element,
/// and its encoding.
pub(crate) async fn only_key(
    conn: &mut MultiplexedConnection,
) -> Result<(String, u64, String), BoxError> {
    let key: Option<String> = redis::cmd("RANDOMKEY").query_async(conn).await?;
    let key = key.ok_or("no key")?;
    let bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(conn)
        .await?;
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(&key)
        .query_async(conn)
        .await?;
    Ok((key, bytes, encoding))
}

//! What Redis reports of itself: CPU time, commands executed and version, from `INFO`.

use std::time::Duration;

use deadpool_redis::redis;
use deadpool_redis::redis::aio::MultiplexedConnection;

/// What Redis has done so far, from one `INFO cpu commandstats`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RedisCounters {
    pub(crate) cpu: Option<Duration>,
    /// Commands executed, those run inside scripts included; the harness's own `INFO` calls
    /// are left out.
    pub(crate) commands: Option<u64>,
}

pub(crate) async fn redis_counters(conn: &mut MultiplexedConnection) -> RedisCounters {
    let Ok(info) = redis::cmd("INFO")
        .arg("cpu")
        .arg("commandstats")
        .query_async::<String>(conn)
        .await
    else {
        return RedisCounters::default();
    };
    let seconds = |field: &str| -> Option<f64> {
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    let cpu = seconds("used_cpu_user")
        .zip(seconds("used_cpu_sys"))
        .map(|(user, sys)| Duration::from_secs_f64(user + sys));
    // cmdstat_<name>:calls=<n>,usec=...
    let commands = info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter_map(|line| line.split_once(':'))
        .filter(|(name, _)| *name != "info")
        .map(|(_, stats)| {
            stats
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))
                .and_then(|calls| calls.trim().parse::<u64>().ok())
        })
        .sum::<Option<u64>>();
    RedisCounters { cpu, commands }
}

pub(crate) async fn redis_version(conn: &mut MultiplexedConnection) -> String {
    let info: Option<String> = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .ok();
    info.as_deref()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("redis_version:"))
        })
        .map_or_else(|| "unknown".to_owned(), |v| v.trim().to_owned())
}

//! CPU accounting: each thread's time from its `schedstat`, and the shares of the server, the
//! load generator, Redis and the rest of the machine over the measured window.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use deadpool_redis::redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use crate::machine::machine_busy;
use crate::redis_stats::{RedisCounters, redis_counters};

/// The calling thread's `/proc/.../task/<tid>/schedstat`, readable from any thread.
pub(crate) fn thread_schedstat() -> io::Result<PathBuf> {
    Ok(std::fs::canonicalize("/proc/thread-self")?.join("schedstat"))
}

/// CPU time a thread has run, from its `schedstat` (nanoseconds on CPU, first field).
fn cpu_time(schedstat: &Path) -> Option<Duration> {
    let text = std::fs::read_to_string(schedstat).ok()?;
    let nanos = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// CPU used during the measured window, in cores (1.0 = one core busy all along).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuShare {
    pub(crate) server: Option<f64>,
    pub(crate) client: Option<f64>,
    pub(crate) redis: Option<f64>,
    /// Everything else on the machine: other processes make a run noisy.
    pub(crate) others: Option<f64>,
}

/// CPU clocks and Redis counters read at one instant. Taken on the load generator's thread,
/// so `/proc/thread-self` is the client.
pub(crate) struct Snapshot {
    at: Instant,
    server: Option<Duration>,
    client: Option<Duration>,
    redis: RedisCounters,
    machine: Option<Duration>,
}

impl Snapshot {
    pub(crate) async fn take(server: &Path, redis: &mut MultiplexedConnection) -> Self {
        Self {
            at: Instant::now(),
            server: cpu_time(server),
            client: cpu_time(Path::new("/proc/thread-self/schedstat")),
            redis: redis_counters(redis).await,
            machine: machine_busy(),
        }
    }

    pub(crate) fn share_until(&self, after: &Self) -> CpuShare {
        let elapsed = after.at.duration_since(self.at).as_secs_f64();
        let share = |a: Option<Duration>, b: Option<Duration>| {
            Some(b?.checked_sub(a?)?.as_secs_f64() / elapsed)
        };
        let server = share(self.server, after.server);
        let client = share(self.client, after.client);
        let redis = share(self.redis.cpu, after.redis.cpu);
        let others = share(self.machine, after.machine)
            .and_then(|machine| Some((machine - server? - client? - redis?).max(0.0)));
        CpuShare {
            server,
            client,
            redis,
            others,
        }
    }

    pub(crate) fn redis_commands_until(&self, after: &Self) -> Option<u64> {
        after.redis.commands?.checked_sub(self.redis.commands?)
    }
}

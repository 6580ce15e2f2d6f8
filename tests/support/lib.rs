//! Test support for the plug_limit workspace: real `redis-server` processes on free loopback
//! ports, one per test binary or per test, so tests never share a fixed port.
//!
//! A missing `redis-server` is a loud failure with a hint, never a skip. Set `REDIS_SERVER`
//! to use another binary.
//!
//! Around the servers: pools and both backends configured alike ([`backends`]), requests sent
//! through an app without a socket ([`get`], [`send`]), or on a clock, as a flood sends them
//! ([`open_loop`]), captured logs ([`Logs`]), and a proxy that breaks the connection to Redis on
//! demand ([`FaultProxy`]).

mod backends;
mod cluster;
mod fault_proxy;
mod keys;
mod load;
mod logs;
pub mod matrix;
mod ports;
mod readme;
mod redis_server;
mod requests;
mod sentinel;

pub use backends::{backends, pool, unique_prefix};
pub use cluster::RedisCluster;
pub use fault_proxy::{Fault, FaultProxy};
pub use keys::{counted_at, opts_text, stored_key};
pub use load::{Sent, open_loop, open_loop_as};
pub use logs::Logs;
pub use ports::{dead_url, free_port};
pub use redis_server::RedisServer;
pub use requests::{Reply, get, send, with_peer};
pub use sentinel::{MASTER_NAME, SentinelSet};

/// The limit of `limiter` with `opts`, as the programmatic checks take it, with the options
/// left for the backend to judge, as the tests of its refusals need.
#[must_use]
pub fn limit(limiter: &str, opts: &[plug_limit::Opt]) -> plug_limit::RuntimeLimit {
    plug_limit::RuntimeLimit::unchecked(limiter, opts)
}

/// Checks once on `limits` (a check is what connects), then waits up to 5 s for the
/// background read of the server's `maxmemory-policy` to answer.
///
/// # Panics
///
/// When the check fails or denies, on the memory backend, or when nothing is read in time.
pub async fn checked_then_read(limits: &plug_limit::PlugLimit) -> plug_limit::EvictionPolicy {
    let outcome = limits
        .check(plug_limit::FixedWindow::<5, 60>, "ann")
        .await
        .expect("a check");
    assert!(outcome.is_allowed());
    for _ in 0..500 {
        match limits.redis_eviction() {
            Some(plug_limit::EvictionPolicy::Unknown) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Some(policy) => return policy,
            None => panic!("a Redis backend answers"),
        }
    }
    panic!("the policy was not read within 5 s");
}

/// [`limit`] with a cost of `cost` units.
#[must_use]
pub fn limit_cost(limiter: &str, opts: &[plug_limit::Opt], cost: u32) -> plug_limit::RuntimeLimit {
    limit(limiter, opts)
        .cost(cost)
        .expect("a cost within the bound")
}

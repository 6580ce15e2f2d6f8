//! Clients of a test Redis: pools, the same limits on both backends, and key prefixes that keep
//! tests sharing a server apart.

use deadpool_redis::{Config, Pool, Runtime};

use crate::RedisServer;

/// The same limits on both backends, `configure`d alike: `("redis", ..)` on `redis` and
/// `("memory", ..)` in process. Call-for-call tests run on both.
pub fn backends(
    redis: &RedisServer,
    configure: impl Fn(plug_limit::Builder) -> plug_limit::Builder,
) -> [(&'static str, plug_limit::PlugLimit); 2] {
    let build = |builder| {
        configure(builder)
            .build()
            .expect("valid test configuration")
    };
    [
        ("redis", build(plug_limit::PlugLimit::builder(redis.pool()))),
        (
            "memory",
            build(plug_limit::PlugLimit::builder(plug_limit::Store::memory())),
        ),
    ]
}

/// A deadpool-redis pool for `url`.
#[must_use]
pub fn pool(url: &str) -> Pool {
    Config::from_url(url)
        .create_pool(Some(Runtime::Tokio1))
        .expect("create a deadpool-redis pool")
}

/// A key prefix unique to this call, so tests sharing a server never share keys.
#[must_use]
pub fn unique_prefix(test: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("t{}-{test}", NEXT.fetch_add(1, Ordering::Relaxed))
}

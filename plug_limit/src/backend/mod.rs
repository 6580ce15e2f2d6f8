//! Where limiter scripts run.

mod redis;

pub(crate) use self::redis::RedisBackend;

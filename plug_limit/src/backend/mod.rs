//! Where limiters run: Redis, or the process's memory.

mod memory;
mod redis;

pub(crate) use self::memory::MemoryBackend;
pub(crate) use self::redis::RedisBackend;

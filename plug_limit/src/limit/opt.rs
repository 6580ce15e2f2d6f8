//! Opt: one option of a limit, as its script's `ARGV` receives it.

use std::fmt;

use deadpool_redis::redis::{RedisWrite, ToRedisArgs};

/// One option handed to a limiter's Lua script as an `ARGV` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Opt {
    /// An integer option, such as a limit or a window length in seconds.
    Int(i64),
    /// A string option, for custom scripts that take words.
    Str(&'static str),
}

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Str(s) => f.write_str(s),
        }
    }
}

impl ToRedisArgs for Opt {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        match self {
            Self::Int(n) => n.write_redis_args(out),
            Self::Str(s) => s.write_redis_args(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_render_as_redis_arguments() {
        assert_eq!(Opt::Int(-3).to_redis_args(), vec![b"-3".to_vec()]);
        assert_eq!(Opt::Str("x").to_redis_args(), vec![b"x".to_vec()]);
        assert_eq!(Opt::Int(7).to_string(), "7");
    }
}

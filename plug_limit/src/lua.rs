//! A limiter's Lua script: its source, and its SHA1 computed once.

use std::borrow::Cow;

use deadpool_redis::redis::Script;

/// A Lua script as the Redis backend sends it: by SHA1 (`EVALSHA`) while Redis knows it, with
/// its body (`EVAL`) when Redis answers `NOSCRIPT`.
#[derive(Debug)]
pub(crate) struct Lua {
    source: Cow<'static, str>,
    script: Script,
}

impl Lua {
    pub(crate) fn new(source: impl Into<Cow<'static, str>>) -> Self {
        let source = source.into();
        let script = Script::new(&source);
        Self { source, script }
    }

    /// The script's body.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The hex SHA1 Redis knows the script by.
    pub(crate) fn sha1(&self) -> &str {
        self.script.get_hash()
    }
}

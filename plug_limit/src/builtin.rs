//! The built-in limiters: their Lua scripts (from `lua/`) and header names.

use std::sync::{Arc, LazyLock};

use deadpool_redis::redis::Script;

/// A built-in limiter: the name it is registered under, its script, and its header names.
#[derive(Debug)]
pub(crate) struct BuiltIn {
    pub(crate) name: &'static str,
    pub(crate) script: &'static LazyLock<Arc<Script>>,
    pub(crate) headers: &'static [&'static str],
}

// One `Script` per file for the life of the process: the SHA1 is computed once.
static FIXED_WINDOW_SCRIPT: LazyLock<Arc<Script>> =
    LazyLock::new(|| Arc::new(Script::new(include_str!("../lua/fixed_window.lua"))));
static TOKEN_BUCKET_SCRIPT: LazyLock<Arc<Script>> =
    LazyLock::new(|| Arc::new(Script::new(include_str!("../lua/token_bucket.lua"))));

pub(crate) const FIXED_WINDOW: BuiltIn = BuiltIn {
    name: "fixed_window",
    script: &FIXED_WINDOW_SCRIPT,
    headers: &[
        "x-ratelimit-limit",
        "x-ratelimit-reset",
        "x-ratelimit-remaining",
    ],
};

pub(crate) const TOKEN_BUCKET: BuiltIn = BuiltIn {
    name: "token_bucket",
    script: &TOKEN_BUCKET_SCRIPT,
    headers: &[
        "x-ratelimit-limit",
        "x-ratelimit-reset",
        "x-ratelimit-remaining",
        "retry-after",
    ],
};

/// Every built-in limiter, registered in every [`PlugLimit`](crate::PlugLimit).
pub(crate) const ALL: [BuiltIn; 2] = [FIXED_WINDOW, TOKEN_BUCKET];

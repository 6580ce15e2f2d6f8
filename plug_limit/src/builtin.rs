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

/// One `Script` per file for the life of the process: the SHA1 is computed once.
macro_rules! script {
    ($file:literal) => {{
        static SCRIPT: LazyLock<Arc<Script>> =
            LazyLock::new(|| Arc::new(Script::new(include_str!(concat!("../lua/", $file)))));
        &SCRIPT
    }};
}

const SEED_HEADERS: &[&str] = &[
    "x-ratelimit-limit",
    "x-ratelimit-reset",
    "x-ratelimit-remaining",
];

const HEADERS: &[&str] = &[
    "x-ratelimit-limit",
    "x-ratelimit-reset",
    "x-ratelimit-remaining",
    "retry-after",
];

pub(crate) const FIXED_WINDOW: BuiltIn = BuiltIn {
    name: "fixed_window",
    script: script!("fixed_window.lua"),
    headers: SEED_HEADERS,
};

pub(crate) const TOKEN_BUCKET: BuiltIn = BuiltIn {
    name: "token_bucket",
    script: script!("token_bucket.lua"),
    headers: HEADERS,
};

/// Every built-in limiter, registered in every [`PlugLimit`](crate::PlugLimit).
pub(crate) const ALL: [BuiltIn; 7] = [
    FIXED_WINDOW,
    TOKEN_BUCKET,
    BuiltIn {
        name: "sliding_window",
        script: script!("sliding_window.lua"),
        headers: HEADERS,
    },
    BuiltIn {
        name: "sliding_log",
        script: script!("sliding_log.lua"),
        headers: HEADERS,
    },
    BuiltIn {
        name: "leaky_bucket",
        script: script!("leaky_bucket.lua"),
        headers: HEADERS,
    },
    BuiltIn {
        name: "gcra",
        script: script!("gcra.lua"),
        headers: HEADERS,
    },
    BuiltIn {
        name: "multi_window",
        script: script!("multi_window.lua"),
        headers: HEADERS,
    },
];

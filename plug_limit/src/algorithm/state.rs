//! What the native twins keep per key, and what they answer: the Rust form of each script's
//! Redis key and reply.

use std::collections::VecDeque;

use super::Fields;

/// A key's state and when Redis would delete it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stored {
    pub(crate) state: State,
    pub(crate) expires_at_ms: i64,
}

/// A built-in limiter's state for one key (what its Redis key holds).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    /// The string counter.
    FixedWindow { count: i64 },
    /// The hash `b`, `r`, `t`; its `e` field is the key's expiry.
    TokenBucket {
        tokens: f64,
        remaining: i64,
        last_ms: i64,
    },
    /// The string `"<start> <current> <previous>"`.
    SlidingWindow {
        start_ms: i64,
        current: i64,
        previous: i64,
    },
    /// The sorted set's scores, oldest first; members only keep them unique in Redis.
    SlidingLog { stamps: VecDeque<i64> },
    /// The string `"<level> <at>"`, the level in unit-milliseconds.
    LeakyBucket { level: i64, at_ms: i64 },
    /// The theoretical arrival time, in microseconds.
    Gcra { tat_us: i64 },
    /// The hash's `c<window>` / `e<window>` field pairs.
    MultiWindow { windows: Vec<Window> },
    /// The string `"<period end> <count>"`: the end says which period the count is of.
    CalendarQuota { ends_ms: i64, count: i64 },
    /// The sorted set's `(score, member)` pairs in its order: each unit held, by its lease's
    /// expiry.
    Concurrency { leases: Vec<(i64, Box<str>)> },
}

/// One of multi_window's windows, as its hash's `c<window>` and `e<window>` fields hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) window_s: i64,
    pub(crate) count: i64,
    pub(crate) ends_ms: i64,
}

/// What a built-in answered, as its script's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) allow: bool,
    pub(crate) headers: Fields,
    /// The units a batch's `~n` granted and the milliseconds left of their window, which its
    /// script replies after the headers.
    pub(crate) granted: Option<(u32, i64)>,
    /// Which window decided (multi_window's position of it among its limits; 0 for the
    /// others), which its script replies after the headers.
    pub(crate) window: u32,
}

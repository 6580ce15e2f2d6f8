//! The built-in limits as zero-sized types: `RateLimited<TokenBucket<20, 600, 5>>`.
//!
//! The const parameters are the script's options in `ARGV` order; options a script would
//! refuse are refused at compile time instead.

use plug_limit_options::{Builtin, assert_calendar};

use super::{Limit, Opt};

/// The fixed window limiter: at most `LIMIT` requests per `WINDOW` seconds.
///
/// The Lua script (`lua/fixed_window.lua`) keeps one counter per key that expires with the
/// window. Headers: `x-ratelimit-limit`, `x-ratelimit-reset` (seconds until the window
/// restarts), `x-ratelimit-remaining`, and on a deny `retry-after` (the reset: the script
/// answers none, the library adds it).
///
/// Zero options are refused at compile time.
///
/// # Example
///
/// ```
/// use plug_limit::{FixedWindow, RateLimited};
///
/// // 10 requests per minute per client.
/// async fn search(limited: RateLimited<FixedWindow<10, 60>>) -> (RateLimited<FixedWindow<10, 60>>, &'static str) {
///     (limited, "results")
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct FixedWindow<const LIMIT: u32, const WINDOW: u32>;

impl<const LIMIT: u32, const WINDOW: u32> Limit for FixedWindow<LIMIT, WINDOW> {
    const LIMITER: &'static str = Builtin::FixedWindow.name();
    const OPTS: &'static [Opt] = {
        Builtin::FixedWindow.assert_counts(&[LIMIT as u64, WINDOW as u64]);
        &[Opt::Int(LIMIT as i64), Opt::Int(WINDOW as i64)]
    };
}

/// The token bucket limiter: a bucket of `BURST` tokens refilled at
/// `(LIMIT - BURST) / WINDOW` tokens a second, at most `LIMIT` requests per `WINDOW` seconds.
///
/// The bucket starts full (`BURST` tokens) and resets every window. Headers:
/// `x-ratelimit-limit` (`"20 20;w=600;burst=5;policy=token_bucket"`), `x-ratelimit-reset`,
/// `x-ratelimit-remaining`, and `retry-after` once the bucket is empty.
///
/// `BURST` must be between 1 and `LIMIT`, and `WINDOW` at least 1; anything else is refused at
/// compile time.
///
/// # Example
///
/// ```
/// use plug_limit::{RateLimited, TokenBucket};
///
/// // Bursts of 5, 20 requests per 10 minutes.
/// async fn export(_limited: RateLimited<TokenBucket<20, 600, 5>>) -> &'static str {
///     "exported"
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenBucket<const LIMIT: u32, const WINDOW: u32, const BURST: u32>;

impl<const LIMIT: u32, const WINDOW: u32, const BURST: u32> Limit
    for TokenBucket<LIMIT, WINDOW, BURST>
{
    const LIMITER: &'static str = Builtin::TokenBucket.name();
    const OPTS: &'static [Opt] = {
        Builtin::TokenBucket.assert_counts(&[LIMIT as u64, WINDOW as u64, BURST as u64]);
        &[
            Opt::Int(LIMIT as i64),
            Opt::Int(WINDOW as i64),
            Opt::Int(BURST as i64),
        ]
    };
}

/// The sliding window limiter: at most `LIMIT` requests in any `WINDOW` seconds, estimated from
/// the current and the previous fixed window (the previous one weighted by how much of it the
/// sliding window still covers).
///
/// Smooths the fixed window's double burst at window edges for the cost of one small string per
/// key. Headers: `x-ratelimit-limit`, `x-ratelimit-reset`, `x-ratelimit-remaining`, and
/// `retry-after` on deny. Script: `lua/sliding_window.lua`.
///
/// # Example
///
/// ```
/// use plug_limit::{RateLimited, SlidingWindow};
///
/// async fn search(_limited: RateLimited<SlidingWindow<100, 60>>) -> &'static str {
///     "results"
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SlidingWindow<const LIMIT: u32, const WINDOW: u32>;

impl<const LIMIT: u32, const WINDOW: u32> Limit for SlidingWindow<LIMIT, WINDOW> {
    const LIMITER: &'static str = Builtin::SlidingWindow.name();
    const OPTS: &'static [Opt] = {
        Builtin::SlidingWindow.assert_counts(&[LIMIT as u64, WINDOW as u64]);
        &[Opt::Int(LIMIT as i64), Opt::Int(WINDOW as i64)]
    };
}

/// The sliding log limiter: exactly at most `LIMIT` requests in any `WINDOW` seconds.
///
/// Exact, for the cost of one sorted-set entry per admitted request (about 60 bytes each, up
/// to `LIMIT` per key): for small limits where precision matters (logins, payments). Headers:
/// `x-ratelimit-limit`, `x-ratelimit-reset`, `x-ratelimit-remaining`, and `retry-after` on deny.
/// Script: `lua/sliding_log.lua`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlidingLog<const LIMIT: u32, const WINDOW: u32>;

impl<const LIMIT: u32, const WINDOW: u32> Limit for SlidingLog<LIMIT, WINDOW> {
    const LIMITER: &'static str = Builtin::SlidingLog.name();
    const OPTS: &'static [Opt] = {
        Builtin::SlidingLog.assert_counts(&[LIMIT as u64, WINDOW as u64]);
        &[Opt::Int(LIMIT as i64), Opt::Int(WINDOW as i64)]
    };
}

/// The leaky bucket limiter: a bucket of capacity `LIMIT` that leaks `LIMIT` units per
/// `WINDOW` seconds; a request is admitted while it fits.
///
/// Admits bursts up to the capacity, then a steady `LIMIT / WINDOW` per second. Headers:
/// `x-ratelimit-limit`, `x-ratelimit-reset` (seconds until empty), `x-ratelimit-remaining`, and
/// `retry-after` on deny. Script: `lua/leaky_bucket.lua`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeakyBucket<const LIMIT: u32, const WINDOW: u32>;

impl<const LIMIT: u32, const WINDOW: u32> Limit for LeakyBucket<LIMIT, WINDOW> {
    const LIMITER: &'static str = Builtin::LeakyBucket.name();
    const OPTS: &'static [Opt] = {
        Builtin::LeakyBucket.assert_counts(&[LIMIT as u64, WINDOW as u64]);
        &[Opt::Int(LIMIT as i64), Opt::Int(WINDOW as i64)]
    };
}

/// The generic cell rate algorithm (GCRA), as redis-cell and go-redis `redis_rate`: `LIMIT`
/// requests per `WINDOW` seconds, evenly spaced, with bursts of up to `BURST`.
///
/// One integer per key and no refill bookkeeping: the cheapest smooth limiter. Headers:
/// `x-ratelimit-limit` (the burst), `x-ratelimit-reset`, `x-ratelimit-remaining`, and
/// `retry-after` on deny. Script: `lua/gcra.lua`.
///
/// # Example
///
/// ```
/// use plug_limit::{Gcra, RateLimited};
///
/// // 10 a second (20 per 2 s), bursts of up to 20.
/// async fn api(_limited: RateLimited<Gcra<20, 2, 20>>) -> &'static str {
///     "ok"
/// }
/// # let _ = api;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Gcra<const LIMIT: u32, const WINDOW: u32, const BURST: u32>;

impl<const LIMIT: u32, const WINDOW: u32, const BURST: u32> Limit for Gcra<LIMIT, WINDOW, BURST> {
    const LIMITER: &'static str = Builtin::Gcra.name();
    const OPTS: &'static [Opt] = {
        Builtin::Gcra.assert_counts(&[LIMIT as u64, WINDOW as u64, BURST as u64]);
        &[
            Opt::Int(LIMIT as i64),
            Opt::Int(WINDOW as i64),
            Opt::Int(BURST as i64),
        ]
    };
}

/// The calendar quota of a day: at most `LIMIT` units from one midnight to the next, local
/// time at `UTC_OFFSET_MINUTES` from UTC (default 0, UTC).
///
/// Opts `[LIMIT, "day", UTC_OFFSET_MINUTES]` of the `calendar_quota` limiter
/// (`lua/calendar_quota.lua`). Headers: `x-ratelimit-limit`, `x-ratelimit-reset` (seconds
/// until local midnight), `x-ratelimit-remaining`, and on a deny `retry-after` (the same
/// reset: the quota renews then). The offset is fixed: daylight saving time is not followed.
///
/// A zero limit, and an offset of a day or more either way, are refused at compile time.
///
/// # Example
///
/// ```
/// use plug_limit::{DailyQuota, RateLimited};
///
/// // 500 reports a day, renewed at midnight in New York's winter time (UTC-05:00).
/// async fn report(_limited: RateLimited<DailyQuota<500, -300>>) -> &'static str {
///     "report"
/// }
/// # let _ = report;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct DailyQuota<const LIMIT: u32, const UTC_OFFSET_MINUTES: i32 = 0>;

/// The calendar quota of an ISO week: at most `LIMIT` units from Monday 00:00 to the next,
/// local time at `UTC_OFFSET_MINUTES` from UTC (default 0, UTC).
///
/// Opts `[LIMIT, "week", UTC_OFFSET_MINUTES]` of the `calendar_quota` limiter; headers as
/// [`DailyQuota`]'s, the reset counting to Monday's midnight.
#[derive(Debug, Clone, Copy, Default)]
pub struct WeeklyQuota<const LIMIT: u32, const UTC_OFFSET_MINUTES: i32 = 0>;

/// The calendar quota of a month: at most `LIMIT` units from the 1st at 00:00 to the next
/// 1st, local time at `UTC_OFFSET_MINUTES` from UTC (default 0, UTC). Months have their own
/// lengths, February 29 days in a leap year.
///
/// Opts `[LIMIT, "month", UTC_OFFSET_MINUTES]` of the `calendar_quota` limiter; headers as
/// [`DailyQuota`]'s, the reset counting to the next 1st.
///
/// # Example
///
/// ```
/// use plug_limit::{MonthlyQuota, RateLimited};
///
/// // 10,000 API calls a month, renewed on the 1st at midnight UTC.
/// async fn api(_limited: RateLimited<MonthlyQuota<10_000>>) -> &'static str {
///     "ok"
/// }
/// # let _ = api;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MonthlyQuota<const LIMIT: u32, const UTC_OFFSET_MINUTES: i32 = 0>;

/// The opts of a calendar quota, its options checked at compile time.
const fn calendar_opts(limit: u32, period: &'static str, offset: i32) -> [Opt; 3] {
    assert_calendar(limit as u64, offset as i64);
    [
        Opt::Int(limit as i64),
        Opt::Str(period),
        Opt::Int(offset as i64),
    ]
}

impl<const LIMIT: u32, const UTC_OFFSET_MINUTES: i32> Limit
    for DailyQuota<LIMIT, UTC_OFFSET_MINUTES>
{
    const LIMITER: &'static str = Builtin::CalendarQuota.name();
    const OPTS: &'static [Opt] = &calendar_opts(LIMIT, "day", UTC_OFFSET_MINUTES);
}

impl<const LIMIT: u32, const UTC_OFFSET_MINUTES: i32> Limit
    for WeeklyQuota<LIMIT, UTC_OFFSET_MINUTES>
{
    const LIMITER: &'static str = Builtin::CalendarQuota.name();
    const OPTS: &'static [Opt] = &calendar_opts(LIMIT, "week", UTC_OFFSET_MINUTES);
}

impl<const LIMIT: u32, const UTC_OFFSET_MINUTES: i32> Limit
    for MonthlyQuota<LIMIT, UTC_OFFSET_MINUTES>
{
    const LIMITER: &'static str = Builtin::CalendarQuota.name();
    const OPTS: &'static [Opt] = &calendar_opts(LIMIT, "month", UTC_OFFSET_MINUTES);
}

/// The concurrency limiter: at most `LIMIT` requests in flight per key, across every
/// instance sharing the Redis.
///
/// Each admitted request holds a lease (a member of the key's sorted set in
/// `lua/concurrency.lua`) until its response body ends; a lease not given back (its instance
/// crashed, or Redis was unreachable when the response ended) expires `LEASE` seconds after it
/// was taken or last renewed, so a crashed instance cannot leak a slot for longer. While the
/// request runs, its instance renews the lease every third of `LEASE` at most (on the Tokio
/// runtime; not with [`Builder::clock`](crate::Builder::clock) set), so a response streaming
/// for longer than `LEASE` keeps its slot; a short `LEASE` gives a crashed instance's slots
/// back sooner, at the price of more renewals per request in flight. A request in flight holds
/// its slot however long it runs: pair the limit with a server timeout where slow clients
/// matter.
///
/// The lease is held until the body ends under [`RateLimitLayer`](crate::RateLimitLayer),
/// [`SendHeadersLayer`](crate::SendHeadersLayer), `#[rate_limit]`, and with
/// [`RateLimited::respond`](crate::RateLimited::respond); an extractor returned in a response
/// tuple gives it back when the response is built. Headers: `x-ratelimit-limit`,
/// `x-ratelimit-reset` (seconds until the oldest lease expires unless renewed: when a slot
/// comes back at the latest if its instance dies), `x-ratelimit-remaining` (slots free after this request), and `retry-after: 1` on a
/// deny (a slot comes back as soon as any request in flight ends).
///
/// `LIMIT` and `LEASE` must be at least 1; anything else is refused at compile time. A
/// concurrency limit cannot be [stacked](crate::Limits).
///
/// # Example
///
/// ```
/// use axum::response::Response;
/// use plug_limit::{Concurrency, RateLimited};
///
/// // At most 3 exports in flight per client; a crashed instance's slots come back within 10
/// // minutes.
/// async fn export(limited: RateLimited<Concurrency<3, 600>>) -> Response {
///     limited.respond("a large export")
/// }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Concurrency<const LIMIT: u32, const LEASE: u32>;

impl<const LIMIT: u32, const LEASE: u32> Limit for Concurrency<LIMIT, LEASE> {
    const LIMITER: &'static str = Builtin::Concurrency.name();
    const OPTS: &'static [Opt] = {
        Builtin::Concurrency.assert_counts(&[LIMIT as u64, LEASE as u64]);
        &[Opt::Int(LIMIT as i64), Opt::Int(LEASE as i64)]
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_opts_follow_argv_order() {
        assert_eq!(
            <TokenBucket<20, 600, 5> as Limit>::OPTS,
            &[Opt::Int(20), Opt::Int(600), Opt::Int(5)]
        );
        assert_eq!(
            <FixedWindow<10, 60> as Limit>::OPTS,
            &[Opt::Int(10), Opt::Int(60)]
        );
        assert_eq!(<Gcra<20, 2, 20> as Limit>::OPTS.len(), 3);
        assert_eq!(
            <MonthlyQuota<10_000, -300> as Limit>::OPTS,
            &[Opt::Int(10_000), Opt::Str("month"), Opt::Int(-300)]
        );
        assert_eq!(
            <WeeklyQuota<5, 330> as Limit>::OPTS,
            &[Opt::Int(5), Opt::Str("week"), Opt::Int(330)]
        );
        assert_eq!(
            <DailyQuota<7> as Limit>::OPTS,
            &[Opt::Int(7), Opt::Str("day"), Opt::Int(0)]
        );
        let names = [
            <FixedWindow<1, 1> as Limit>::LIMITER,
            <TokenBucket<1, 1, 1> as Limit>::LIMITER,
            <SlidingWindow<1, 1> as Limit>::LIMITER,
            <SlidingLog<1, 1> as Limit>::LIMITER,
            <LeakyBucket<1, 1> as Limit>::LIMITER,
            <Gcra<1, 1, 1> as Limit>::LIMITER,
            <MonthlyQuota<1> as Limit>::LIMITER,
            <Concurrency<1, 1> as Limit>::LIMITER,
        ];
        assert_eq!(
            names,
            [
                "fixed_window",
                "token_bucket",
                "sliding_window",
                "sliding_log",
                "leaky_bucket",
                "gcra",
                "calendar_quota",
                "concurrency"
            ]
        );
    }
}

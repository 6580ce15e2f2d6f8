//! The calendar quota, call for call, on real Redis and in memory: periods that end at local
//! midnight at a fixed UTC offset, exact month lengths, and the reset the headers tell.
//!
//! Both backends decide by one `ManualClock`, so the dates are chosen, not waited for. The
//! memory backend runs each case in 2028 (a leap year) and in 2084; Redis in 2084 only, which
//! has the calendar of 2028 (56 years on: the same weekdays and leap years), so the expiries it
//! keeps are never in its own past. The same answers are expected in both years.

use std::time::{SystemTime, UNIX_EPOCH};

use plug_limit::{HeaderStyle, ManualClock, Opt, Outcome, PlugLimit, Store};
use plug_limit_tests::{RedisServer, unique_prefix};
use plug_limit_tests::{limit, limit_cost};

const LIMITER: &str = "calendar_quota";

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`),
/// written apart from the library's own date arithmetic.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The instant of a local date and time at `offset` minutes from UTC, in ms since the epoch.
fn local_ms(
    (year, month, day): (i64, i64, i64),
    (hour, minute, second): (i64, i64, i64),
    offset: i64,
) -> i64 {
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset * 60;
    seconds * 1000
}

/// The backends a case runs on, each with its clock and the year the case is set in.
fn backends(redis: &RedisServer) -> Vec<(String, PlugLimit, ManualClock, i64)> {
    let mut all = Vec::new();
    for (name, year) in [("memory", 2028), ("memory", 2084), ("redis", 2084)] {
        let clock = ManualClock::new(0);
        let builder = if name == "redis" {
            PlugLimit::builder(redis.pool())
        } else {
            PlugLimit::builder(Store::memory())
        };
        let limits = builder
            .prefix(unique_prefix("calendar"))
            .clock(clock.clone())
            .build()
            .unwrap();
        all.push((format!("{name} {year}"), limits, clock, year));
    }
    all
}

/// An outcome as `"allow 3,1,0"`: the decision, then the header values in order.
fn render(outcome: &Outcome) -> String {
    let decision = if outcome.is_allowed() {
        "allow"
    } else {
        "deny"
    };
    let values: Vec<&str> = outcome
        .headers()
        .iter()
        .map(|(_, value)| value.to_str().unwrap())
        .collect();
    format!("{decision} {}", values.join(","))
}

async fn call(limits: &PlugLimit, key: &str, opts: &[Opt], cost: u32) -> String {
    render(
        &limits
            .check(limit_cost(LIMITER, opts, cost), key)
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn a_month_renews_on_the_first_at_local_midnight() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(3), Opt::Str("month"), Opt::Int(-300)];
    for (backend, limits, clock, year) in backends(&redis) {
        // January 31, 23:59:59 at UTC-05:00: February 1, 04:59:59 UTC.
        clock.set(local_ms((year, 1, 31), (23, 59, 59), -300));
        let mut seen = vec![
            call(&limits, "k", &opts, 3).await,
            call(&limits, "k", &opts, 1).await,
            call(&limits, "k", &opts, 0).await,
        ];
        clock.set(local_ms((year, 2, 1), (0, 0, 0), -300));
        seen.extend([
            call(&limits, "k", &opts, 1).await,
            call(&limits, "k", &opts, 5).await,
            call(&limits, "k", &opts, 2).await,
            call(&limits, "k", &opts, 1).await,
        ]);
        assert_eq!(
            seen,
            [
                "allow 3,1,0",
                "deny 3,1,0,1",
                "deny 3,1,0,1",
                // February of a leap year: 29 days until March 1 at local midnight.
                "allow 3,2505600,2",
                "deny 3,2505600,2,2505600",
                "allow 3,2505600,0",
                "deny 3,2505600,0,2505600",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn months_have_their_own_lengths_and_leap_days_count() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(10), Opt::Str("month"), Opt::Int(330)];
    for (backend, limits, clock, year) in backends(&redis) {
        let mut seen = Vec::new();
        // The leap day at noon, UTC+05:30: 12 hours of February are left.
        clock.set(local_ms((year, 2, 29), (12, 0, 0), 330));
        seen.push(call(&limits, "leap", &opts, 4).await);
        // The year before is no leap year: February 1 at midnight has 28 days to go.
        clock.set(local_ms((year - 1, 2, 1), (0, 0, 0), 330));
        seen.push(call(&limits, "plain", &opts, 1).await);
        // 30 days in April, 31 in December, which ends the year.
        clock.set(local_ms((year, 4, 1), (0, 0, 0), 330));
        seen.push(call(&limits, "april", &opts, 1).await);
        clock.set(local_ms((year, 12, 1), (0, 0, 0), 330));
        seen.push(call(&limits, "december", &opts, 1).await);
        assert_eq!(
            seen,
            [
                "allow 10,43200,6",
                "allow 10,2419200,9",
                "allow 10,2592000,9",
                "allow 10,2678400,9",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn days_end_at_local_midnight_whichever_side_of_utc() {
    let redis = RedisServer::start();
    let west = [Opt::Int(2), Opt::Str("day"), Opt::Int(-300)];
    let east = [Opt::Int(2), Opt::Str("day"), Opt::Int(330)];
    for (backend, limits, clock, year) in backends(&redis) {
        let mut seen = Vec::new();
        // UTC midnight is 19:00 at UTC-05:00: the day goes on for 5 hours.
        clock.set(local_ms((year, 3, 1), (0, 0, 0), 0));
        seen.push(call(&limits, "west", &west, 2).await);
        seen.push(call(&limits, "west", &west, 1).await);
        // And 05:30 at UTC+05:30, whose day began at 18:30 UTC the evening before.
        seen.push(call(&limits, "east", &east, 2).await);
        seen.push(call(&limits, "east", &east, 1).await);
        // One second before the local midnights, then at them.
        clock.set(local_ms((year, 3, 1), (23, 59, 59), 330));
        seen.push(call(&limits, "east", &east, 1).await);
        clock.set(local_ms((year, 3, 2), (0, 0, 0), 330));
        seen.push(call(&limits, "east", &east, 1).await);
        clock.set(local_ms((year, 2, 29), (23, 59, 59), -300));
        seen.push(call(&limits, "west", &west, 1).await);
        clock.set(local_ms((year, 3, 1), (0, 0, 0), -300));
        seen.push(call(&limits, "west", &west, 1).await);
        assert_eq!(
            seen,
            [
                "allow 2,18000,0",
                "deny 2,18000,0,18000",
                "allow 2,66600,0",
                "deny 2,66600,0,66600",
                "deny 2,1,0,1",
                "allow 2,86400,1",
                "deny 2,1,0,1",
                "allow 2,86400,1",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn weeks_run_from_monday_at_local_midnight() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(1), Opt::Str("week"), Opt::Int(60)];
    for (backend, limits, clock, year) in backends(&redis) {
        let mut seen = Vec::new();
        // The leap day is a Tuesday in 2028 and 2084; the week ends Sunday, March 5.
        clock.set(local_ms((year, 2, 29), (0, 0, 0), 60));
        seen.push(call(&limits, "k", &opts, 1).await);
        clock.set(local_ms((year, 3, 5), (23, 59, 58), 60));
        seen.push(call(&limits, "k", &opts, 1).await);
        clock.set(local_ms((year, 3, 6), (0, 0, 0), 60));
        seen.push(call(&limits, "k", &opts, 1).await);
        assert_eq!(
            seen,
            ["allow 1,518400,0", "deny 1,2,0,2", "allow 1,604800,0"],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_redis_key_lives_until_a_minute_after_its_period() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(local_ms((2084, 1, 31), (23, 0, 0), -300));
    let prefix = unique_prefix("calendar-ttl");
    let limits = PlugLimit::builder(redis.pool())
        .prefix(prefix.clone())
        .clock(clock)
        .build()
        .unwrap();
    let opts = [Opt::Int(5), Opt::Str("month"), Opt::Int(-300)];
    assert_eq!(call(&limits, "k", &opts, 2).await, "allow 5,3600,3");
    let mut conn = redis.connection().await;
    let keys: Vec<String> = deadpool_redis::redis::cmd("KEYS")
        .arg(format!("*{prefix}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let [key] = keys.as_slice() else {
        panic!("one key expected: {keys:?}")
    };
    let ends = local_ms((2084, 2, 1), (0, 0, 0), -300);
    let (stored, expires): (String, i64) = deadpool_redis::redis::pipe()
        .cmd("GET")
        .arg(key)
        .cmd("PEXPIRETIME")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, format!("{ends} 2"));
    assert_eq!(expires, ends + 60_000);
}

#[tokio::test]
async fn without_a_clock_redis_times_the_day_itself() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .prefix(unique_prefix("calendar-time"))
        .build()
        .unwrap();
    let opts = [Opt::Int(2), Opt::Str("day"), Opt::Int(0)];
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let outcome = limits.check(limit(LIMITER, &opts), "k").await.unwrap();
    let now_s = i64::try_from(since_epoch.as_secs()).unwrap() % 86_400;
    let reset: i64 = outcome.headers()[1].1.to_str().unwrap().parse().unwrap();
    // Seconds to the next UTC midnight, give or take the second the call may cross.
    let expected = 86_400 - now_s;
    assert!(
        (expected - 1..=expected).contains(&reset),
        "reset {reset}, expected about {expected}"
    );
    assert_eq!(outcome.headers()[2].1, "1");
}

#[tokio::test]
async fn draft10_policies_name_the_period_and_count_to_its_end() {
    let clock = ManualClock::new(local_ms((2028, 2, 29), (12, 0, 0), 0));
    let limits = PlugLimit::builder(Store::memory())
        .clock(clock.clone())
        .header_style(HeaderStyle::Draft10)
        .build()
        .unwrap();
    let opts = [Opt::Int(100), Opt::Str("month"), Opt::Int(0)];
    let outcome = limits
        .check(limit_cost(LIMITER, &opts, 40), "k")
        .await
        .unwrap();
    let values: Vec<String> = outcome
        .headers()
        .iter()
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
        .collect();
    assert_eq!(values.len(), 2, "{values:?}");
    assert!(
        values[0].starts_with("ratelimit-policy: \"calendar_quota\";q=100;w=2629746;pk=:"),
        "{values:?}"
    );
    assert!(
        values[1].starts_with("ratelimit: \"calendar_quota\";r=60;t=43200;pk=:"),
        "{values:?}"
    );
    drop(clock);
}

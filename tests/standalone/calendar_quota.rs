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

/// The backends a case in a time zone runs on: memory in 2026, and memory and Redis in 2082,
/// which has the calendar of 2026 (56 years on) and the same rules in Europe/Berlin (the last
/// Sundays of March and October), so the expiries Redis keeps are never in its own past.
fn zoned_backends(redis: &RedisServer) -> Vec<(String, PlugLimit, ManualClock, i64)> {
    let mut all = Vec::new();
    for (name, year) in [("memory", 2026), ("memory", 2082), ("redis", 2082)] {
        let clock = ManualClock::new(0);
        let builder = if name == "redis" {
            PlugLimit::builder(redis.pool())
        } else {
            PlugLimit::builder(Store::memory())
        };
        let limits = builder
            .prefix(unique_prefix("calendar-tz"))
            .clock(clock.clone())
            .build()
            .unwrap();
        all.push((format!("{name} {year}"), limits, clock, year));
    }
    all
}

/// Europe/Berlin's offsets, in minutes: winter (CET) and summer (CEST).
const CET: i64 = 60;
const CEST: i64 = 120;

#[tokio::test]
async fn a_berlin_day_of_the_spring_change_lasts_23_hours() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(2), Opt::Str("day"), Opt::Str("Europe/Berlin")];
    let fixed = [Opt::Int(2), Opt::Str("day"), Opt::Int(CEST)];
    for (backend, limits, clock, year) in zoned_backends(&redis) {
        // Sunday 29 March, 00:00 CET: the clocks go from 02:00 CET to 03:00 CEST.
        clock.set(local_ms((year, 3, 29), (0, 0, 0), CET));
        let mut seen = vec![call(&limits, "k", &opts, 1).await];
        // 03:00 CEST is two hours after midnight (02:00 CET): 21 hours to go.
        clock.set(local_ms((year, 3, 29), (3, 0, 0), CEST));
        seen.extend([
            call(&limits, "k", &opts, 1).await,
            call(&limits, "k", &opts, 1).await,
            // The fixed offset of the summer keys apart, and its day ends at the same midnight.
            call(&limits, "k", &fixed, 1).await,
        ]);
        clock.set(local_ms((year, 3, 29), (23, 59, 59), CEST));
        seen.push(call(&limits, "k", &opts, 1).await);
        clock.set(local_ms((year, 3, 30), (0, 0, 0), CEST));
        seen.push(call(&limits, "k", &opts, 1).await);
        assert_eq!(
            seen,
            [
                "allow 2,82800,1",
                "allow 2,75600,0",
                "deny 2,75600,0,75600",
                "allow 2,75600,1",
                "deny 2,1,0,1",
                "allow 2,86400,1",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_berlin_day_of_the_autumn_change_lasts_25_hours() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(2), Opt::Str("day"), Opt::Str("Europe/Berlin")];
    for (backend, limits, clock, year) in zoned_backends(&redis) {
        // Sunday 25 October, 00:00 CEST: the clocks go from 03:00 CEST back to 02:00 CET.
        clock.set(local_ms((year, 10, 25), (0, 0, 0), CEST));
        let mut seen = vec![call(&limits, "k", &opts, 1).await];
        // 02:30 CET, the second 02:30 of the day: 3.5 hours after midnight.
        clock.set(local_ms((year, 10, 25), (2, 30, 0), CET));
        seen.push(call(&limits, "k", &opts, 1).await);
        seen.push(call(&limits, "k", &opts, 0).await);
        clock.set(local_ms((year, 10, 25), (23, 59, 59), CET));
        seen.push(call(&limits, "k", &opts, 1).await);
        clock.set(local_ms((year, 10, 26), (0, 0, 0), CET));
        seen.push(call(&limits, "k", &opts, 1).await);
        assert_eq!(
            seen,
            [
                "allow 2,90000,1",
                "allow 2,77400,0",
                "deny 2,77400,0,77400",
                "deny 2,1,0,1",
                "allow 2,86400,1",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_berlin_month_across_the_spring_change_is_an_hour_short() {
    let redis = RedisServer::start();
    let opts = [Opt::Int(3), Opt::Str("month"), Opt::Str("Europe/Berlin")];
    for (backend, limits, clock, year) in zoned_backends(&redis) {
        clock.set(local_ms((year, 3, 1), (0, 0, 0), CET));
        let mut seen = vec![call(&limits, "k", &opts, 2).await];
        // Past the change: March ends at midnight CEST, 22:00 UTC.
        clock.set(local_ms((year, 3, 31), (23, 0, 0), CEST));
        seen.push(call(&limits, "k", &opts, 2).await);
        seen.push(call(&limits, "k", &opts, 1).await);
        clock.set(local_ms((year, 4, 1), (0, 0, 0), CEST));
        seen.push(call(&limits, "k", &opts, 3).await);
        assert_eq!(
            seen,
            [
                // 31 days less the hour the change skips.
                "allow 3,2674800,1",
                "deny 3,3600,1,3600",
                "allow 3,3600,0",
                // April: 30 whole days of summer time.
                "allow 3,2592000,0",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn zones_a_half_and_three_quarters_of_an_hour_off_end_at_their_midnights() {
    let redis = RedisServer::start();
    let kathmandu = [Opt::Int(1), Opt::Str("day"), Opt::Str("Asia/Kathmandu")];
    let kolkata = [Opt::Int(5), Opt::Str("week"), Opt::Str("Asia/Kolkata")];
    for (backend, limits, clock, year) in zoned_backends(&redis) {
        // Monday 15 June, 23:45 in Kathmandu (UTC+05:45): 18:00 UTC.
        clock.set(local_ms((year, 6, 15), (23, 45, 0), 345));
        let mut seen = vec![
            call(&limits, "k", &kathmandu, 1).await,
            call(&limits, "k", &kathmandu, 1).await,
            // The same instant in Kolkata (UTC+05:30) is 23:30 on the Monday of the week.
            call(&limits, "k", &kolkata, 5).await,
        ];
        clock.set(local_ms((year, 6, 16), (0, 0, 0), 345));
        seen.push(call(&limits, "k", &kathmandu, 1).await);
        clock.set(local_ms((year, 6, 22), (0, 0, 0), 330));
        seen.push(call(&limits, "k", &kolkata, 1).await);
        assert_eq!(
            seen,
            [
                "allow 1,900,0",
                "deny 1,900,0,900",
                // Six days and a half hour to Monday 00:00 in Kolkata.
                "allow 5,520200,0",
                "allow 1,86400,0",
                "allow 5,604800,4",
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_zone_without_a_clock_is_timed_by_the_process_on_redis() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .prefix(unique_prefix("calendar-tz-time"))
        .build()
        .unwrap();
    let opts = [Opt::Int(2), Opt::Str("day"), Opt::Str("Etc/UTC")];
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let outcome = limits.check(limit(LIMITER, &opts), "k").await.unwrap();
    let now_s = i64::try_from(since_epoch.as_secs()).unwrap() % 86_400;
    let reset: i64 = outcome.headers()[1].1.to_str().unwrap().parse().unwrap();
    let expected = 86_400 - now_s;
    assert!(
        (expected - 1..=expected).contains(&reset),
        "reset {reset}, expected about {expected}"
    );
}

#[test]
fn an_unknown_zone_is_refused_when_the_limit_is_made() {
    let error =
        plug_limit::RuntimeLimit::new(LIMITER, [Opt::Int(5), "day".into(), "Europe/Berln".into()])
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid `opts`: calendar_quota: utc_offset_minutes must be an integer from -1439 to \
         1439 or an IANA time zone name, got 'Europe/Berln'"
    );
    let long = format!("Europe/{}", "B".repeat(100));
    let error = plug_limit::RuntimeLimit::new(LIMITER, [Opt::Int(5), "day".into(), long.into()])
        .unwrap_err();
    assert!(error.to_string().ends_with("… (107 bytes)'"), "{error}");
    assert!(
        plug_limit::RuntimeLimit::new(LIMITER, [Opt::Int(5), "day".into(), "Asia/Kolkata".into()])
            .is_ok()
    );
}

#[tokio::test]
async fn a_zone_quota_stacks_and_a_denial_gives_back_the_limits_before_it() {
    let redis = RedisServer::start();
    let hourly = limit("fixed_window", &[Opt::Int(10), Opt::Int(3600)]);
    let daily = limit(
        LIMITER,
        &[Opt::Int(2), Opt::Str("day"), Opt::Str("Europe/Berlin")],
    );
    let stack = [(hourly.clone(), "k"), (daily.clone(), "k")];
    for (backend, limits, clock, year) in zoned_backends(&redis) {
        // 03:00 CEST on the day of the spring change: 21 hours to its midnight.
        clock.set(local_ms((year, 3, 29), (3, 0, 0), CEST));
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(render(&limits.check_all(&stack).await.unwrap()));
        }
        // The third was denied by the day's quota: the hour's window got its unit back, and a
        // peek (what one more would get) finds two counted, not three.
        seen.push(render(&limits.peek(&hourly, "k").await.unwrap()));
        clock.set(local_ms((year, 3, 30), (0, 0, 0), CEST));
        seen.push(render(&limits.check_all(&stack).await.unwrap()));
        assert_eq!(
            seen,
            [
                "allow 2,75600,1",
                "allow 2,75600,0",
                "deny 2,75600,0,75600",
                "allow 10,3600,7",
                "allow 2,86400,1",
            ],
            "{backend}"
        );
    }
    // Without a clock, Redis is sent the process's time with the period's end found for it.
    let limits = PlugLimit::builder(redis.pool())
        .prefix(unique_prefix("calendar-tz-stack"))
        .build()
        .unwrap();
    let utc = limit(
        LIMITER,
        &[Opt::Int(2), Opt::Str("day"), Opt::Str("Etc/UTC")],
    );
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let outcome = limits.check_all(&[(utc, "k")]).await.unwrap();
    let expected = 86_400 - i64::try_from(since_epoch.as_secs()).unwrap() % 86_400;
    let reset: i64 = outcome.headers()[1].1.to_str().unwrap().parse().unwrap();
    assert!(
        (expected - 1..=expected).contains(&reset),
        "reset {reset}, expected about {expected}"
    );
}

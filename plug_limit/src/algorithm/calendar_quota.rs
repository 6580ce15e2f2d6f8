//! `lua/calendar_quota.lua` with an explicit `now`: a count per calendar day, ISO week or
//! month in local time at a fixed UTC offset or in an IANA time zone, kept with the end of
//! the period it counts.
//!
//! In a time zone the script takes the period's end from its caller: [`zone_end`] finds it,
//! for the Redis backend (which sends it with the `now` it was found from) and for this twin
//! alike.
//!
//! Every value is an integer below 2^53, where the script's doubles are exact, so this mirror
//! computes in `i64`: `div_euclid`/`rem_euclid` are Lua's floored `/` with `math.floor` and `%`.
//!
//! As the script: the period's end found ([`ends`]) and its count read once, then a function for
//! each way a call goes, in its order: [`refund`] (`-n`), [`force`] (`+n`), then [`take`].

use plug_limit_options::{Builtin, Refusal};

use super::Field;
use super::argv::{Arg, Argv, CAP, decimal, fail, replied};
use super::state::{Reply, State, Stored};
use crate::limit::{Charge, Opt};

const BUILTIN: Builtin = Builtin::CalendarQuota;
const DAY_MS: i64 = 86_400_000;
/// A key outlives its period by this much.
const MARGIN_MS: i64 = 60_000;

/// A calendar period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Day,
    Week,
    Month,
}

impl Period {
    /// The period at `position` in `plug_limit_options::PERIODS`.
    fn at(position: usize) -> Option<Self> {
        [Self::Day, Self::Week, Self::Month].get(position).copied()
    }

    /// The first local day of the period holding local day `day` (days since 1970-01-01),
    /// and the first of the next one.
    fn bounds(self, day: i64) -> (i64, i64) {
        match self {
            Self::Day => (day, day + 1),
            Self::Week => {
                // 1970-01-01 was a Thursday; ISO weeks start on Monday.
                let first = day - (day + 3).rem_euclid(7);
                (first, first + 7)
            }
            Self::Month => {
                let (year, month, date) = civil_from_days(day);
                let first = day - (date - 1);
                (first, first + days_in_month(year, month))
            }
        }
    }
}

/// A period's nominal length in seconds, for a policy that names one window for every request:
/// a day, an ISO week, or the mean Gregorian month (146097 days in 4800 months).
pub(crate) fn period_seconds(period: &str) -> Option<i64> {
    match Period::at(plug_limit_options::period(period).ok()?)? {
        Period::Day => Some(86_400),
        Period::Week => Some(604_800),
        Period::Month => Some(2_629_746),
    }
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let date = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, date)
}

/// How many days `month` (1..=12) of `year` has.
pub(crate) fn days_in_month(year: i64, month: i64) -> i64 {
    if month == 2 {
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        if leap { 29 } else { 28 }
    } else {
        31 - (month - 1) % 7 % 2
    }
}

/// The time zone name of a calendar quota's `opts`, if its third option is one (a call of any
/// other limiter, or with an offset, has none: `None` at the cost of a look at one option).
pub(crate) fn zone_name(opts: &[Opt]) -> Option<&str> {
    match opts.get(2)?.arg() {
        Arg::Str(name) if plug_limit_options::is_zone_form(name) => Some(name),
        _ => None,
    }
}

/// When the period of a calendar quota in the time zone `name` holding `now_ms` ends, in ms
/// since the epoch: what the script takes as its `period_end` (`ARGV[6]`), with `now_ms` as
/// its `now`. `opts` are checked as the script checks them first.
///
/// # Errors
///
/// The script's refusal of an option, or of a name the tz database does not know, in the
/// words `RuntimeLimit` refuses it with when it is made.
pub(crate) fn zone_end(opts: &[Opt], name: &str, now_ms: i64) -> Result<i64, String> {
    period_end(opts, name, now_ms).map_err(String::from)
}

/// [`zone_end`], refused in the catalogue's type, as the twin refuses.
fn period_end(opts: &[Opt], name: &str, now_ms: i64) -> Result<i64, Refusal> {
    let argv = Argv::new(opts, None, Charge::Take(1), now_ms, None);
    let [_, period, _] = argv.options(BUILTIN)?;
    let refuse = || {
        let rule = plug_limit_options::Rule::TimeZone.script_words();
        fail(
            BUILTIN.name(),
            BUILTIN.params()[2].name,
            &rule,
            Arg::Str(name),
        )
    };
    let zone = crate::zone::find(name).ok_or_else(refuse)?;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a position in PERIODS
    crate::zone::period_end(&zone, period as usize, now_ms).ok_or_else(refuse)
}

#[allow(clippy::cast_possible_truncation)] // every value is validated to stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, period, offset] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(BUILTIN.name(), 3)?;
    let now = now as i64;
    let ends = ends(argv, period, offset as i64, now)?;
    let quota = Quota {
        limit: limit as i64,
        ends,
        // ceil((ends - now) / 1000); ends > now, so the quotient is positive.
        reset: decimal((ends - now + 999) / 1000),
        count: count(slot.as_ref(), ends),
    };
    match units {
        Charge::Refund(cost) => refund(&quota, cost as i64, slot),
        Charge::Force(cost) => force(&quota, cost as i64, slot),
        Charge::Take(cost) => take(&quota, cost as i64, slot),
    }
}

/// When the period holding `now` ends: where the Redis backend sends the end it found for
/// `now`, this twin finds it; at an offset, the script's day arithmetic.
fn ends(argv: &Argv<'_>, period: f64, offset: i64, now: i64) -> Result<i64, Refusal> {
    if let Some(name) = zone_name(argv.opts()) {
        return period_end(argv.opts(), name, now);
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a position in PERIODS
    let period = Period::at(period as usize).unwrap_or(Period::Day);
    let shift = offset * 60_000;
    let (_, next_first) = period.bounds((now + shift).div_euclid(DAY_MS));
    Ok(next_first * DAY_MS - shift)
}

/// The script's GET: a count of another period (or of another offset) is over.
fn count(slot: Option<&Stored>, ends: i64) -> i64 {
    match slot {
        Some(Stored {
            state: State::CalendarQuota { ends_ms, count },
            ..
        }) if *ends_ms == ends => *count,
        _ => 0,
    }
}

/// The period's count as the script reads it, and the headers it answers with.
struct Quota {
    limit: i64,
    ends: i64,
    reset: Field,
    count: i64,
}

impl Quota {
    /// The script's `SET "<ends> <count>" PXAT`: a minute past the period's end.
    fn store(&self, count: i64) -> Option<Stored> {
        Some(Stored {
            state: State::CalendarQuota {
                ends_ms: self.ends,
                count,
            },
            expires_at_ms: self.ends + MARGIN_MS,
        })
    }
}

/// The script's `sign == '-'`: the count goes down, and a count of 0 is no key.
fn refund(quota: &Quota, cost: i64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let mut count = quota.count;
    if count > 0 {
        count = (count - cost).max(0);
        *slot = if count > 0 { quota.store(count) } else { None };
    }
    let left = decimal((quota.limit - count).max(0));
    replied(true, [decimal(quota.limit), quota.reset.clone(), left])
}

/// The script's `sign == '+'`: the count goes past the limit, up to [`CAP`].
fn force(quota: &Quota, cost: i64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let count = (quota.count + cost).min(CAP);
    *slot = quota.store(count);
    let (limit_s, reset) = (decimal(quota.limit), quota.reset.clone());
    if count <= quota.limit {
        return replied(true, [limit_s, reset, decimal(quota.limit - count)]);
    }
    replied(false, [limit_s, reset.clone(), Field::Int(0), reset])
}

/// The script's take (a cost of 0 peeks, as a cost-1 request); a deny's retry-after is the
/// reset, when the quota renews.
fn take(quota: &Quota, cost: i64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let (limit, count, need) = (quota.limit, quota.count, cost.max(1));
    let (limit_s, reset) = (decimal(limit), quota.reset.clone());
    if count + need <= limit {
        if cost > 0 {
            *slot = quota.store(count + cost);
        }
        return replied(true, [limit_s, reset, decimal(limit - count - need)]);
    }
    // Nothing is taken; what is left may be below a lowered limit's count.
    let left = decimal((limit - count).max(0));
    replied(false, [limit_s, reset.clone(), left, reset])
}

#[cfg(test)]
mod tests {
    use super::super::state::{State, Stored};
    use super::super::tests::{evaluate, run_scenarios};
    use super::*;
    use crate::limit::Opt;

    #[test]
    fn shared_scenarios() {
        run_scenarios("calendar_quota");
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date, counted the slow way.
    fn days(year: i64, month: i64, date: i64) -> i64 {
        let mut total = 0;
        for y in 1970..year {
            total += (1..=12).map(|m| days_in_month(y, m)).sum::<i64>();
        }
        total + (1..month).map(|m| days_in_month(year, m)).sum::<i64>() + date - 1
    }

    #[test]
    fn civil_dates_round_trip_through_four_centuries() {
        let mut day = days(1970, 1, 1);
        for year in 1970..2370 {
            for month in 1..=12 {
                for date in 1..=days_in_month(year, month) {
                    assert_eq!(civil_from_days(day), (year, month, date));
                    day += 1;
                }
            }
        }
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(days(2028, 2, 29), 21_243);
        assert_eq!(civil_from_days(21_243), (2028, 2, 29));
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
    }

    #[test]
    fn periods_start_on_midnight_monday_and_the_first() {
        // 2028-03-01 is a Wednesday.
        let day = days(2028, 3, 1);
        assert_eq!(Period::Day.bounds(day), (day, day + 1));
        assert_eq!(Period::Week.bounds(day), (day - 2, day + 5));
        assert_eq!(Period::Month.bounds(day), (day, day + 31));
        assert_eq!(Period::Month.bounds(day - 1), (day - 29, day));
    }

    #[test]
    fn state_is_the_count_and_the_period_end() {
        let opts = [Opt::Int(3), Opt::Str("day"), Opt::Int(0)];
        let mut slot = None;
        evaluate("calendar_quota", &opts, 2, 1_000, &mut slot).unwrap();
        let stored = |count| {
            Some(Stored {
                state: State::CalendarQuota {
                    ends_ms: DAY_MS,
                    count,
                },
                expires_at_ms: DAY_MS + MARGIN_MS,
            })
        };
        assert_eq!(slot, stored(2));
        // Neither a denial nor a peek writes.
        let denied = evaluate("calendar_quota", &opts, 2, 2_000, &mut slot).unwrap();
        assert!(!denied.allow);
        evaluate("calendar_quota", &opts, 0, 2_000, &mut slot).unwrap();
        assert_eq!(slot, stored(2));
        let mut fresh = None;
        evaluate("calendar_quota", &opts, 4, 2_000, &mut fresh).unwrap();
        assert_eq!(fresh, None);
    }
}

//! calendar_quota's IANA time zones: whether the tz database knows a name, and when a local
//! day, ISO week or month ends there.
//!
//! The database is the one `jiff` bundles (feature `tzdb-bundle-always`, without
//! `tz-system`), never the host's: every instance of an application, whatever its system,
//! finds the same local midnights. A script cannot know a zone's rules, so the end of the
//! period is found here from `now` and passed to it with that `now` (see
//! `lua/calendar_quota.lua`); the memory twin finds it here too.

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// The zone the tz database knows by `name`; `None` for a name it does not know.
pub(crate) fn find(name: &str) -> Option<TimeZone> {
    TimeZone::get(name).ok()
}

/// When the period (`period`: its position in `plug_limit_options::PERIODS`, day, week or
/// month) holding the instant `now_ms` ends in `zone`, in ms since the epoch: the next local
/// midnight, Monday 00:00 or 1st 00:00 (where a change of offset skips that midnight, the
/// first instant of the local day). `None` for an instant or a date jiff cannot represent,
/// far outside what the scripts take.
pub(crate) fn period_end(zone: &TimeZone, period: usize, now_ms: i64) -> Option<i64> {
    let today = Timestamp::from_millisecond(now_ms)
        .ok()?
        .to_zoned(zone.clone())
        .date();
    let next: Date = match period {
        0 => today.tomorrow().ok()?,
        1 => {
            let into_week = i64::from(today.weekday().to_monday_zero_offset());
            today.checked_add((7 - into_week).days()).ok()?
        }
        _ => today.first_of_month().checked_add(1.month()).ok()?,
    };
    let start = next.to_zoned(zone.clone()).ok()?.start_of_day().ok()?;
    Some(start.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    fn at(text: &str) -> i64 {
        text.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn days_end_at_local_midnight_across_changes_of_offset() {
        let berlin = find("Europe/Berlin").unwrap();
        // 2026-03-29 in Berlin: from 00:00 CET (23:00 UTC the day before) to 00:00 CEST.
        let spring = at("2026-03-28T23:00:00Z");
        assert_eq!(period_end(&berlin, 0, spring), Some(spring + 23 * HOUR));
        // 2026-10-25: from 00:00 CEST (22:00 UTC the day before) to 00:00 CET, 25 hours.
        let autumn = at("2026-10-24T22:00:00Z");
        assert_eq!(period_end(&berlin, 0, autumn), Some(autumn + 25 * HOUR));
        // A month across a change: March 2026 lasts 31 days less an hour.
        let march = at("2026-02-28T23:00:00Z");
        assert_eq!(
            period_end(&berlin, 2, march),
            Some(march + 31 * 24 * HOUR - HOUR)
        );
        assert_eq!(
            period_end(&berlin, 2, march + 10 * 24 * HOUR),
            Some(at("2026-03-31T22:00:00Z"))
        );
        // The ISO week of the spring change (Monday 23 to Sunday 29 March) lasts 167 hours.
        let monday = at("2026-03-22T23:00:00Z");
        assert_eq!(period_end(&berlin, 1, monday), Some(monday + 167 * HOUR));
    }

    #[test]
    fn offsets_of_half_and_three_quarter_hours() {
        let kathmandu = find("Asia/Kathmandu").unwrap();
        assert_eq!(
            period_end(&kathmandu, 0, at("2026-06-15T12:00:00Z")),
            Some(at("2026-06-15T18:15:00Z"))
        );
        let kolkata = find("Asia/Kolkata").unwrap();
        assert_eq!(
            period_end(&kolkata, 2, at("2026-06-15T12:00:00Z")),
            Some(at("2026-06-30T18:30:00Z"))
        );
        assert!(find("Europe/Berln").is_none());
        assert!(find("Etc/GMT+5").is_some() && find("UTC").is_some());
    }
}

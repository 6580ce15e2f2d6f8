//! The rules themselves: bounds, and predicates usable in `const` items.

/// The largest option (and cost) a built-in takes: every value stays exact in Lua's doubles
/// and valid for `EXPIRE`.
pub const MAX: u32 = 2_147_483_647;

/// The largest `limit * window` of `leaky_bucket`, which keeps its level in
/// unit-milliseconds: 2^53 / 1000, so the level stays an exact integer in Lua's doubles.
pub const MAX_LEAKY_PRODUCT: u64 = 9_007_199_254_740;

/// The largest UTC offset either way `calendar_quota` takes, in minutes: under a day.
pub const MAX_UTC_OFFSET: i64 = 1439;

/// The longest time zone name `calendar_quota` takes, in bytes (the tz database's longest is
/// 32).
pub const MAX_ZONE_NAME: usize = 64;

/// The periods `calendar_quota` takes.
pub const PERIODS: [&str; 3] = ["day", "week", "month"];

/// A rule an option breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Not an integer of 1 or more.
    PositiveInteger,
    /// A whole number, but past [`MAX`].
    AtMostMax,
    /// token_bucket's burst of 0.
    AtLeastOne,
    /// A burst past the limit.
    AtMostLimit,
    /// leaky_bucket's `limit * window` past [`MAX_LEAKY_PRODUCT`].
    LeakyProduct,
    /// Not one of [`PERIODS`].
    Period,
    /// Not an integer within [`MAX_UTC_OFFSET`] either way.
    UtcOffset,
    /// Text led by a letter, as a time zone name is, but not the name of one.
    TimeZone,
    /// Not `"<limit>/<window>"` with positive integers in plain digits.
    RateForm,
    /// A rate whose limit (or else window), named, is past [`MAX`].
    RateBound(&'static str),
    /// A rate with the window of an earlier one, at this position from 1.
    RepeatedWindow(usize),
    /// No rate at all.
    NoRates,
}

impl Rule {
    /// The rule as the scripts word it, after the option's name.
    #[must_use]
    pub fn script_words(self) -> String {
        match self {
            Self::PositiveInteger => "must be a positive integer".to_owned(),
            Self::AtMostMax => "must be <= 2147483647".to_owned(),
            Self::AtLeastOne => "must be >= 1".to_owned(),
            Self::AtMostLimit => "must be <= limit".to_owned(),
            Self::LeakyProduct => "must be <= 9007199254740 / limit".to_owned(),
            Self::Period => "must be day, week or month".to_owned(),
            Self::UtcOffset => "must be an integer from -1439 to 1439".to_owned(),
            Self::TimeZone => {
                "must be an integer from -1439 to 1439 or an IANA time zone name".to_owned()
            }
            Self::RateForm => "must be \"<limit>/<window>\" with positive integers".to_owned(),
            Self::RateBound(_) => "must have limit and window <= 2147483647".to_owned(),
            Self::RepeatedWindow(first) => format!("must not repeat the window of opt {first}"),
            Self::NoRates => "must hold at least one \"<limit>/<window>\"".to_owned(),
        }
    }
}

/// A count (limit, window, lease): 1 to [`MAX`].
///
/// # Errors
///
/// [`Rule::PositiveInteger`] for 0, [`Rule::AtMostMax`] past [`MAX`].
pub const fn count(n: u64) -> Result<(), Rule> {
    if n == 0 {
        Err(Rule::PositiveInteger)
    } else if n > MAX as u64 {
        Err(Rule::AtMostMax)
    } else {
        Ok(())
    }
}

/// A burst: 1 to the limit.
///
/// # Errors
///
/// [`Rule::PositiveInteger`] for 0, [`Rule::AtMostLimit`] past `limit`.
pub const fn burst(burst: u64, limit: u64) -> Result<(), Rule> {
    if burst == 0 {
        Err(Rule::PositiveInteger)
    } else if burst > limit {
        Err(Rule::AtMostLimit)
    } else {
        Ok(())
    }
}

/// leaky_bucket's limit and window together: `limit * window` at most
/// [`MAX_LEAKY_PRODUCT`].
///
/// # Errors
///
/// [`Rule::LeakyProduct`] past it.
pub const fn leaky(limit: u64, window: u64) -> Result<(), Rule> {
    match limit.checked_mul(window) {
        Some(product) if product <= MAX_LEAKY_PRODUCT => Ok(()),
        _ => Err(Rule::LeakyProduct),
    }
}

/// calendar_quota's offset from UTC, in minutes: within [`MAX_UTC_OFFSET`] either way.
///
/// # Errors
///
/// [`Rule::UtcOffset`] past it.
pub const fn utc_offset(minutes: i64) -> Result<(), Rule> {
    if -MAX_UTC_OFFSET <= minutes && minutes <= MAX_UTC_OFFSET {
        Ok(())
    } else {
        Err(Rule::UtcOffset)
    }
}

/// Whether a limiter's name may hold `c`: not whitespace, not `:` (which ends the name in a
/// key), not a control character and not an invisible format character (a right-to-left
/// override, a zero-width space): a name is in every key and log line of its limiter, where
/// those would be read as something else. Any other character, non-ASCII letters included.
#[must_use]
pub fn limiter_name_char(c: char) -> bool {
    !(c.is_whitespace()
        || c == ':'
        || c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        ))
}

/// Whether calendar_quota's third option is written as a time zone name rather than an offset:
/// text led by an ASCII letter (an offset is digits, maybe after a `-`).
#[must_use]
pub const fn is_zone_form(text: &str) -> bool {
    matches!(text.as_bytes().first(), Some(b'A'..=b'Z' | b'a'..=b'z'))
}

/// The form of an IANA time zone name (`Europe/Berlin`, `America/Argentina/Buenos_Aires`,
/// `Etc/GMT+5`, `UTC`): led by a letter, then letters, digits, `/`, `_`, `-` and `+`, at most
/// [`MAX_ZONE_NAME`] bytes. Whether the tz database knows it is plug_limit's check, which has
/// the database.
///
/// # Errors
///
/// [`Rule::TimeZone`] for any other text.
pub const fn zone_name(text: &str) -> Result<(), Rule> {
    let bytes = text.as_bytes();
    if !is_zone_form(text) || bytes.len() > MAX_ZONE_NAME {
        return Err(Rule::TimeZone);
    }
    let mut i = 0;
    while i < bytes.len() {
        if !matches!(bytes[i], b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'_' | b'-' | b'+')
        {
            return Err(Rule::TimeZone);
        }
        i += 1;
    }
    Ok(())
}

/// calendar_quota's period: its position in [`PERIODS`].
///
/// # Errors
///
/// [`Rule::Period`] for any other text.
pub const fn period(text: &str) -> Result<usize, Rule> {
    let mut i = 0;
    while i < PERIODS.len() {
        if same(text.as_bytes(), PERIODS[i].as_bytes()) {
            return Ok(i);
        }
        i += 1;
    }
    Err(Rule::Period)
}

/// One multi_window rate, `"<limit>/<window>"` in plain digits without leading zeros (so the
/// text a script receives is the one written), as its limit and window.
///
/// # Errors
///
/// [`Rule::RateForm`] for any other text, [`Rule::RateBound`] for a number past [`MAX`]
/// (naming the limit if both are).
pub fn rate(text: &str) -> Result<(u32, u32), Rule> {
    let canonical = |digits: &str| {
        digits.starts_with(|c: char| matches!(c, '1'..='9'))
            && digits.bytes().all(|b| b.is_ascii_digit())
    };
    let Some((limit, window)) = text
        .split_once('/')
        .filter(|(limit, window)| canonical(limit) && canonical(window))
    else {
        return Err(Rule::RateForm);
    };
    let bounded = |digits: &str| digits.parse::<u32>().ok().filter(|n| *n <= MAX);
    match (bounded(limit), bounded(window)) {
        (Some(limit), Some(window)) => Ok((limit, window)),
        (None, _) => Err(Rule::RateBound("limit")),
        (Some(_), None) => Err(Rule::RateBound("window")),
    }
}

/// Whether two byte strings are equal, in a `const fn`.
pub(crate) const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_hold_at_their_edges() {
        assert_eq!(count(0), Err(Rule::PositiveInteger));
        assert_eq!(count(1), Ok(()));
        assert_eq!(count(u64::from(MAX)), Ok(()));
        assert_eq!(count(u64::from(MAX) + 1), Err(Rule::AtMostMax));
        assert_eq!(burst(0, 5), Err(Rule::PositiveInteger));
        assert_eq!(burst(5, 5), Ok(()));
        assert_eq!(burst(6, 5), Err(Rule::AtMostLimit));
        assert_eq!(leaky(3_000_000, 3_002_399), Ok(()));
        assert_eq!(leaky(3_000_000, 3_002_400), Err(Rule::LeakyProduct));
        assert_eq!(leaky(u64::MAX, 2), Err(Rule::LeakyProduct));
        assert_eq!(utc_offset(-1439), Ok(()));
        assert_eq!(utc_offset(1440), Err(Rule::UtcOffset));
        assert_eq!(zone_name("Europe/Berlin"), Ok(()));
        assert_eq!(zone_name("America/Argentina/Buenos_Aires"), Ok(()));
        assert_eq!(zone_name("Etc/GMT+5"), Ok(()));
        for text in [
            "",
            "-330",
            "+60",
            "/Berlin",
            "Europe/Ber lin",
            "Europe/../x",
            &"A".repeat(65),
        ] {
            assert_eq!(zone_name(text), Err(Rule::TimeZone), "{text}");
        }
        assert_eq!(period("week"), Ok(1));
        assert_eq!(period("year"), Err(Rule::Period));
        assert_eq!(period("Day"), Err(Rule::Period));
    }

    #[test]
    fn a_rate_is_plain_digits_either_side_of_a_slash() {
        assert_eq!(rate("5/3600"), Ok((5, 3600)));
        for text in [
            "05/3600", "5/", "/5", "5", "5/36 00", "-5/60", "5/60/1", "+5/60",
        ] {
            assert_eq!(rate(text), Err(Rule::RateForm), "{text}");
        }
        assert_eq!(rate("2147483648/1"), Err(Rule::RateBound("limit")));
        assert_eq!(rate("1/99999999999"), Err(Rule::RateBound("window")));
    }

    #[test]
    fn each_rule_has_the_scripts_words() {
        assert_eq!(
            Rule::RepeatedWindow(2).script_words(),
            "must not repeat the window of opt 2"
        );
        assert_eq!(
            Rule::LeakyProduct.script_words(),
            "must be <= 9007199254740 / limit"
        );
    }
}

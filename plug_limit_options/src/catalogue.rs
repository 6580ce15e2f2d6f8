//! The catalogue: every built-in, its options and their kinds, and the checks made of them.

use crate::arg::{Arg, Refusal};
use crate::rules::{self, MAX, Rule};

/// A built-in limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `fixed_window`: `[limit, window]`.
    FixedWindow,
    /// `token_bucket`: `[limit, window, burst]`.
    TokenBucket,
    /// `sliding_window`: `[limit, window]`.
    SlidingWindow,
    /// `sliding_log`: `[limit, window]`.
    SlidingLog,
    /// `leaky_bucket`: `[limit, window]`, `limit * window` bounded.
    LeakyBucket,
    /// `gcra`: `[limit, window, burst]`.
    Gcra,
    /// `multi_window`: `["<limit>/<window>", ...]`.
    MultiWindow,
    /// `calendar_quota`: `[limit, period, utc_offset_minutes]`.
    CalendarQuota,
    /// `concurrency`: `[limit, lease]`.
    Concurrency,
}

/// What kind of value an option is, which says its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer from 1 to [`MAX`].
    Count,
    /// A count of at most the limit (the first option).
    Burst,
    /// A count whose product with the limit is at most
    /// [`MAX_LEAKY_PRODUCT`](crate::MAX_LEAKY_PRODUCT).
    LeakyWindow,
    /// One of [`PERIODS`](crate::PERIODS).
    Period,
    /// Minutes from UTC, within [`MAX_UTC_OFFSET`](crate::MAX_UTC_OFFSET) either way, or an
    /// IANA time zone name ([`zone_name`](crate::zone_name)).
    UtcOffset,
    /// `"<limit>/<window>"`, any number of them, no window twice.
    Rate,
}

/// One option of a built-in, and the words of the compile-time refusals of a typed limit.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Its name, as the scripts and the errors call it.
    pub name: &'static str,
    /// Its kind.
    pub kind: Kind,
    /// A typed limit's refusal of 0.
    zero: &'static str,
    /// Of a value past its bound: [`MAX`], the limit (a burst), or the product (leaky_bucket).
    past: &'static str,
}

/// The params of a built-in named `$builtin`, each `($name, $kind)`, with their compile-time
/// words made once.
macro_rules! params {
    ($builtin:literal: $(($name:literal, $kind:ident)),+) => {
        &[$(Param {
            name: $name,
            kind: Kind::$kind,
            zero: concat!($builtin, ": `", $name, "` must be >= 1"),
            past: params!(@past $builtin, $name, $kind),
        }),+]
    };
    (@past $builtin:literal, $name:literal, Burst) => {
        concat!($builtin, ": `", $name, "` must be <= `limit`")
    };
    (@past $builtin:literal, $name:literal, LeakyWindow) => {
        concat!($builtin, ": `limit * window` must be <= 9007199254740")
    };
    (@past $builtin:literal, $name:literal, $kind:ident) => {
        concat!($builtin, ": `", $name, "` must be <= 2147483647")
    };
}

impl Builtin {
    /// Every built-in, in the order they are documented.
    pub const ALL: [Self; 9] = [
        Self::FixedWindow,
        Self::TokenBucket,
        Self::SlidingWindow,
        Self::SlidingLog,
        Self::LeakyBucket,
        Self::Gcra,
        Self::MultiWindow,
        Self::CalendarQuota,
        Self::Concurrency,
    ];

    /// The name it is registered under.
    #[must_use]
    #[inline]
    pub const fn name(self) -> &'static str {
        match self {
            Self::FixedWindow => "fixed_window",
            Self::TokenBucket => "token_bucket",
            Self::SlidingWindow => "sliding_window",
            Self::SlidingLog => "sliding_log",
            Self::LeakyBucket => "leaky_bucket",
            Self::Gcra => "gcra",
            Self::MultiWindow => "multi_window",
            Self::CalendarQuota => "calendar_quota",
            Self::Concurrency => "concurrency",
        }
    }

    /// The built-in registered under `name`, if any; usable in `const` items.
    #[must_use]
    pub const fn from_name(name: &str) -> Option<Self> {
        let mut i = 0;
        while i < Self::ALL.len() {
            if rules::same(name.as_bytes(), Self::ALL[i].name().as_bytes()) {
                return Some(Self::ALL[i]);
            }
            i += 1;
        }
        None
    }

    /// Its options, in `ARGV` order; multi_window's one param stands for each of its rates.
    #[must_use]
    #[inline]
    pub const fn params(self) -> &'static [Param] {
        match self {
            Self::FixedWindow => params!("fixed_window": ("limit", Count), ("window", Count)),
            Self::TokenBucket => params!(
                "token_bucket": ("limit", Count), ("window", Count), ("burst", Burst)
            ),
            Self::SlidingWindow => {
                params!("sliding_window": ("limit", Count), ("window", Count))
            }
            Self::SlidingLog => params!("sliding_log": ("limit", Count), ("window", Count)),
            Self::LeakyBucket => {
                params!("leaky_bucket": ("limit", Count), ("window", LeakyWindow))
            }
            Self::Gcra => params!("gcra": ("limit", Count), ("window", Count), ("burst", Burst)),
            Self::MultiWindow => params!("multi_window": ("<limit>/<window>", Rate)),
            Self::CalendarQuota => params!(
                "calendar_quota": ("limit", Count), ("period", Period),
                ("utc_offset_minutes", UtcOffset)
            ),
            Self::Concurrency => params!("concurrency": ("limit", Count), ("lease", Count)),
        }
    }

    /// How many options it takes; `None`: one or more (multi_window).
    #[must_use]
    #[inline]
    pub const fn arity(self) -> Option<usize> {
        match self {
            Self::MultiWindow => None,
            _ => Some(self.params().len()),
        }
    }

    /// Refuses a number of options other than its [`arity`](Self::arity): the options a
    /// script reads by position would shift into one another's places.
    ///
    /// # Errors
    ///
    /// `fixed_window: takes 2 options, found 1`.
    #[inline]
    pub fn check_arity(self, count: usize) -> Result<(), Refusal> {
        match self.arity() {
            Some(arity) if arity != count => Err(self.wrong_arity(arity, count)),
            _ => Ok(()),
        }
    }

    #[cold]
    fn wrong_arity(self, arity: usize, count: usize) -> Refusal {
        Refusal::worded(format!(
            "{}: takes {arity} options, found {count}",
            self.name()
        ))
    }

    /// Its options as the errors show them: `[limit, window]`.
    #[must_use]
    pub const fn shown(self) -> &'static str {
        match self {
            Self::FixedWindow | Self::SlidingWindow | Self::SlidingLog | Self::LeakyBucket => {
                "[limit, window]"
            }
            Self::TokenBucket | Self::Gcra => "[limit, window, burst]",
            Self::MultiWindow => "[\"<limit>/<window>\", ...]",
            Self::CalendarQuota => "[limit, period, utc_offset_minutes]",
            Self::Concurrency => "[limit, lease]",
        }
    }

    /// Whether each admitted request holds its units until released (a lease) rather than
    /// spending them: such a limit cannot be stacked, nor settled after its response.
    #[must_use]
    #[inline]
    pub const fn leases(self) -> bool {
        matches!(self, Self::Concurrency)
    }

    /// Whether its script grants a batch of units (`~n`), for local batches.
    #[must_use]
    #[inline]
    pub const fn batches(self) -> bool {
        matches!(self, Self::FixedWindow | Self::TokenBucket)
    }

    /// Reads its options (a fixed number of them: not multi_window, see [`Self::rates`]) as
    /// its script reads them, each by `arg(position)`: the numbers in order, a period as its
    /// position in [`PERIODS`](crate::PERIODS), a time zone name (of the form
    /// [`zone_name`](crate::zone_name) takes) as NaN: its offset is no one number, so its
    /// reader asks for the name itself.
    ///
    /// # Errors
    ///
    /// The first option the script would refuse, in its words.
    #[inline]
    pub fn read<'a>(self, arg: impl Fn(usize) -> Arg<'a>) -> Result<[f64; 3], Refusal> {
        let mut values = [0.0; 3];
        for (position, param) in self.params().iter().enumerate() {
            values[position] = self.read_one(param, arg(position), values[0])?;
        }
        Ok(values)
    }

    /// One option of `param`'s kind, the limit (the first option) read before it.
    #[inline]
    fn read_one(self, param: &Param, arg: Arg<'_>, limit: f64) -> Result<f64, Refusal> {
        // A check of options not read ahead reads them: one given as an integer its rule takes
        // as given (as they would have been read ahead) takes no more than this.
        if let Arg::Int(n) = arg
            && let Some(value) = taken_as_given(param.kind, n, limit)
        {
            return Ok(value);
        }
        self.read_other(param, arg, limit)
    }

    /// Its options given as the integers `ints` (in `ARGV` order), read ahead: what
    /// [`read`](Self::read) reads of them, when they are as many as it takes and each is one
    /// its rule takes as given (a count from 1 to [`MAX`], a burst from 1 to the limit). For a
    /// limit made once and checked many times, which then need not read them on each check.
    /// `None` otherwise (another kind, a value out of bounds, an option not an integer): read
    /// them at each check, where they are refused in the script's words if they must be.
    #[must_use]
    pub const fn read_ahead(self, ints: &[Option<i64>]) -> Option<[f64; 3]> {
        let params = self.params();
        // multi_window's one param stands for any number of rates: its kind is never taken
        // as given.
        if ints.len() != params.len() {
            return None;
        }
        let mut values = [0.0; 3];
        let mut position = 0;
        while position < params.len() {
            let Some(n) = ints[position] else {
                return None;
            };
            match taken_as_given(params[position].kind, n, values[0]) {
                Some(value) => values[position] = value,
                None => return None,
            }
            position += 1;
        }
        Some(values)
    }

    /// [`read_one`](Self::read_one) of any other option.
    fn read_other(self, param: &Param, arg: Arg<'_>, limit: f64) -> Result<f64, Refusal> {
        let refuse = |rule: Rule| Refusal::new(self.name(), param.name, &rule.script_words(), arg);
        let max = f64::from(MAX);
        match param.kind {
            Kind::Count | Kind::LeakyWindow => {
                let n = match arg.digits() {
                    Some(n) if (1.0..=max).contains(&n) => n,
                    Some(n) if n >= 1.0 => return Err(refuse(Rule::AtMostMax)),
                    _ => return Err(refuse(Rule::PositiveInteger)),
                };
                if param.kind == Kind::LeakyWindow && n * limit > rules::MAX_LEAKY_PRODUCT as f64 {
                    return Err(refuse(Rule::LeakyProduct));
                }
                Ok(n)
            }
            // The scripts word a burst of 0 each their own way.
            Kind::Burst => match (self, arg.digits()) {
                (_, Some(n)) if (1.0..=limit).contains(&n) => Ok(n),
                (Self::TokenBucket, Some(n)) if n < 1.0 => Err(refuse(Rule::AtLeastOne)),
                (_, Some(n)) if n >= 1.0 => Err(refuse(Rule::AtMostLimit)),
                _ => Err(refuse(Rule::PositiveInteger)),
            },
            Kind::Period => match arg {
                Arg::Str(text) => rules::period(text).map(|i| i as f64).map_err(&refuse),
                _ => Err(refuse(Rule::Period)),
            },
            Kind::UtcOffset => match arg {
                Arg::Str(text) if rules::is_zone_form(text) => {
                    rules::zone_name(text).map(|()| f64::NAN).map_err(&refuse)
                }
                _ => utc_offset(arg)
                    .map(|minutes| minutes as f64)
                    .ok_or_else(|| refuse(Rule::UtcOffset)),
            },
            Kind::Rate => self.rate(0, arg).map(|(limit, _)| limit),
        }
    }

    /// multi_window's `count` rates (its script's opts, up to the last holding a `"/"`), each
    /// by `arg(position)`, as its script reads them: their limits and windows.
    ///
    /// # Errors
    ///
    /// No rate at all (naming the first entry), anything but `"<limit>/<window>"` with plain
    /// positive integers up to [`MAX`], or a window twice.
    pub fn rates<'a>(
        self,
        count: usize,
        arg: impl Fn(usize) -> Arg<'a>,
    ) -> Result<Vec<(f64, f64)>, Refusal> {
        if count == 0 {
            let rule = Rule::NoRates.script_words();
            return Err(Refusal::new(self.name(), "opts", &rule, arg(0)));
        }
        let mut rates: Vec<(f64, f64)> = Vec::with_capacity(count);
        for position in 0..count {
            let arg = arg(position);
            let (limit, window) = self.rate(position, arg)?;
            if let Some(earlier) = rates.iter().position(|(_, seen)| *seen == window) {
                let rule = Rule::RepeatedWindow(earlier + 1);
                return Err(self.refuse_rate(position, rule, arg));
            }
            rates.push((limit, window));
        }
        Ok(rates)
    }

    /// multi_window's rate at `position` (from 0), as its script reads it.
    fn rate(self, position: usize, arg: Arg<'_>) -> Result<(f64, f64), Refusal> {
        let text = match arg {
            Arg::Str(text) => Ok(text),
            _ => Err(Rule::RateForm),
        };
        text.and_then(rules::rate)
            .map(|(limit, window)| (f64::from(limit), f64::from(window)))
            .map_err(|rule| self.refuse_rate(position, rule, arg))
    }

    /// multi_window's refusal of the rate at `position` (from 0).
    fn refuse_rate(self, position: usize, rule: Rule, arg: Arg<'_>) -> Refusal {
        let field = format!("opt {}", position + 1);
        Refusal::new(self.name(), &field, &rule.script_words(), arg)
    }

    /// Refuses integer options (the const parameters of a typed limit) the script would
    /// refuse, at compile time: a `const` item that calls it does not compile.
    ///
    /// # Panics
    ///
    /// On the first option out of bounds, naming the limiter, the option and the bound; on a
    /// built-in whose options are not all counts (use [`assert_calendar`]).
    pub const fn assert_counts(self, values: &[u64]) {
        let params = self.params();
        assert!(
            values.len() == params.len(),
            "a typed limit gives each option"
        );
        let mut i = 0;
        while i < params.len() {
            let param = &params[i];
            let checked = match param.kind {
                Kind::Count => rules::count(values[i]),
                Kind::Burst => rules::burst(values[i], values[0]),
                Kind::LeakyWindow => match rules::count(values[i]) {
                    Ok(()) => rules::leaky(values[0], values[i]),
                    refused => refused,
                },
                Kind::Period | Kind::UtcOffset | Kind::Rate => {
                    panic!("a typed limit of this built-in has options of its own")
                }
            };
            match checked {
                Ok(()) => {}
                Err(Rule::PositiveInteger) => panic!("{}", param.zero),
                Err(_) => panic!("{}", param.past),
            }
            i += 1;
        }
    }
}

/// Refuses a calendar quota's limit and offset the script would refuse, at compile time.
///
/// # Panics
///
/// On a limit of 0 or past [`MAX`], or an offset past
/// [`MAX_UTC_OFFSET`](crate::MAX_UTC_OFFSET) either way.
pub const fn assert_calendar(limit: u64, utc_offset_minutes: i64) {
    let limit_param = &Builtin::CalendarQuota.params()[0];
    match rules::count(limit) {
        Ok(()) => {}
        Err(Rule::PositiveInteger) => panic!("{}", limit_param.zero),
        Err(_) => panic!("{}", limit_param.past),
    }
    if rules::utc_offset(utc_offset_minutes).is_err() {
        panic!("calendar_quota: `utc_offset_minutes` must be from -1439 to 1439");
    }
}

/// `find(v, '^%-?%d+$') and tonumber(v)` within the bounds; a cost's `-n` as the script reads
/// it, and its `+n` as no offset.
fn utc_offset(arg: Arg<'_>) -> Option<i64> {
    let minutes = match arg {
        Arg::Int(n) => n,
        Arg::Str(text) => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Too many digits to parse is out of bounds all the same.
            text.parse().unwrap_or(i64::MAX)
        }
        Arg::Signed('-', n) => -i64::from(n),
        Arg::Signed(..) | Arg::Missing => return None,
    };
    rules::utc_offset(minutes).ok().map(|()| minutes)
}

/// Refuses what a built-in's script would refuse of `opts`, in its words: a wrong number of
/// them, or the first the script would refuse (multi_window: each a rate, no window twice).
///
/// # Errors
///
/// The refusal.
pub fn check(builtin: Builtin, opts: &[Arg<'_>]) -> Result<(), Refusal> {
    builtin.check_arity(opts.len())?;
    let arg = |position: usize| opts.get(position).copied().unwrap_or(Arg::Missing);
    if builtin.arity().is_some() {
        return builtin.read(arg).map(drop);
    }
    // As the script reads its rates: up to the last option holding a "/".
    let slashed = opts
        .iter()
        .any(|arg| matches!(arg, Arg::Str(text) if text.contains('/')));
    builtin
        .rates(if slashed { opts.len() } else { 0 }, arg)
        .map(drop)
}

/// The value of an option of kind `kind` given as the integer `n` (the limit, read before it,
/// `limit`), when its rule takes `n` as given: a count from 1 to [`MAX`], a burst from 1 to the
/// limit. `None` when it must be read in full (`read_other`, whose rules take every value this
/// takes, to the same number), and refused there or not. The one shortcut of both reads, on a
/// check ([`Builtin::read`]) and ahead of it ([`Builtin::read_ahead`]).
#[allow(clippy::cast_precision_loss)] // at most MAX, exact
const fn taken_as_given(kind: Kind, n: i64, limit: f64) -> Option<f64> {
    const TOP: i64 = MAX as i64;
    match kind {
        Kind::Count if 1 <= n && n <= TOP => Some(n as f64),
        Kind::Burst if 1 <= n && n <= TOP && n as f64 <= limit => Some(n as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options read ahead read as a check reads them, for every built-in and every mix of
    /// integers in and out of each rule's bounds, given as integers and as text (which the
    /// full rules read, past the shortcut both share); and only those a check takes.
    #[test]
    fn options_read_ahead_read_as_a_check_reads_them() {
        const TOP: i64 = MAX as i64;
        let values = [-1, 0, 1, 2, 5, 60, TOP - 1, TOP, TOP + 1];
        let mut read_ahead = 0;
        for builtin in Builtin::ALL {
            for len in 0..=3 {
                for combo in 0..values.len().pow(u32::try_from(len).unwrap()) {
                    let mut rest = combo;
                    let ints: Vec<Option<i64>> = (0..len)
                        .map(|_| {
                            let n = values[rest % values.len()];
                            rest /= values.len();
                            Some(n)
                        })
                        .collect();
                    let Some(ahead) = builtin.read_ahead(&ints) else {
                        continue;
                    };
                    read_ahead += 1;
                    assert_eq!(builtin.arity(), Some(len), "{builtin:?} {ints:?}");
                    let arg = |position: usize| {
                        ints.get(position)
                            .map_or(Arg::Missing, |n| Arg::Int(n.unwrap()))
                    };
                    assert_eq!(builtin.read(arg), Ok(ahead), "{builtin:?} {ints:?}");
                    // The same numbers as text take no shortcut: the full rules read them alike.
                    let texts: Vec<String> = ints.iter().map(|n| n.unwrap().to_string()).collect();
                    let text = |position: usize| {
                        texts
                            .get(position)
                            .map_or(Arg::Missing, |text| Arg::Str(text))
                    };
                    assert_eq!(builtin.read(text), Ok(ahead), "{builtin:?} {texts:?}");
                }
            }
        }
        // Counts of 1, 2, 5, 60, TOP - 1 and TOP: fixed_window, sliding_window, sliding_log and
        // concurrency take 36 each; token_bucket and gcra, whose burst is at most the limit, 6 x 21.
        assert_eq!(read_ahead, 4 * 36 + 2 * 6 * 21);
        // Not an integer, or a kind read only in full: read at each check.
        assert_eq!(Builtin::FixedWindow.read_ahead(&[Some(10), None]), None);
        assert_eq!(Builtin::LeakyBucket.read_ahead(&[Some(10), Some(60)]), None);
        assert_eq!(
            Builtin::CalendarQuota.read_ahead(&[Some(10), Some(0), Some(0)]),
            None
        );
        assert_eq!(Builtin::MultiWindow.read_ahead(&[Some(10)]), None);
        assert_eq!(
            Builtin::TokenBucket.read_ahead(&[Some(10), Some(60), Some(5)]),
            Some([10.0, 60.0, 5.0])
        );
    }

    fn refused(builtin: Builtin, opts: &[Arg<'_>]) -> String {
        check(builtin, opts).unwrap_err().to_string()
    }

    #[test]
    fn names_find_their_built_ins_in_const_items() {
        const CONCURRENCY: Option<Builtin> = Builtin::from_name("concurrency");
        assert_eq!(CONCURRENCY, Some(Builtin::Concurrency));
        assert_eq!(Builtin::from_name("fixed_windows"), None);
        for builtin in Builtin::ALL {
            assert_eq!(Builtin::from_name(builtin.name()), Some(builtin));
        }
        assert!(Builtin::Concurrency.leases() && !Builtin::Gcra.leases());
        assert!(Builtin::TokenBucket.batches() && !Builtin::Gcra.batches());
        assert_eq!(Builtin::Gcra.arity(), Some(3));
        assert_eq!(Builtin::MultiWindow.arity(), None);
    }

    #[test]
    fn options_are_refused_in_the_scripts_words() {
        use Arg::{Int, Str};
        assert_eq!(
            refused(Builtin::FixedWindow, &[Int(0), Int(60)]),
            "fixed_window: limit must be a positive integer, got '0'"
        );
        assert_eq!(
            refused(Builtin::FixedWindow, &[Int(1), Str("2147483648")]),
            "fixed_window: window must be <= 2147483647, got '2147483648'"
        );
        assert_eq!(
            refused(Builtin::FixedWindow, &[Int(1)]),
            "fixed_window: takes 2 options, found 1"
        );
        assert_eq!(
            refused(Builtin::TokenBucket, &[Int(5), Int(60), Int(0)]),
            "token_bucket: burst must be >= 1, got '0'"
        );
        assert_eq!(
            refused(Builtin::Gcra, &[Int(5), Int(60), Int(0)]),
            "gcra: burst must be a positive integer, got '0'"
        );
        assert_eq!(
            refused(Builtin::Gcra, &[Int(5), Int(60), Int(6)]),
            "gcra: burst must be <= limit, got '6'"
        );
        assert_eq!(
            refused(Builtin::LeakyBucket, &[Int(3_000_000), Int(3_002_400)]),
            "leaky_bucket: window must be <= 9007199254740 / limit, got '3002400'"
        );
        assert_eq!(
            refused(Builtin::CalendarQuota, &[Int(5), Str("year"), Int(0)]),
            "calendar_quota: period must be day, week or month, got 'year'"
        );
        assert_eq!(
            refused(Builtin::CalendarQuota, &[Int(5), Str("day"), Str("+60")]),
            "calendar_quota: utc_offset_minutes must be an integer from -1439 to 1439, got '+60'"
        );
        assert_eq!(
            refused(Builtin::MultiWindow, &[Str("2/10"), Str("3/10")]),
            "multi_window: opt 2 must not repeat the window of opt 1, got '3/10'"
        );
        assert_eq!(
            refused(Builtin::MultiWindow, &[Str("2/10"), Int(3)]),
            "multi_window: opt 2 must be \"<limit>/<window>\" with positive integers, got '3'"
        );
        assert_eq!(
            refused(Builtin::MultiWindow, &[]),
            "multi_window: opts must hold at least one \"<limit>/<window>\", got ''"
        );
        assert_eq!(
            refused(Builtin::MultiWindow, &[Str("5")]),
            "multi_window: opts must hold at least one \"<limit>/<window>\", got '5'"
        );
        assert!(check(Builtin::CalendarQuota, &[Int(5), Str("week"), Str("-330")]).is_ok());
        assert!(
            check(
                Builtin::CalendarQuota,
                &[Int(5), Str("day"), Str("Europe/Berlin")]
            )
            .is_ok()
        );
        assert_eq!(
            refused(
                Builtin::CalendarQuota,
                &[Int(5), Str("day"), Str("Europe/Ber lin")]
            ),
            "calendar_quota: utc_offset_minutes must be an integer from -1439 to 1439 or an \
             IANA time zone name, got 'Europe/Ber lin'"
        );
        assert!(check(Builtin::MultiWindow, &[Str("1/5"), Str("5/3600")]).is_ok());
    }

    #[test]
    fn typed_limits_within_bounds_pass_the_const_check() {
        const {
            Builtin::TokenBucket.assert_counts(&[20, 600, 5]);
            Builtin::LeakyBucket.assert_counts(&[3_000_000, 3_002_399]);
            assert_calendar(10_000, -1439);
        }
        let params = Builtin::TokenBucket.params();
        assert_eq!(params[2].past, "token_bucket: `burst` must be <= `limit`");
        assert_eq!(params[0].zero, "token_bucket: `limit` must be >= 1");
        assert_eq!(
            params[1].past,
            "token_bucket: `window` must be <= 2147483647"
        );
    }
}

//! [`RuntimeLimit`]: a limit whose limiter and options are known only at run time.

use std::fmt;
use std::sync::Arc;

use http::StatusCode;
use serde::Deserialize;

use plug_limit_options::{Arg, Builtin, Kind};

use super::{Limit, LimitRef, Opt, ReadAhead, write_key_text};
use crate::error::BuildError;
use crate::key::KeyExtractor;

/// The largest cost a built-in accepts: every value stays exact in a double.
const MAX_COST: u32 = plug_limit_options::MAX;

/// A limit made at run time, from configuration or per request: the counterpart of a
/// [`Limit`](crate::Limit) type, with owned options.
///
/// A built-in limiter's options are checked when the value is made, by the rules its script
/// applies, so a bad limit in a configuration file is refused at start-up rather than failing
/// every request. A custom limiter's name is looked up where the limit is used:
/// [`RateLimitLayer::runtime`](crate::RateLimitLayer::runtime) refuses a name no limiter is
/// registered under when it is made; a limit a resolver hands out per request, or one checked
/// by [`PlugLimit::check`](crate::PlugLimit::check), fails by the failure policy (or returns
/// [`Error::UnknownLimiter`](crate::Error::UnknownLimiter)) as a [`Limit`](crate::Limit)'s
/// would. Cloning is cheap (one reference count), so a resolver can hand out clones of limits
/// made once.
///
/// Use it with [`RateLimitLayer::runtime`](crate::RateLimitLayer::runtime) or
/// [`PlugLimit::check`](crate::PlugLimit::check), or deserialize it from a
/// configuration file: `{ limiter = "token_bucket", opts = [20, 600, 5] }` with optional
/// `cost` and `scope`.
///
/// # Example
///
/// ```
/// use plug_limit::RuntimeLimit;
///
/// let search = RuntimeLimit::new("token_bucket", [20, 600, 5])?.scope("search");
/// assert_eq!(search.limiter(), "token_bucket");
///
/// let refused = RuntimeLimit::new("token_bucket", [20, 600, 0]).unwrap_err();
/// assert_eq!(
///     refused.to_string(),
///     "invalid `opts`: token_bucket: burst must be >= 1, got '0'"
/// );
/// # Ok::<(), plug_limit::BuildError>(())
/// ```
#[derive(Clone)]
pub struct RuntimeLimit {
    repr: Repr,
}

/// A [`Limit`] type's constants as they are (no allocation, as a programmatic check of a typed
/// limit wants), or a limit made at run time.
#[derive(Clone)]
enum Repr {
    Typed(LimitRef<'static>),
    Made(Arc<Inner>),
}

#[derive(Clone)]
struct Inner {
    limiter: Box<str>,
    builtin: Option<Builtin>,
    opts: Box<[Opt]>,
    read_ahead: Option<ReadAhead>,
    /// The options as the key holds them, written once, when the limit is made.
    opts_key: Box<str>,
    cost: u32,
    scope: Option<Box<str>>,
    key: Option<Arc<dyn KeyExtractor>>,
    count_if: Option<fn(StatusCode) -> bool>,
    settle: bool,
}

impl Inner {
    /// `limit` with what it borrows copied, keyed by `key`.
    fn of(limit: LimitRef<'_>, key: Option<Arc<dyn KeyExtractor>>) -> Self {
        Self {
            limiter: limit.limiter.into(),
            builtin: limit.builtin,
            opts: limit.opts.into(),
            read_ahead: ReadAhead::of(limit.builtin, limit.opts),
            // A typed limit's, written at compile time, or else written here: never on a
            // request.
            opts_key: limit.opts_key.map_or_else(
                || {
                    let mut text = String::new();
                    write_key_text(&mut text, limit.opts);
                    text.into()
                },
                Into::into,
            ),
            cost: limit.cost,
            scope: limit.scope.map(Into::into),
            key,
            count_if: limit.count_if,
            settle: limit.settle,
        }
    }
}

/// A typed limit as a value: `FixedWindow::<3, 3600>` wherever a [`RuntimeLimit`] is taken,
/// as [`PlugLimit::check`](crate::PlugLimit::check) takes it.
impl<L: Limit> From<L> for RuntimeLimit {
    fn from(_: L) -> Self {
        Self {
            repr: Repr::Typed(LimitRef::of::<L>()),
        }
    }
}

impl From<&Self> for RuntimeLimit {
    fn from(limit: &Self) -> Self {
        limit.clone()
    }
}

impl RuntimeLimit {
    /// The limit of `limiter` with `opts`, in the order of its script's `ARGV`.
    ///
    /// # Errors
    ///
    /// For a built-in limiter, options its script would refuse (field `opts`, with the
    /// script's rule), and a number written as text (`[20, "600", 5]`): the scripts would
    /// read it, but a quoted number is most often a mistake, and the typed limits and the
    /// attribute take only integers there.
    pub fn new<I>(limiter: impl Into<String>, opts: I) -> Result<Self, BuildError>
    where
        I: IntoIterator,
        I::Item: Into<Opt>,
    {
        let limiter: String = limiter.into();
        let opts: Vec<Opt> = opts.into_iter().map(Into::into).collect();
        check_opts(&limiter, &opts)?;
        Ok(Self::unchecked(&limiter, &opts))
    }

    /// The limit of `limiter` with `opts`, unchecked: a built-in's script (or twin) judges
    /// the options when the limit is checked, and refuses bad ones by the failure policy. For
    /// the project's tests of that refusal; use [`new`](Self::new).
    #[doc(hidden)]
    #[must_use]
    pub fn unchecked(limiter: &str, opts: &[Opt]) -> Self {
        let limit = LimitRef {
            limiter,
            builtin: Builtin::from_name(limiter),
            opts,
            read_ahead: None,
            opts_key: None,
            cost: 1,
            scope: None,
            key: None,
            count_if: None,
            settle: false,
        };
        Self {
            repr: Repr::Made(Arc::new(Inner::of(limit, None))),
        }
    }

    /// This limit with `change` made to it: a typed limit's constants copied first.
    fn changed(self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = match self.repr {
            Repr::Made(inner) => inner,
            Repr::Typed(typed) => {
                let key = typed.key.map(|key| Arc::new(key) as Arc<dyn KeyExtractor>);
                Arc::new(Inner::of(typed, key))
            }
        };
        change(Arc::make_mut(&mut inner));
        Self {
            repr: Repr::Made(inner),
        }
    }

    /// How many units one request consumes (default 1). Built-in limiters only, as for
    /// [`Limit::COST`](crate::Limit::COST).
    ///
    /// # Errors
    ///
    /// A cost above 2,147,483,647 (field `cost`). A cost other than 1 for a custom limiter,
    /// whose script gets only its options, is refused by
    /// [`RateLimitLayer::runtime`](crate::RateLimitLayer::runtime), which knows the handle's
    /// limiters, as a `count_if` or a `settle` is (and by a check, with
    /// [`Error::NotBuiltIn`](crate::Error::NotBuiltIn)).
    pub fn cost(mut self, cost: u32) -> Result<Self, BuildError> {
        if cost > MAX_COST {
            return Err(BuildError::invalid("cost", "must be at most 2147483647"));
        }
        match &mut self.repr {
            Repr::Typed(typed) => typed.cost = cost,
            Repr::Made(inner) => Arc::make_mut(inner).cost = cost,
        }
        Ok(self)
    }

    /// The budget this limit counts against (default: the matched route), as
    /// [`Limit::SCOPE`](crate::Limit::SCOPE).
    #[must_use]
    pub fn scope(self, scope: impl Into<String>) -> Self {
        let scope = scope.into().into_boxed_str();
        self.changed(|inner| inner.scope = Some(scope))
    }

    /// The key extractor for this limit (default: the limiter's), as
    /// [`Limit::KEY`](crate::Limit::KEY).
    #[must_use]
    pub fn key(self, key: impl KeyExtractor) -> Self {
        let key = crate::key::shared(key);
        self.changed(|inner| inner.key = Some(key))
    }

    /// Which responses count (default: all), as [`Limit::COUNT_IF`](crate::Limit::COUNT_IF):
    /// a response for which `count_if` is `false` gets its request's cost back once it is sent.
    ///
    /// # Errors
    ///
    /// `concurrency`, whose units come back anyway (field `count_if`). A custom limiter, whose
    /// script takes no refund, is refused by
    /// [`RateLimitLayer::runtime`](crate::RateLimitLayer::runtime), which knows the handle's
    /// limiters (a built-in may be registered under a name of its own).
    pub fn count_if(self, count_if: fn(StatusCode) -> bool) -> Result<Self, BuildError> {
        settles_after(self.limiter(), "count_if")?;
        Ok(self.changed(|inner| inner.count_if = Some(count_if)))
    }

    /// Makes the [`cost`](Self::cost) an estimate, settled after the response to what the
    /// handler reports through [`Usage`](crate::Usage), as
    /// [`Limit::SETTLE`](crate::Limit::SETTLE).
    ///
    /// # Errors
    ///
    /// `concurrency`, whose units come back anyway (field `settle`). A custom limiter, whose
    /// script takes no refund, is refused by
    /// [`RateLimitLayer::runtime`](crate::RateLimitLayer::runtime), which knows the handle's
    /// limiters (a built-in may be registered under a name of its own).
    pub fn settle(self) -> Result<Self, BuildError> {
        settles_after(self.limiter(), "settle")?;
        Ok(self.changed(|inner| inner.settle = true))
    }

    /// The limiter's name.
    #[must_use]
    pub fn limiter(&self) -> &str {
        self.as_ref().limiter
    }

    /// The options.
    #[must_use]
    pub fn opts(&self) -> &[Opt] {
        self.as_ref().opts
    }

    pub(crate) fn as_ref(&self) -> LimitRef<'_> {
        let inner = match &self.repr {
            Repr::Typed(typed) => return *typed,
            Repr::Made(inner) => &**inner,
        };
        LimitRef {
            limiter: &inner.limiter,
            builtin: inner.builtin,
            opts: &inner.opts,
            read_ahead: inner.read_ahead.as_ref(),
            opts_key: Some(&inner.opts_key),
            cost: inner.cost,
            scope: inner.scope.as_deref(),
            key: inner.key.as_deref(),
            count_if: inner.count_if,
            settle: inner.settle,
        }
    }
}

/// Refuses `field` (`count_if`, `settle`) for a limiter the catalogue names that cannot
/// settle after the response: `concurrency` (its lease comes back).
fn settles_after(limiter: &str, field: &'static str) -> Result<(), BuildError> {
    match Builtin::from_name(limiter) {
        Some(algorithm) if algorithm.leases() => Err(BuildError::invalid(
            field,
            "does not apply to concurrency: its units come back when each response ends",
        )),
        _ => Ok(()),
    }
}

/// Refuses what `limit` asks of `algorithm`, the limiter it names as the handle has it
/// registered (`None`: a custom script): a custom script takes no cost and no refund; a
/// built-in under a name of its own refuses options as its script would. What only the
/// registry knows, checked when a limit meets a handle's limiters.
pub(crate) fn check_against(
    limit: LimitRef<'_>,
    algorithm: Option<Builtin>,
) -> Result<(), BuildError> {
    match algorithm {
        None => {
            let takes_no = |field| {
                BuildError::invalid(
                    field,
                    "needs a built-in limiter: a custom script takes no cost and no refund",
                )
            };
            if limit.cost != 1 {
                return Err(takes_no("cost"));
            }
            if limit.count_if.is_some() {
                return Err(takes_no("count_if"));
            }
            if limit.settle {
                return Err(takes_no("settle"));
            }
            Ok(())
        }
        // Its name is the catalogue's: checked when it was made.
        Some(_) if limit.builtin.is_some() => Ok(()),
        Some(builtin) => {
            if builtin.leases() && (limit.count_if.is_some() || limit.settle) {
                let field = if limit.settle { "settle" } else { "count_if" };
                settles_after(builtin.name(), field)?;
            }
            check_builtin_opts(builtin, limit.opts)
        }
    }
}

/// Refuses what a built-in's script would refuse, with its words (see
/// [`plug_limit_options::check`]).
fn check_opts(limiter: &str, opts: &[Opt]) -> Result<(), BuildError> {
    match Builtin::from_name(limiter) {
        Some(builtin) => check_builtin_opts(builtin, opts),
        None => Ok(()),
    }
}

/// [`check_opts`] of `builtin`'s options.
fn check_builtin_opts(builtin: Builtin, opts: &[Opt]) -> Result<(), BuildError> {
    let args: Vec<Arg<'_>> = opts.iter().map(Opt::arg).collect();
    plug_limit_options::check(builtin, &args)
        .map_err(|refusal| BuildError::invalid("opts", refusal.to_string()))?;
    check_numbers(builtin, &args)?;
    check_zone(builtin, &args)
}

/// Refuses a number written as text (`[20, "600", 5]`): the scripts read `"600"` as 600, as
/// Redis hands them every option as text, but a file or a caller that quotes a number has
/// most likely quoted something else by mistake, and the typed limits and the attribute
/// take only integers there.
fn check_numbers(builtin: Builtin, args: &[Arg<'_>]) -> Result<(), BuildError> {
    let quoted_number = builtin.params().iter().zip(args).find(|(param, arg)| {
        let Arg::Str(text) = **arg else {
            return false;
        };
        match param.kind {
            Kind::Count | Kind::Burst | Kind::LeakyWindow => true,
            Kind::UtcOffset => !plug_limit_options::is_zone_form(text),
            Kind::Period | Kind::Rate => false,
        }
    });
    match quoted_number {
        Some((param, &arg)) => {
            let rule = "must be an integer, not a string";
            let refusal = plug_limit_options::Refusal::new(builtin.name(), param.name, rule, arg);
            Err(BuildError::invalid("opts", refusal.to_string()))
        }
        None => Ok(()),
    }
}

/// Refuses a calendar quota's time zone name the tz database does not know (its form is
/// [`plug_limit_options::check`]'s), in the words of its other refusals.
fn check_zone(builtin: Builtin, args: &[Arg<'_>]) -> Result<(), BuildError> {
    match (builtin, args.get(2)) {
        (Builtin::CalendarQuota, Some(&arg @ Arg::Str(name)))
            if plug_limit_options::is_zone_form(name) && crate::zone::find(name).is_none() =>
        {
            let param = &builtin.params()[2];
            let rule = plug_limit_options::Rule::TimeZone.script_words();
            let refusal = plug_limit_options::Refusal::new(builtin.name(), param.name, &rule, arg);
            Err(BuildError::invalid("opts", refusal.to_string()))
        }
        _ => Ok(()),
    }
}

impl fmt::Debug for RuntimeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = self.as_ref();
        f.debug_struct("RuntimeLimit")
            .field("limiter", &limit.limiter)
            .field("opts", &limit.opts)
            .field("cost", &limit.cost)
            .field("scope", &limit.scope)
            .field("key", &limit.key.map(|_| "custom"))
            .field("count_if", &limit.count_if.is_some())
            .field("settle", &limit.settle)
            .finish()
    }
}

/// `{ limiter = "token_bucket", opts = [20, 600, 5], cost = 1, scope = "search" }`; `cost`
/// and `scope` are optional. Invalid options fail deserialization with the rule.
impl<'de> Deserialize<'de> for RuntimeLimit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            limiter: String,
            #[serde(default)]
            opts: Vec<Opt>,
            cost: Option<u32>,
            scope: Option<String>,
        }
        let raw = Raw::deserialize(deserializer)?;
        let mut limit = Self::new(raw.limiter, raw.opts).map_err(serde::de::Error::custom)?;
        if let Some(cost) = raw.cost {
            limit = limit.cost(cost).map_err(serde::de::Error::custom)?;
        }
        if let Some(scope) = raw.scope {
            limit = limit.scope(scope);
        }
        Ok(limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_options_are_checked_by_the_scripts_rules() {
        let error = RuntimeLimit::new("fixed_window", [10]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid `opts`: fixed_window: takes 2 options, found 1"
        );
        let error = RuntimeLimit::new("multi_window", ["10/0"]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid `opts`: multi_window: opt 1 must be \"<limit>/<window>\" with positive integers, got '10/0'"
        );
        let limit =
            RuntimeLimit::new("multi_window", ["10/1".to_owned(), "100/60".to_owned()]).unwrap();
        assert_eq!(
            limit.opts(),
            [Opt::Text("10/1".into()), Opt::Text("100/60".into())]
        );
    }

    #[test]
    fn custom_limiters_take_any_options_and_costs_are_bounded() {
        let limit = RuntimeLimit::new("quota", [Opt::from("monthly"), Opt::Int(-1)]).unwrap();
        assert_eq!(limit.limiter(), "quota");
        assert_eq!(
            limit.clone().cost(MAX_COST + 1).unwrap_err().to_string(),
            "invalid `cost`: must be at most 2147483647"
        );
        // Whether `quota` is a custom script or a built-in registered under a name of its
        // own, only a handle knows: one rule with `count_if` and `settle`, checked where the
        // limit meets the handle (`check_against`).
        let costly = limit.clone().cost(3).unwrap();
        assert_eq!(
            check_against(costly.as_ref(), None)
                .unwrap_err()
                .to_string(),
            "invalid `cost`: needs a built-in limiter: a custom script takes no cost and no refund"
        );
        assert!(check_against(costly.as_ref(), Some(Builtin::FixedWindow)).is_err());
        let hot = RuntimeLimit::new("hot", [10, 60]).unwrap().cost(3).unwrap();
        assert!(check_against(hot.as_ref(), Some(Builtin::FixedWindow)).is_ok());
        assert!(check_against(limit.as_ref(), None).is_ok());
    }

    #[test]
    fn concurrency_is_checked_and_what_counts_is_for_built_ins_that_spend() {
        let limit = RuntimeLimit::new("concurrency", [3, 600]).unwrap();
        assert_eq!(
            limit.count_if(|_| true).unwrap_err().to_string(),
            "invalid `count_if`: does not apply to concurrency: its units come back when each response ends"
        );
        assert_eq!(
            RuntimeLimit::new("concurrency", [3, 0])
                .unwrap_err()
                .to_string(),
            "invalid `opts`: concurrency: lease must be a positive integer, got '0'"
        );
        let custom = RuntimeLimit::new("quota", [5])
            .unwrap()
            .count_if(|_| true)
            .unwrap();
        assert_eq!(
            check_against(custom.as_ref(), None)
                .unwrap_err()
                .to_string(),
            "invalid `count_if`: needs a built-in limiter: a custom script takes no cost and no refund"
        );
        let in_flight = RuntimeLimit::new("slots", [3, 600])
            .unwrap()
            .settle()
            .unwrap();
        assert_eq!(
            check_against(in_flight.as_ref(), Some(Builtin::Concurrency))
                .unwrap_err()
                .to_string(),
            "invalid `settle`: does not apply to concurrency: its units come back when each response ends"
        );
        let logins = RuntimeLimit::new("fixed_window", [5, 900])
            .unwrap()
            .count_if(|status| status == StatusCode::UNAUTHORIZED)
            .unwrap();
        let count_if = logins.as_ref().count_if.unwrap();
        assert!(count_if(StatusCode::UNAUTHORIZED) && !count_if(StatusCode::OK));
    }

    #[test]
    fn a_clone_shares_its_parts_until_changed() {
        let limit = RuntimeLimit::new("gcra", [5, 1, 2]).unwrap();
        let scoped = limit.clone().scope("api");
        assert_eq!(limit.as_ref().scope, None);
        assert_eq!(scoped.as_ref().scope, Some("api"));
        assert_eq!(
            scoped.as_ref().opts,
            [Opt::Int(5), Opt::Int(1), Opt::Int(2)]
        );
    }

    /// A limit made at run time holds its options' part of the key, written when made, whatever
    /// its options: the key of a request writes none.
    #[test]
    fn the_options_part_of_the_key_is_written_when_the_limit_is_made() {
        let written = |limit: &RuntimeLimit| limit.as_ref().opts_key.map(str::to_owned);
        let windows =
            RuntimeLimit::new("multi_window", ["10/1".to_owned(), "100/60".to_owned()]).unwrap();
        assert_eq!(written(&windows), Some("10/1,100/60".to_owned()));
        let odd = RuntimeLimit::unchecked("quota", &[Opt::from("a,b")]);
        let digest = written(&odd).unwrap();
        assert_eq!((digest.len(), &digest[..1]), (41, "#"));
        let typed = RuntimeLimit::from(crate::limit::FixedWindow::<10, 60>);
        assert_eq!(written(&typed), Some("10,60".to_owned()));
        assert_eq!(written(&typed.scope("/search")), Some("10,60".to_owned()));
    }
}

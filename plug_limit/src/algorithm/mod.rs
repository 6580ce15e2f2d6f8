//! The built-in algorithms: one catalogue entry each, naming its script, its options, its
//! headers and its native twin.
//!
//! Each built-in is a Lua script in `lua/<name>.lua` (what Redis runs) and a submodule here
//! that mirrors it step for step with an explicit `now` (what the memory backend runs). Lua
//! numbers are doubles, so wherever a script's arithmetic can leave the integers, the mirror
//! computes in `f64` in the script's operation order: `math.floor`/`math.ceil` are
//! `f64::floor`/`f64::ceil`, and `string.format('%d', x)` is `x as i64` (both truncate toward
//! zero). Integer-only steps use `i64`, exact where the scripts' doubles are (below 2^53, which
//! the scripts' bounds on opts and `now` ensure).
//!
//! Adding a built-in: see "Adding a built-in algorithm" in `ARCHITECTURE.md` at the
//! repository's root (its script, its twin here and its entry in [`CATALOGUE`], a `State`
//! variant if it keeps a new shape of state, and the places outside this module).

use std::sync::{Arc, LazyLock};

use http::HeaderName;
use http::header::RETRY_AFTER;

use plug_limit_options::Builtin;

use crate::limit::Charge;
use crate::limit::Opt;
use crate::lua::Lua;

use self::argv::Argv;
pub(crate) use self::calendar_quota::period_seconds;
pub(crate) use self::fields::{Field, Fields};
pub(crate) use self::report::Report;
pub(crate) use self::state::{Stored, Verdict};

mod argv;
mod calendar_quota;
mod concurrency;
mod fields;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod multi_window;
mod report;
mod sliding_log;
mod sliding_window;
pub(crate) mod stack;
mod state;
mod token_bucket;

#[cfg(test)]
pub(crate) mod scenarios;
#[cfg(test)]
mod tests;

/// A built-in algorithm. Names are matched once, at the edge ([`Algorithm::from_name`]);
/// everything after dispatches on this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Algorithm {
    FixedWindow,
    TokenBucket,
    SlidingWindow,
    SlidingLog,
    LeakyBucket,
    Gcra,
    MultiWindow,
    CalendarQuota,
    Concurrency,
}

/// What the catalogue knows of one algorithm.
struct Spec {
    algorithm: Algorithm,
    /// Its name, options and their rules.
    builtin: Builtin,
    script: &'static LazyLock<Arc<Lua>>,
    headers: &'static [HeaderName],
    twin: fn(&Argv<'_>, &mut Option<Stored>) -> Result<Verdict, String>,
}

/// One `Script` per file for the life of the process: the SHA1 is computed once.
macro_rules! script {
    ($file:literal) => {{
        static SCRIPT: LazyLock<Arc<Lua>> =
            LazyLock::new(|| Arc::new(Lua::new(include_str!(concat!("../../lua/", $file)))));
        &SCRIPT
    }};
}

const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");

/// The seed's three headers (fixed_window keeps them as the seed has them).
static SEED_HEADERS: [HeaderName; 3] = [LIMIT, RESET, REMAINING];
/// The seed's three, and `retry-after` on a deny.
static HEADERS: [HeaderName; 4] = [LIMIT, RESET, REMAINING, RETRY_AFTER];

/// Every built-in, in the order they are documented.
static CATALOGUE: [Spec; 9] = [
    Spec {
        algorithm: Algorithm::FixedWindow,
        builtin: Builtin::FixedWindow,
        script: script!("fixed_window.lua"),
        headers: &SEED_HEADERS,
        twin: fixed_window::evaluate,
    },
    Spec {
        algorithm: Algorithm::TokenBucket,
        builtin: Builtin::TokenBucket,
        script: script!("token_bucket.lua"),
        headers: &HEADERS,
        twin: token_bucket::evaluate,
    },
    Spec {
        algorithm: Algorithm::SlidingWindow,
        builtin: Builtin::SlidingWindow,
        script: script!("sliding_window.lua"),
        headers: &HEADERS,
        twin: sliding_window::evaluate,
    },
    Spec {
        algorithm: Algorithm::SlidingLog,
        builtin: Builtin::SlidingLog,
        script: script!("sliding_log.lua"),
        headers: &HEADERS,
        twin: sliding_log::evaluate,
    },
    Spec {
        algorithm: Algorithm::LeakyBucket,
        builtin: Builtin::LeakyBucket,
        script: script!("leaky_bucket.lua"),
        headers: &HEADERS,
        twin: leaky_bucket::evaluate,
    },
    Spec {
        algorithm: Algorithm::Gcra,
        builtin: Builtin::Gcra,
        script: script!("gcra.lua"),
        headers: &HEADERS,
        twin: gcra::evaluate,
    },
    Spec {
        algorithm: Algorithm::MultiWindow,
        builtin: Builtin::MultiWindow,
        script: script!("multi_window.lua"),
        headers: &HEADERS,
        twin: multi_window::evaluate,
    },
    Spec {
        algorithm: Algorithm::CalendarQuota,
        builtin: Builtin::CalendarQuota,
        script: script!("calendar_quota.lua"),
        headers: &HEADERS,
        twin: calendar_quota::evaluate,
    },
    Spec {
        algorithm: Algorithm::Concurrency,
        builtin: Builtin::Concurrency,
        script: script!("concurrency.lua"),
        headers: &HEADERS,
        twin: concurrency::evaluate,
    },
];

impl Algorithm {
    /// Every built-in.
    pub(crate) fn all() -> impl Iterator<Item = Self> {
        CATALOGUE.iter().map(|spec| spec.algorithm)
    }

    /// The built-in registered under `name`, if any.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        let builtin = Builtin::from_name(name)?;
        CATALOGUE
            .iter()
            .find(|spec| spec.builtin == builtin)
            .map(|spec| spec.algorithm)
    }

    fn spec(self) -> &'static Spec {
        // The catalogue lists the variants in declaration order.
        &CATALOGUE[self as usize]
    }

    /// The name it is registered under: `fixed_window`, ...
    pub(crate) fn name(self) -> &'static str {
        self.spec().builtin.name()
    }

    /// Its Lua script.
    pub(crate) fn script(self) -> &'static Arc<Lua> {
        self.spec().script
    }

    /// The names its header values are sent under, in order.
    pub(crate) fn headers(self) -> &'static [HeaderName] {
        self.spec().headers
    }

    /// Refuses a wrong number of opts. The trailing `cost` and `now` are positional, so a
    /// wrong count would shift them into an option's place; checked before either backend,
    /// so both answer alike.
    pub(crate) fn check_arity(self, opts: &[Opt]) -> Result<(), String> {
        Ok(self.spec().builtin.check_arity(opts.len())?)
    }

    /// Evaluates one key exactly as the script does with ARGV = [opts..., cost, now_ms], the
    /// cost `n`, `-n` or `+n` as `cost` takes, refunds or forces.
    /// `slot` is the key's state (None: no such key); it is updated in place (None: the key is
    /// deleted or was never written). The caller passes None for a slot whose
    /// `expires_at_ms <= now_ms`. Errors carry the script's error text without "ERR ".
    ///
    /// A slot holding another algorithm's state counts as no state (Redis keys are per
    /// limiter). Should the opts be too few for `now_ms` to land in the ARGV, the twin still
    /// takes `now_ms` where the script would read Redis `TIME`.
    pub(crate) fn evaluate(
        self,
        opts: &[Opt],
        cost: Charge,
        now_ms: i64,
        slot: &mut Option<Stored>,
    ) -> Result<Verdict, String> {
        self.evaluate_leased(opts, cost, None, now_ms, slot)
    }

    /// [`evaluate`](Self::evaluate) with a concurrency lease's id after `now` in the ARGV: the
    /// lease a take takes, or a refund gives back.
    pub(crate) fn evaluate_leased(
        self,
        opts: &[Opt],
        cost: Charge,
        lease: Option<&str>,
        now_ms: i64,
        slot: &mut Option<Stored>,
    ) -> Result<Verdict, String> {
        (self.spec().twin)(&Argv::new(opts, cost, now_ms, lease), slot)
    }

    /// Whether each admitted request holds its units until released (a lease), rather than
    /// spending them.
    pub(crate) fn leases(self) -> bool {
        self.spec().builtin.leases()
    }
}

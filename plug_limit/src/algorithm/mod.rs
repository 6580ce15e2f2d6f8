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

pub(crate) use plug_limit_options::Builtin;
use plug_limit_options::Refusal;

use crate::limit::Charge;
use crate::limit::{Opt, ReadAhead};
use crate::lua::Lua;

use self::argv::Argv;
pub(crate) use self::calendar_quota::{period_seconds, zone_end, zone_name};
pub(crate) use self::fields::{Field, Fields};
pub(crate) use self::report::Report;
pub(crate) use self::state::{Reply, Stored};

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

/// What this crate adds to a built-in of the catalogue.
struct Spec {
    /// Its name, options and their rules.
    builtin: Builtin,
    script: &'static LazyLock<Arc<Lua>>,
    headers: &'static [HeaderName],
    twin: fn(&Argv<'_>, &mut Option<Stored>) -> Result<Reply, Refusal>,
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
        builtin: Builtin::FixedWindow,
        script: script!("fixed_window.lua"),
        headers: &SEED_HEADERS,
        twin: fixed_window::evaluate,
    },
    Spec {
        builtin: Builtin::TokenBucket,
        script: script!("token_bucket.lua"),
        headers: &HEADERS,
        twin: token_bucket::evaluate,
    },
    Spec {
        builtin: Builtin::SlidingWindow,
        script: script!("sliding_window.lua"),
        headers: &HEADERS,
        twin: sliding_window::evaluate,
    },
    Spec {
        builtin: Builtin::SlidingLog,
        script: script!("sliding_log.lua"),
        headers: &HEADERS,
        twin: sliding_log::evaluate,
    },
    Spec {
        builtin: Builtin::LeakyBucket,
        script: script!("leaky_bucket.lua"),
        headers: &HEADERS,
        twin: leaky_bucket::evaluate,
    },
    Spec {
        builtin: Builtin::Gcra,
        script: script!("gcra.lua"),
        headers: &HEADERS,
        twin: gcra::evaluate,
    },
    Spec {
        builtin: Builtin::MultiWindow,
        script: script!("multi_window.lua"),
        headers: &HEADERS,
        twin: multi_window::evaluate,
    },
    Spec {
        builtin: Builtin::CalendarQuota,
        script: script!("calendar_quota.lua"),
        headers: &HEADERS,
        twin: calendar_quota::evaluate,
    },
    Spec {
        builtin: Builtin::Concurrency,
        script: script!("concurrency.lua"),
        headers: &HEADERS,
        twin: concurrency::evaluate,
    },
];

/// What this crate adds to a built-in of `plug_limit_options`'s catalogue: its Lua script, the
/// names of its header values, and its native twin.
pub(crate) trait Runtime: Copy {
    /// Its Lua script.
    fn script(self) -> &'static Arc<Lua>;

    /// The names its header values are sent under, in order.
    fn headers(self) -> &'static [HeaderName];

    /// Evaluates one key exactly as the script does with ARGV = [opts..., cost, now_ms,
    /// lease], the cost `n`, `-n` or `+n` as `cost` takes, refunds or forces, and `lease` a
    /// concurrency lease's id: the lease a take takes, or a refund gives back. `read_ahead`:
    /// `opts` as the limit read them when it was made, if it could (a check need not read
    /// them again).
    /// `slot` is the key's state (None: no such key); it is updated in place (None: the key is
    /// deleted or was never written). The caller passes None for a slot whose
    /// `expires_at_ms <= now_ms`. Errors carry the script's error text without "ERR ".
    ///
    /// A slot holding another algorithm's state counts as no state (Redis keys are per
    /// limiter). Should the opts be too few for `now_ms` to land in the ARGV, the twin still
    /// takes `now_ms` where the script would read Redis `TIME`.
    fn evaluate_leased(
        self,
        opts: &[Opt],
        read_ahead: Option<&ReadAhead>,
        cost: Charge,
        lease: Option<&str>,
        now_ms: i64,
        slot: &mut Option<Stored>,
    ) -> Result<Reply, Refusal>;

    /// [`evaluate_leased`](Self::evaluate_leased) without a lease, its options read as given.
    #[cfg(test)]
    fn evaluate(
        self,
        opts: &[Opt],
        cost: Charge,
        now_ms: i64,
        slot: &mut Option<Stored>,
    ) -> Result<Reply, Refusal> {
        self.evaluate_leased(opts, None, cost, None, now_ms, slot)
    }
}

impl Runtime for Builtin {
    fn script(self) -> &'static Arc<Lua> {
        spec(self).script
    }

    fn headers(self) -> &'static [HeaderName] {
        spec(self).headers
    }

    fn evaluate_leased(
        self,
        opts: &[Opt],
        read_ahead: Option<&ReadAhead>,
        cost: Charge,
        lease: Option<&str>,
        now_ms: i64,
        slot: &mut Option<Stored>,
    ) -> Result<Reply, Refusal> {
        (spec(self).twin)(&Argv::new(opts, read_ahead, cost, now_ms, lease), slot)
    }
}

/// `builtin`'s entry: the catalogue lists them in the order of `Builtin::ALL`.
fn spec(builtin: Builtin) -> &'static Spec {
    let spec = &CATALOGUE[builtin as usize];
    debug_assert_eq!(
        spec.builtin, builtin,
        "CATALOGUE is out of Builtin::ALL's order"
    );
    spec
}

//! The built-in limiters as pure Rust: the same decisions and header values as their Lua scripts.
//!
//! Each submodule mirrors one `lua/<name>.lua` step for step, as that script runs with an
//! explicit `now` argument. Lua numbers are doubles, so wherever a script's arithmetic can
//! leave the integers, the mirror computes in `f64` in the script's operation order:
//! `math.floor`/`math.ceil` are `f64::floor`/`f64::ceil`, and `string.format('%d', x)` is
//! `x as i64` (both truncate toward zero). Integer-only steps use `i64`, exact where the
//! scripts' doubles are (below 2^53, which the scripts' bounds on opts and `now` ensure).

use std::collections::VecDeque;

use crate::Opt;

use self::argv::{Arg, Argv, MAX, decimal, fail, int, positive, verdict};

mod argv;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod multi_window;
mod sliding_log;
mod sliding_window;
mod token_bucket;

pub(crate) use self::multi_window::Window;

/// A key's state and when Redis would delete it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stored {
    pub(crate) state: State,
    pub(crate) expires_at_ms: i64,
}

/// A built-in limiter's state for one key (what its Redis key holds).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    /// The string counter.
    FixedWindow { count: i64 },
    /// The hash `b`, `r`, `t`; its `e` field is the key's expiry.
    TokenBucket {
        tokens: f64,
        remaining: i64,
        last_ms: i64,
    },
    /// The string `"<start> <current> <previous>"`.
    SlidingWindow {
        start_ms: i64,
        current: i64,
        previous: i64,
    },
    /// The sorted set's scores, oldest first; members only keep them unique in Redis.
    SlidingLog { stamps: VecDeque<i64> },
    /// The string `"<level> <at>"`, the level in unit-milliseconds.
    LeakyBucket { level: i64, at_ms: i64 },
    /// The theoretical arrival time, in microseconds.
    Gcra { tat_us: i64 },
    /// The hash's `c<window>` / `e<window>` field pairs.
    MultiWindow { windows: Vec<Window> },
}

/// What a built-in answered, as its script's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) allow: bool,
    pub(crate) headers: Vec<String>,
}

/// How many opts `limiter` takes (None for multi_window: variable).
pub(crate) fn arity(limiter: &str) -> Option<usize> {
    match limiter {
        "fixed_window" | "sliding_window" | "sliding_log" | "leaky_bucket" => Some(2),
        "token_bucket" | "gcra" => Some(3),
        _ => None,
    }
}

/// Evaluates built-in `limiter` for one key exactly as its Lua script does with
/// ARGV = [opts..., cost, now_ms]. `slot` is the key's state (None: no such key); it is updated in
/// place (None: the key is deleted or was never written). The caller passes None for a slot whose
/// expires_at_ms <= now_ms. Errors carry the script's error text without the "ERR " prefix.
///
/// A slot holding another limiter's state counts as no state (Redis keys are per limiter). Should
/// the opts be too few for `now_ms` to land in the ARGV, the mirror still takes `now_ms` where the
/// script would read Redis `TIME`.
pub(crate) fn evaluate(
    limiter: &str,
    opts: &[Opt],
    cost: u32,
    now_ms: i64,
    slot: &mut Option<Stored>,
) -> Result<Verdict, String> {
    let argv = Argv::new(opts, cost, now_ms);
    match limiter {
        "fixed_window" => fixed_window::evaluate(&argv, slot),
        "token_bucket" => token_bucket::evaluate(&argv, slot),
        "sliding_window" => sliding_window::evaluate(&argv, slot),
        "sliding_log" => sliding_log::evaluate(&argv, slot),
        "leaky_bucket" => leaky_bucket::evaluate(&argv, slot),
        "gcra" => gcra::evaluate(&argv, slot),
        "multi_window" => multi_window::evaluate(&argv, slot),
        other => Err(format!("{other}: not a built-in limiter")),
    }
}

#[cfg(test)]
#[path = "../algorithm/scenarios.rs"]
mod scenarios;

#[cfg(test)]
mod tests {
    use super::*;

    /// An ARGV string as the opt that sends it.
    fn opt(s: &'static str) -> Opt {
        match s.parse::<i64>() {
            Ok(n) if n.to_string() == s => Opt::Int(n),
            _ => Opt::Str(s),
        }
    }

    /// Runs `limiter`'s shared scenarios and refusals (`algorithm/scenarios.rs`, which
    /// `tests/scripts.rs` runs against Redis) and checks every answer.
    pub(super) fn run_scenarios(limiter: &str) {
        let start = scenarios::start(1_799_999_000_000);
        let answer = |opts: &[Opt], cost, now, slot: &mut Option<Stored>| {
            if slot.as_ref().is_some_and(|s| s.expires_at_ms <= now) {
                *slot = None;
            }
            match evaluate(limiter, opts, cost, now, slot) {
                Ok(v) => scenarios::render(v.allow, &v.headers),
                Err(e) => format!("error {e}"),
            }
        };
        let mut ran = 0;
        for scenario in scenarios::SCENARIOS.iter().filter(|s| s.limiter == limiter) {
            let opts: Vec<Opt> = scenario.opts.iter().map(|s| opt(s)).collect();
            let mut slot = None;
            for (i, call) in scenario.calls.iter().enumerate() {
                let got = answer(&opts, call.cost, start + call.at_ms, &mut slot);
                assert_eq!(got, call.expect, "{} call {i}", scenario.name);
                ran += 1;
            }
        }
        for line in scenarios::REFUSED {
            let (name, opts, expect) = scenarios::refused(line);
            if name == limiter {
                let opts: Vec<Opt> = opts.into_iter().map(opt).collect();
                assert_eq!(answer(&opts, 1, start, &mut None), expect, "{line}");
                ran += 1;
            }
        }
        assert!(ran > 0, "no scenario for {limiter}");
    }

    #[test]
    fn every_built_in_but_multi_window_has_a_fixed_arity() {
        for builtin in crate::builtin::ALL {
            let fixed = arity(builtin.name).is_some();
            assert_eq!(fixed, builtin.name != "multi_window", "{}", builtin.name);
        }
        assert_eq!(arity("token_bucket"), Some(3));
        assert_eq!(arity("sliding_log"), Some(2));
        assert_eq!(arity("multi_window"), None);
        let mut slot = None;
        assert_eq!(
            evaluate("leaky", &[], 1, 0, &mut slot),
            Err("leaky: not a built-in limiter".to_owned())
        );
    }

    #[test]
    fn cost_and_now_are_checked_after_the_opts() {
        let mut slot = None;
        let opts = [Opt::Int(3), Opt::Int(60)];
        let too_late = evaluate("sliding_log", &opts, 1, 9_007_199_254_741, &mut slot);
        assert_eq!(
            too_late.unwrap_err(),
            "sliding_log: now must be <= 9007199254740, got '9007199254741'"
        );
        let negative = evaluate("sliding_window", &opts, 1, -1, &mut slot);
        assert_eq!(
            negative.unwrap_err(),
            "sliding_window: now must be a non-negative integer, got '-1'"
        );
        let costly = evaluate(
            "gcra",
            &[Opt::Int(3), Opt::Int(60), Opt::Int(3)],
            u32::MAX,
            0,
            &mut slot,
        );
        assert_eq!(
            costly.unwrap_err(),
            "gcra: cost must be <= 2147483647, got '4294967295'"
        );
        // Too few opts: the cost is read as the window, as the script reads its ARGV.
        let short = evaluate("leaky_bucket", &[Opt::Int(3)], 0, 0, &mut slot);
        assert_eq!(
            short.unwrap_err(),
            "leaky_bucket: window must be a positive integer, got '0'"
        );
        assert_eq!(slot, None);
    }
}

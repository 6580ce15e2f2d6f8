//! `lua/leaky_bucket.lua`: a bucket of `limit` units leaking `limit` units per window, its level
//! kept in unit-milliseconds so that filling and leaking are exact integer steps.

use super::Field;
use plug_limit_options::{Builtin, Refusal};

use super::argv::{Argv, int, verdict};
use super::state::{State, Stored, Verdict};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::LeakyBucket;
const NAME: &str = BUILTIN.name();

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Verdict, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 2)?;
    let limit_s = int(limit);

    let span = window * 1000.0;
    let (capacity, per_s) = (limit * span, limit * 1000.0);
    let mut level = 0.0;
    // The time every write stores: never behind the stored one (as the script's `since`).
    let mut since = now;
    if let Some(Stored {
        state: State::LeakyBucket { level: q, at_ms },
        ..
    }) = slot
    {
        let elapsed = (now - *at_ms as f64).max(0.0);
        since = since.max(*at_ms as f64);
        level = (*q as f64 - elapsed * limit).max(0.0);
    }

    let fill = |level: f64| {
        Some(Stored {
            state: State::LeakyBucket {
                level: level as i64,
                at_ms: since as i64,
            },
            expires_at_ms: (since + (level / limit).ceil()) as i64,
        })
    };
    let cost = match units {
        Charge::Take(cost) => cost,
        Charge::Refund(cost) => {
            if level > 0.0 {
                // Empties sooner: the expiry moves closer, never later.
                level -= cost * span;
                if level > 0.0 {
                    *slot = fill(level);
                } else {
                    level = 0.0;
                    *slot = None;
                }
            }
            let remaining = ((capacity - level) / span).floor().max(0.0);
            let reset = (level / per_s).ceil();
            return verdict(true, [limit_s, int(reset), int(remaining)]);
        }
        Charge::Force(cost) => {
            // Past capacity by at most one more capacity (and 2^53, to stay exact).
            let top = (2.0 * capacity).min(9_007_199_254_740_992.0);
            let after = (level + cost * span).min(top);
            *slot = fill(after);
            let reset = int((after / per_s).ceil());
            if after <= capacity {
                let remaining = ((capacity - after) / span).floor();
                return verdict(true, [limit_s, reset, int(remaining)]);
            }
            let retry = ((after + span - capacity) / per_s).ceil();
            return verdict(false, [limit_s, reset, Field::Int(0), int(retry)]);
        }
    };
    let need = if cost > 0.0 { cost } else { 1.0 };

    let after = level + need * span;
    if after <= capacity {
        if cost > 0.0 {
            *slot = fill(after);
        }
        let reset = (after / per_s).ceil();
        let remaining = ((capacity - after) / span).floor();
        return verdict(true, [limit_s, int(reset), int(remaining)]);
    }

    let remaining = ((capacity - level) / span).floor().max(0.0);
    let retry = ((after - capacity) / per_s).ceil();
    let reset = (level / per_s).ceil();
    verdict(false, [limit_s, int(reset), int(remaining), int(retry)])
}

#[cfg(test)]
mod tests {
    use super::super::state::{State, Stored};
    use super::super::tests::evaluate;
    use super::super::tests::run_scenarios;
    use crate::limit::Opt;

    #[test]
    fn shared_scenarios() {
        run_scenarios("leaky_bucket");
    }

    #[test]
    fn level_is_exact_in_unit_milliseconds() {
        // 3 units per second: a unit is 1000 unit-ms and 3 leak each ms.
        let opts = [Opt::Int(3), Opt::Int(1)];
        let mut slot = None;
        evaluate("leaky_bucket", &opts, 2, 5_000, &mut slot).unwrap();
        let bucket = |level, at_ms, expires_at_ms| {
            Some(Stored {
                state: State::LeakyBucket { level, at_ms },
                expires_at_ms,
            })
        };
        assert_eq!(slot, bucket(2_000, 5_000, 5_667));
        // 333 ms drain 999 unit-ms, no rounding: 1001 remain.
        evaluate("leaky_bucket", &opts, 1, 5_333, &mut slot).unwrap();
        assert_eq!(slot, bucket(2_001, 5_333, 6_000));
        let denied = evaluate("leaky_bucket", &opts, 2, 5_333, &mut slot).unwrap();
        assert_eq!(denied.headers, ["3", "1", "0", "1"]);
        assert_eq!(slot, bucket(2_001, 5_333, 6_000));
    }
}

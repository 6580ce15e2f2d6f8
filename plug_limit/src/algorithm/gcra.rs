//! `lua/gcra.lua`: the generic cell rate algorithm, one theoretical arrival time (TAT) per key,
//! in integer microseconds.

use super::Field;
use plug_limit_options::{Builtin, Refusal};

use super::argv::{Argv, int, verdict};
use super::state::{State, Stored, Verdict};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::Gcra;
const NAME: &str = BUILTIN.name();

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Verdict, Refusal> {
    let [limit, window, burst] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 3)?;
    let now = now * 1000.0;
    let burst_s = int(burst);

    let interval = (window * 1_000_000.0 / limit).ceil();
    let mut tat = match slot {
        Some(Stored {
            state: State::Gcra { tat_us },
            ..
        }) if *tat_us as f64 >= now => *tat_us as f64,
        _ => now,
    };
    let store = |tat: f64| {
        Some(Stored {
            state: State::Gcra { tat_us: tat as i64 },
            expires_at_ms: (tat / 1000.0).ceil() as i64,
        })
    };
    let cost = match units {
        Charge::Take(cost) => cost,
        Charge::Refund(cost) => {
            if tat > now {
                tat -= interval * cost;
                if tat > now {
                    *slot = store(tat);
                } else {
                    // Never before now: an empty state, which is no key.
                    tat = now;
                    *slot = None;
                }
            }
            let reset = ((tat - now) / 1_000_000.0).ceil();
            let remaining = ((now - (tat - interval * burst)) / interval).floor();
            return verdict(true, [burst_s, int(reset), int(remaining)]);
        }
        Charge::Force(cost) => {
            // Ahead of now by at most two burst tolerances: one burst of debt.
            let forced = (tat + interval * cost).min(now + 2.0 * interval * burst);
            *slot = store(forced);
            let reset = int(((forced - now) / 1_000_000.0).ceil());
            let allow_at = forced - interval * burst;
            if allow_at <= now {
                let remaining = ((now - allow_at) / interval).floor();
                return verdict(true, [burst_s, reset, int(remaining)]);
            }
            let retry = ((allow_at + interval - now) / 1_000_000.0).ceil();
            return verdict(false, [burst_s, reset, Field::Int(0), int(retry)]);
        }
    };
    let need = if cost > 0.0 { cost } else { 1.0 };
    let new_tat = tat + interval * need;
    let allow_at = new_tat - interval * burst;

    if allow_at <= now {
        if cost > 0.0 {
            *slot = store(new_tat);
        }
        let reset = ((new_tat - now) / 1_000_000.0).ceil();
        let remaining = ((now - allow_at) / interval).floor();
        return verdict(true, [burst_s, int(reset), int(remaining)]);
    }
    let reset = ((tat - now) / 1_000_000.0).ceil();
    let retry = ((allow_at - now) / 1_000_000.0).ceil();
    verdict(false, [burst_s, int(reset), Field::Int(0), int(retry)])
}

#[cfg(test)]
mod tests {
    use super::super::state::{State, Stored};
    use super::super::tests::evaluate;
    use super::super::tests::run_scenarios;
    use crate::limit::Opt;

    #[test]
    fn shared_scenarios() {
        run_scenarios("gcra");
    }

    #[test]
    fn state_is_the_tat_in_microseconds() {
        // 3 per second: T = 333334 us, rounded up so the rate never exceeds the limit.
        let opts = [Opt::Int(3), Opt::Int(1), Opt::Int(3)];
        let mut slot = None;
        evaluate("gcra", &opts, 2, 7_000, &mut slot).unwrap();
        let tat = |tat_us, expires_at_ms| {
            Some(Stored {
                state: State::Gcra { tat_us },
                expires_at_ms,
            })
        };
        assert_eq!(slot, tat(7_666_668, 7_667));
        let third = evaluate("gcra", &opts, 1, 7_000, &mut slot).unwrap();
        assert_eq!(third.headers, ["3", "2", "0"]);
        assert_eq!(slot, tat(8_000_002, 8_001));
        // Denied: nothing written; the next unit is due one interval after the TAT less tau.
        let denied = evaluate("gcra", &opts, 1, 7_300, &mut slot).unwrap();
        assert_eq!(denied.headers, ["3", "1", "0", "1"]);
        assert_eq!(slot, tat(8_000_002, 8_001));
    }
}

//! `lua/sliding_window.lua`: the current window's count plus the previous window's, weighted by
//! how much of it still overlaps the sliding window.

use plug_limit_options::{Builtin, Refusal};

use super::argv::{Argv, CAP, int, verdict};
use super::state::{State, Stored, Verdict};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::SlidingWindow;
const NAME: &str = BUILTIN.name();

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Verdict, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 2)?;
    // A settlement takes nothing here; on a denial its retry_after is a cost-1 request's.
    let cost = match units {
        Charge::Take(cost) => cost,
        Charge::Refund(_) | Charge::Force(_) => 0.0,
    };
    let mut need = if cost > 0.0 { cost } else { 1.0 };
    let limit_s = int(limit);

    let span = window * 1000.0;
    // Lua's `now % span`.
    let start = now - (now - (now / span).floor() * span);
    let (mut current, mut previous, mut ends) = (0.0, 0.0, 0.0);
    if let Some(Stored {
        state:
            State::SlidingWindow {
                start_ms,
                current: c,
                previous: p,
            },
        ..
    }) = slot
    {
        let s = *start_ms as f64;
        if s == start {
            (current, previous, ends) = (*c as f64, *p as f64, start + 2.0 * span);
        } else if s == start - span {
            (previous, ends) = (*c as f64, start + span);
        }
    }

    let elapsed = now - start;
    // Seconds until the key holds nothing: two windows after the current count, one after the
    // previous.
    let reset_s = |current: f64, previous: f64| {
        if current > 0.0 {
            ((start + 2.0 * span - now) / 1000.0).ceil()
        } else if previous > 0.0 {
            ((start + span - now) / 1000.0).ceil()
        } else {
            0.0
        }
    };
    let mut left = limit - (previous * (span - elapsed) / span + current);
    let write = |current: f64, previous: f64, ends: f64| {
        Some(Stored {
            state: State::SlidingWindow {
                start_ms: start as i64,
                current: current as i64,
                previous: previous as i64,
            },
            expires_at_ms: ends as i64,
        })
    };
    if let Charge::Refund(mut cost) | Charge::Force(mut cost) = units {
        if matches!(units, Charge::Refund(_)) {
            // From the current window's count first, then the previous one's.
            if current + previous > 0.0 {
                let back = current.min(cost);
                (current, cost) = (current - back, cost - back);
                previous = if previous > cost {
                    previous - cost
                } else {
                    0.0
                };
                *slot = if current + previous > 0.0 {
                    write(current, previous, ends)
                } else {
                    None
                };
            }
        } else {
            current = (current + cost).min(CAP as f64);
            *slot = write(current, previous, start + 2.0 * span);
        }
        left = limit - (previous * (span - elapsed) / span + current);
        if matches!(units, Charge::Refund(_)) || left >= 0.0 {
            let reset = reset_s(current, previous);
            return verdict(true, [limit_s, int(reset), int(left.floor().max(0.0))]);
        }
        need = 1.0;
    } else if need <= left {
        if cost > 0.0 {
            *slot = write(current + cost, previous, start + 2.0 * span);
        }
        let reset = ((start + 2.0 * span - now) / 1000.0).ceil();
        return verdict(true, [limit_s, int(reset), int((left - need).floor())]);
    }

    let remaining = left.floor().max(0.0);
    let reset = reset_s(current, previous);
    let mut retry = reset;
    if need <= limit {
        let wait = if current + need <= limit {
            span - elapsed - (limit - need - current) * span / previous
        } else {
            span - elapsed + span - (limit - need) * span / current
        };
        retry = (wait / 1000.0).ceil();
        if retry < 0.0 {
            retry = 0.0;
        }
    }
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
        run_scenarios("sliding_window");
    }

    #[test]
    fn state_rolls_the_current_count_into_the_previous_one() {
        let opts = [Opt::Int(10), Opt::Int(10)];
        let mut slot = None;
        evaluate("sliding_window", &opts, 4, 1_000_003_000, &mut slot).unwrap();
        assert_eq!(
            slot,
            Some(Stored {
                state: State::SlidingWindow {
                    start_ms: 1_000_000_000,
                    current: 4,
                    previous: 0,
                },
                expires_at_ms: 1_000_020_000,
            })
        );
        // Three quarters into the next window: 4 * 0.25 + 0 = 1 counted, so 9 fit.
        let next = evaluate("sliding_window", &opts, 9, 1_000_017_500, &mut slot).unwrap();
        assert_eq!(next.headers, ["10", "13", "0"]);
        assert_eq!(
            slot,
            Some(Stored {
                state: State::SlidingWindow {
                    start_ms: 1_000_010_000,
                    current: 9,
                    previous: 4,
                },
                expires_at_ms: 1_000_030_000,
            })
        );
        // A peek and a denial write nothing.
        let before = slot.clone();
        evaluate("sliding_window", &opts, 0, 1_000_017_500, &mut slot).unwrap();
        evaluate("sliding_window", &opts, 5, 1_000_017_500, &mut slot).unwrap();
        assert_eq!(slot, before);
    }
}

//! `lua/sliding_log.lua`: the time of every admitted unit in the last window, exactly.

use std::collections::VecDeque;

use super::Field;
use plug_limit_options::{Builtin, Refusal};

use super::argv::{Argv, int, verdict};
use super::state::{State, Stored, Verdict};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::SlidingLog;
const NAME: &str = BUILTIN.name();

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Verdict, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 2)?;
    let (cost, forced) = match units {
        Charge::Take(cost) => (cost, false),
        Charge::Force(cost) => (cost, true),
        Charge::Refund(cost) => return Ok(refund(slot, cost, now, limit, window)),
    };
    let need = if cost > 0.0 { cost } else { 1.0 };
    let (limit_s, window_s) = (int(limit), int(window));

    let span = window * 1000.0;
    let (now_ms, span_ms) = (now as i64, span as i64);
    let (mut stamps, mut expires_at_ms) = match slot.take() {
        Some(Stored {
            state: State::SlidingLog { stamps },
            expires_at_ms,
        }) => (stamps, expires_at_ms),
        other => {
            *slot = other;
            (VecDeque::new(), 0)
        }
    };
    while stamps.front().is_some_and(|&t| t <= now_ms - span_ms) {
        stamps.pop_front();
    }
    let count = stamps.len() as f64;

    let reply = if forced {
        // Only the newest limit entries ever decide anything: a forced charge logs no more.
        log(&mut stamps, now_ms, cost.min(limit) as usize);
        let keep = limit as usize;
        if stamps.len() > keep {
            stamps.drain(..stamps.len() - keep);
        }
        expires_at_ms = now_ms + span_ms;
        let count = count + cost;
        if count <= limit {
            verdict(true, [limit_s, window_s, int(limit - count)])
        } else {
            let oldest = stamps.front().map_or(now, |&t| t as f64);
            let retry = ((oldest + span - now) / 1000.0).ceil();
            verdict(false, [limit_s, window_s, Field::Int(0), int(retry)])
        }
    } else if count + need <= limit {
        if cost > 0.0 {
            log(&mut stamps, now_ms, cost as usize);
            expires_at_ms = now_ms + span_ms;
        }
        verdict(true, [limit_s, window_s, int(limit - count - need)])
    } else {
        let remaining = (limit - count).max(0.0);
        let (mut reset, mut retry) = (0.0, 0.0);
        if let Some(&newest) = stamps.back() {
            reset = ((newest as f64 + span - now) / 1000.0).ceil();
            retry = reset;
            let leaving = count + need - limit;
            if need <= limit && leaving < count {
                let last = stamps[leaving as usize - 1] as f64;
                retry = ((last + span - now) / 1000.0).ceil();
            }
        }
        verdict(false, [limit_s, int(reset), int(remaining), int(retry)])
    };
    // Redis deletes a sorted set that loses its last member.
    if !stamps.is_empty() {
        *slot = Some(Stored {
            state: State::SlidingLog { stamps },
            expires_at_ms,
        });
    }
    reply
}

/// The script's refund: entries that left the window are dropped, then up to `cost` of the
/// newest at or before `now`, then of the newest after it; the expiry stays.
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
fn refund(slot: &mut Option<Stored>, cost: f64, now: f64, limit: f64, window: f64) -> Verdict {
    let span_ms = window as i64 * 1000;
    let mut count = 0.0;
    let mut newest = None;
    if let Some(Stored {
        state: State::SlidingLog { stamps },
        ..
    }) = slot
    {
        while stamps.front().is_some_and(|&t| t <= now as i64 - span_ms) {
            stamps.pop_front();
        }
        // The newest at or before now first, then the newest after it (a clock ahead's).
        let upto = stamps.partition_point(|&t| t <= now as i64);
        let back = upto.min(cost as usize);
        stamps.drain(upto - back..upto);
        stamps.truncate(stamps.len().saturating_sub(cost as usize - back));
        count = stamps.len() as f64;
        newest = stamps.back().copied();
        if stamps.is_empty() {
            *slot = None;
        }
    }
    let reset = newest.map_or(0.0, |t| {
        ((t as f64 + window * 1000.0 - now) / 1000.0).ceil()
    });
    Verdict {
        allow: true,
        headers: [int(limit), int(reset), int((limit - count).max(0.0))].into(),
        granted: None,
        window: 0,
    }
}

/// ZADD of `n` entries at `now`: kept in score order, even if a clock stepped back.
fn log(stamps: &mut VecDeque<i64>, now: i64, n: usize) {
    let at = stamps.partition_point(|&t| t <= now);
    if at == stamps.len() {
        stamps.extend(std::iter::repeat_n(now, n));
    } else {
        for _ in 0..n {
            stamps.insert(at, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::{State, Stored};
    use super::super::tests::evaluate;
    use super::super::tests::run_scenarios;
    use crate::limit::Opt;

    #[test]
    fn shared_scenarios() {
        run_scenarios("sliding_log");
    }

    #[test]
    fn state_is_the_log_and_empties_into_no_key() {
        let opts = [Opt::Int(3), Opt::Int(10)];
        let mut slot = None;
        evaluate("sliding_log", &opts, 2, 1_000, &mut slot).unwrap();
        evaluate("sliding_log", &opts, 1, 4_000, &mut slot).unwrap();
        let log = |stamps: &[i64], expires_at_ms| {
            Some(Stored {
                state: State::SlidingLog {
                    stamps: stamps.iter().copied().collect(),
                },
                expires_at_ms,
            })
        };
        assert_eq!(slot, log(&[1_000, 1_000, 4_000], 14_000));
        // A peek still drops what left the window.
        evaluate("sliding_log", &opts, 0, 11_000, &mut slot).unwrap();
        assert_eq!(slot, log(&[4_000], 14_000));
        evaluate("sliding_log", &opts, 0, 14_000, &mut slot).unwrap();
        assert_eq!(slot, None);
    }
}

//! `lua/gcra.lua`: the generic cell rate algorithm, one theoretical arrival time (TAT) per key,
//! in integer microseconds.
//!
//! As the script: the TAT read once ([`Cell::read`]), then a function for each way a call
//! goes, in its order: [`refund`] (`-n`), [`force`] (`+n`), then [`take`].

use plug_limit_options::{Builtin, Refusal};

use super::Field;
use super::argv::{Argv, int, replied};
use super::state::{Reply, State, Stored};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::Gcra;
const NAME: &str = BUILTIN.name();

pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, window, burst] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 3)?;
    let cell = Cell::read(limit, window, burst, now * 1000.0, slot.as_ref());
    match units {
        Charge::Refund(cost) => refund(&cell, cost, slot),
        Charge::Force(cost) => force(&cell, cost, slot),
        Charge::Take(cost) => take(&cell, cost, slot),
    }
}

/// The key's TAT as the script reads it, with `now` in microseconds and the options' interval.
struct Cell {
    burst: f64,
    interval: f64,
    now: f64,
    /// The stored TAT, never before `now`.
    tat: f64,
}

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
impl Cell {
    /// The script's GET: a TAT in the past is `now`.
    fn read(limit: f64, window: f64, burst: f64, now: f64, slot: Option<&Stored>) -> Self {
        let tat = match slot {
            Some(Stored {
                state: State::Gcra { tat_us },
                ..
            }) if *tat_us as f64 >= now => *tat_us as f64,
            _ => now,
        };
        Self {
            burst,
            interval: (window * 1_000_000.0 / limit).ceil(),
            now,
            tat,
        }
    }

    /// The script's `SET tat PXAT`: the key goes when the TAT is reached.
    fn store(tat: f64) -> Option<Stored> {
        Some(Stored {
            state: State::Gcra { tat_us: tat as i64 },
            expires_at_ms: (tat / 1000.0).ceil() as i64,
        })
    }

    /// Whole seconds (ceil) from `now` to `at`.
    fn seconds_to(&self, at: f64) -> Field {
        int(((at - self.now) / 1_000_000.0).ceil())
    }

    /// The units a request may still take at `now` when the next is allowed at `allow_at`.
    fn room(&self, allow_at: f64) -> Field {
        int(((self.now - allow_at) / self.interval).floor())
    }

    /// When a request that leaves the TAT at `tat` is allowed.
    fn allow_at(&self, tat: f64) -> f64 {
        tat - self.interval * self.burst
    }
}

/// The script's `sign == '-'`: the TAT moves back, never before `now`, where the state is
/// empty and the key goes.
fn refund(cell: &Cell, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let (now, mut tat) = (cell.now, cell.tat);
    if tat > now {
        tat -= cell.interval * cost;
        if tat > now {
            *slot = Cell::store(tat);
        } else {
            tat = now;
            *slot = None;
        }
    }
    let room = cell.room(cell.allow_at(tat));
    replied(true, [int(cell.burst), cell.seconds_to(tat), room])
}

/// The script's `sign == '+'`: the TAT moves on whatever the limit, ahead of now by at most
/// two burst tolerances (one burst of debt).
fn force(cell: &Cell, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let top = cell.now + 2.0 * cell.interval * cell.burst;
    let forced = (cell.tat + cell.interval * cost).min(top);
    *slot = Cell::store(forced);
    let (burst_s, reset) = (int(cell.burst), cell.seconds_to(forced));
    let allow_at = cell.allow_at(forced);
    if allow_at <= cell.now {
        return replied(true, [burst_s, reset, cell.room(allow_at)]);
    }
    let retry = cell.seconds_to(allow_at + cell.interval);
    replied(false, [burst_s, reset, Field::Int(0), retry])
}

/// The script's take (a cost of 0 peeks, as a cost-1 request): the TAT moves on when the
/// request conforms; a deny writes nothing.
fn take(cell: &Cell, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let need = if cost > 0.0 { cost } else { 1.0 };
    let new_tat = cell.tat + cell.interval * need;
    let allow_at = cell.allow_at(new_tat);
    let burst_s = int(cell.burst);
    if allow_at <= cell.now {
        if cost > 0.0 {
            *slot = Cell::store(new_tat);
        }
        return replied(
            true,
            [burst_s, cell.seconds_to(new_tat), cell.room(allow_at)],
        );
    }
    let (reset, retry) = (cell.seconds_to(cell.tat), cell.seconds_to(allow_at));
    replied(false, [burst_s, reset, Field::Int(0), retry])
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

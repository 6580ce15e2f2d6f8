//! `lua/sliding_log.lua`: the time of every admitted unit in the last window, exactly.
//!
//! As the script: the log read once, past its ZREMRANGEBYSCORE ([`Log::read`]), then a
//! function for each way a call goes, in its order: [`refund`] (`-n`), [`force`] (`+n`),
//! [`take`], and its [`deny`].

use std::collections::VecDeque;

use plug_limit_options::{Builtin, Refusal};

use super::Field;
use super::argv::{Argv, int, replied};
use super::state::{Reply, State, Stored};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::SlidingLog;
const NAME: &str = BUILTIN.name();

pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 2)?;
    let mut log = Log::read(slot, limit, window, now);
    let reply = match units {
        Charge::Refund(cost) => refund(&mut log, cost),
        Charge::Force(cost) => force(&mut log, cost),
        Charge::Take(cost) => take(&mut log, cost),
    };
    log.write(slot);
    reply
}

/// The key's sorted set as the script reads it at `now`, and the options it is read with.
struct Log {
    limit: f64,
    window: f64,
    now: f64,
    /// The scores in the window, oldest first.
    stamps: VecDeque<i64>,
    expires_at_ms: i64,
}

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
impl Log {
    /// The key's log, taken out of `slot` until [`write`](Self::write) puts it back, without
    /// the entries that left the window (the script's ZREMRANGEBYSCORE).
    fn read(slot: &mut Option<Stored>, limit: f64, window: f64, now: f64) -> Self {
        let (mut stamps, expires_at_ms) = match slot.take() {
            Some(Stored {
                state: State::SlidingLog { stamps },
                expires_at_ms,
            }) => (stamps, expires_at_ms),
            other => {
                *slot = other;
                (VecDeque::new(), 0)
            }
        };
        let (now_ms, span_ms) = (now as i64, (window * 1000.0) as i64);
        while stamps.front().is_some_and(|&t| t <= now_ms - span_ms) {
            stamps.pop_front();
        }
        Self {
            limit,
            window,
            now,
            stamps,
            expires_at_ms,
        }
    }

    /// Puts the log back: Redis deletes a sorted set that loses its last member.
    fn write(self, slot: &mut Option<Stored>) {
        if !self.stamps.is_empty() {
            *slot = Some(Stored {
                state: State::SlidingLog {
                    stamps: self.stamps,
                },
                expires_at_ms: self.expires_at_ms,
            });
        }
    }

    fn span(&self) -> f64 {
        self.window * 1000.0
    }

    /// The script's ZCARD.
    fn count(&self) -> f64 {
        self.stamps.len() as f64
    }

    /// Seconds (ceil) until the entry logged at `t` leaves the window.
    fn leaves(&self, t: i64) -> f64 {
        ((t as f64 + self.span() - self.now) / 1000.0).ceil()
    }

    /// ZADD of `n` entries at `now`, then PEXPIREAT a window on: kept in score order, even if
    /// a clock stepped back.
    fn log(&mut self, n: usize) {
        let (now, stamps) = (self.now as i64, &mut self.stamps);
        let at = stamps.partition_point(|&t| t <= now);
        if at == stamps.len() {
            stamps.extend(std::iter::repeat_n(now, n));
        } else {
            for _ in 0..n {
                stamps.insert(at, now);
            }
        }
        self.expires_at_ms = now + self.span() as i64;
    }
}

/// The script's `sign == '-'`: up to `cost` of the newest entries at or before `now`, then of
/// the newest after it; the expiry stays.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole, 1..=MAX
fn refund(log: &mut Log, cost: f64) -> Result<Reply, Refusal> {
    let (now, cost, stamps) = (log.now as i64, cost as usize, &mut log.stamps);
    // A take at now logged its own at now: an entry after now outlives it, and giving that back
    // in its place would leave the log looser than before the take.
    let upto = stamps.partition_point(|&t| t <= now);
    let back = upto.min(cost);
    stamps.drain(upto - back..upto);
    stamps.truncate(stamps.len().saturating_sub(cost - back));
    let reset = log.stamps.back().map_or(0.0, |&t| log.leaves(t));
    let remaining = int((log.limit - log.count()).max(0.0));
    replied(true, [int(log.limit), int(reset), remaining])
}

/// The script's forced charge: every unit counts toward the decision, but only the newest
/// `limit` entries ever decide anything, so the log keeps no more.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss
)] // values stay below 2^53
fn force(log: &mut Log, cost: f64) -> Result<Reply, Refusal> {
    let count = log.count() + cost;
    log.log(cost.min(log.limit) as usize);
    let keep = log.limit as usize;
    if log.stamps.len() > keep {
        log.stamps.drain(..log.stamps.len() - keep);
    }
    let (limit_s, window_s) = (int(log.limit), int(log.window));
    if count <= log.limit {
        return replied(true, [limit_s, window_s, int(log.limit - count)]);
    }
    // The log now holds limit entries: a cost-1 request waits for the oldest.
    let oldest = log.stamps.front().map_or(log.now, |&t| t as f64);
    let retry = ((oldest + log.span() - log.now) / 1000.0).ceil();
    replied(false, [limit_s, window_s, Field::Int(0), int(retry)])
}

/// The script's take (a cost of 0 peeks, as a cost-1 request): logs `cost` entries when the
/// window has room for them.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole, 0..=MAX
fn take(log: &mut Log, cost: f64) -> Result<Reply, Refusal> {
    let need = if cost > 0.0 { cost } else { 1.0 };
    let count = log.count();
    if count + need > log.limit {
        return deny(log, need);
    }
    if cost > 0.0 {
        log.log(cost as usize);
    }
    let remaining = int(log.limit - count - need);
    replied(true, [int(log.limit), int(log.window), remaining])
}

/// The script's denial: the reset when the newest entry leaves, retry-after when the entry
/// whose leaving makes room for `need` leaves (the reset when `need` is above the limit).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole, below 2^53
fn deny(log: &Log, need: f64) -> Result<Reply, Refusal> {
    let (limit, count) = (log.limit, log.count());
    let remaining = (limit - count).max(0.0);
    let (mut reset, mut retry) = (0.0, 0.0);
    if let Some(&newest) = log.stamps.back() {
        reset = log.leaves(newest);
        retry = reset;
        // The entries that must leave first.
        let leaving = count + need - limit;
        if need <= limit && leaving < count {
            retry = log.leaves(log.stamps[leaving as usize - 1]);
        }
    }
    replied(false, [int(limit), int(reset), int(remaining), int(retry)])
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

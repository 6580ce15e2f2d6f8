//! `lua/fixed_window.lua` with an explicit `now`: a counter per window, the window timed from
//! its first request.
//!
//! As the script, a function for each way a call goes, in its order: [`refund`] (`-n`),
//! [`batch`] (`~n`), [`force`] (`+n`), [`peek`] (cost 0), then [`take`].

use plug_limit_options::{Builtin, Refusal};

use super::Field;
use super::argv::{Argv, CAP, decimal, granted, replied};
use super::state::{Reply, State, Stored};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::FixedWindow;
const NAME: &str = BUILTIN.name();

/// What every branch of the script reads: the options, `now`, and the key's counter. Handed
/// on by value, so that only the branch that runs lays it out in memory.
#[derive(Clone, Copy)]
struct Counter {
    limit: i64,
    window: i64,
    now: i64,
    /// The stored count and when its window ends (None: no key).
    current: Option<(i64, i64)>,
}

#[allow(clippy::cast_possible_truncation)] // every value is validated to stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (cost, now) = argv.batch_cost_and_now(NAME, 2)?;
    let key = Counter {
        limit: limit as i64,
        window: window as i64,
        now: now as i64,
        current: stored(slot.as_ref()),
    };
    match cost {
        Charge::Refund(cost) => refund(key, cost as i64, slot),
        Charge::UpTo(n) => batch(key, n as i64, slot),
        Charge::Force(cost) => force(key, cost as i64, slot),
        Charge::Take(cost) => match cost as i64 {
            0 => peek(key),
            cost => take(key, cost, slot),
        },
    }
}

/// The counter's count and the end of its window, as GET and PEXPIRETIME read them.
fn stored(slot: Option<&Stored>) -> Option<(i64, i64)> {
    match slot {
        Some(Stored {
            state: State::FixedWindow { count },
            expires_at_ms,
        }) => Some((*count, *expires_at_ms)),
        _ => None,
    }
}

impl Counter {
    fn limit_s(&self) -> Field {
        decimal(self.limit)
    }

    /// A new (or emptied) window's reset: the whole window.
    fn window_s(&self) -> Field {
        decimal(self.window)
    }

    /// When a window begun now ends.
    fn new_end(&self) -> i64 {
        self.now + self.window * 1000
    }

    /// Seconds left of the window, rounded as Redis TTL rounds: the script's
    /// `math.floor((ms + 500) / 1000)`, exact in integers; the script's double agrees, as
    /// every reachable difference (at most about 10^13 ms) is far below 2^53.
    fn ttl(&self, expires_at_ms: i64) -> Field {
        Field::Int((expires_at_ms - self.now + 500).div_euclid(1000))
    }

    /// The count and the reset a call that writes nothing sees: a new window holds nothing
    /// yet, a stored one keeps its count and its end.
    fn count_and_reset(&self) -> (i64, Field) {
        self.current
            .map_or_else(|| (0, self.window_s()), |(count, at)| (count, self.ttl(at)))
    }
}

/// The script's `sign == '-'`: DECRBY, or DEL once the count reaches 0; a key that holds
/// nothing is not written.
fn refund(key: Counter, cost: i64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let limit_s = key.limit_s();
    match key.current {
        Some((count, expires_at_ms)) if count > cost => {
            set_count(slot, count - cost);
            let left = (key.limit - (count - cost)).max(0);
            replied(true, [limit_s, key.ttl(expires_at_ms), decimal(left)])
        }
        // Back to an empty counter, which is no counter at all.
        Some(_) => {
            *slot = None;
            replied(true, [limit_s.clone(), key.window_s(), limit_s])
        }
        None => replied(true, [limit_s.clone(), key.window_s(), limit_s]),
    }
}

/// The script's `sign == '~'`: takes up to `n`, as many as the window has left, and nothing
/// when it has none.
fn batch(key: Counter, n: i64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let (count, reset) = key.count_and_reset();
    let expires_at_ms = key.current.map_or(key.new_end(), |(_, at)| at);
    let window_ms = expires_at_ms - key.now;
    let grant = (key.limit - count).min(n);
    if grant < 1 {
        return granted(0.0, window_ms, [key.limit_s(), reset, Field::Int(0)]);
    }
    *slot = Some(Stored {
        state: State::FixedWindow {
            count: count + grant,
        },
        expires_at_ms,
    });
    let left = decimal(key.limit - count - grant);
    #[allow(clippy::cast_precision_loss)] // grant <= n <= 2147483647
    granted(grant as f64, window_ms, [key.limit_s(), reset, left])
}

/// The script's `sign == '+'`: INCRBY whatever the limit, up to [`CAP`]; a new window's TTL
/// set as a take sets it.
fn force(key: Counter, cost: i64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let (count, reset) = if let Some((count, expires_at_ms)) = key.current {
        (count + cost, key.ttl(expires_at_ms))
    } else {
        *slot = Some(Stored {
            state: State::FixedWindow { count: cost },
            expires_at_ms: key.new_end(),
        });
        (cost, key.window_s())
    };
    let count = count.min(CAP);
    set_count(slot, count);
    if count <= key.limit {
        replied(true, [key.limit_s(), reset, decimal(key.limit - count)])
    } else {
        replied(false, [key.limit_s(), reset, Field::Int(0)])
    }
}

/// The script's `cost == 0`: a cost-1 request's answer, with nothing written.
fn peek(key: Counter) -> Result<Reply, Refusal> {
    let (count, reset) = key.count_and_reset();
    if count < key.limit {
        replied(true, [key.limit_s(), reset, decimal(key.limit - count - 1)])
    } else {
        replied(false, [key.limit_s(), reset, Field::Int(0)])
    }
}

/// The script's take, from its INCRBY on: a new window, or a count that a denial takes back.
/// Inline to [`evaluate`]: nearly every check is one, and a call of its own costs it.
#[inline(always)]
fn take(key: Counter, cost: i64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let (limit, limit_s) = (key.limit, key.limit_s());
    let Some((count, expires_at_ms)) = key.current else {
        // A new window: a cost it cannot hold leaves no key behind.
        if cost > limit {
            *slot = None;
            return replied(false, [limit_s, key.window_s(), decimal(limit)]);
        }
        *slot = Some(Stored {
            state: State::FixedWindow { count: cost },
            expires_at_ms: key.new_end(),
        });
        return replied(true, [limit_s, key.window_s(), decimal(limit - cost)]);
    };
    let reset = key.ttl(expires_at_ms);
    let count = count + cost;
    if count <= limit {
        set_count(slot, count);
        return replied(true, [limit_s, reset, decimal(limit - count)]);
    }
    let left = (limit - (count - cost)).max(0);
    replied(false, [limit_s, reset, decimal(left)])
}

/// The stored counter's new count (its window's end stays).
fn set_count(slot: &mut Option<Stored>, value: i64) {
    if let Some(Stored {
        state: State::FixedWindow { count },
        ..
    }) = slot
    {
        *count = value;
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
        run_scenarios("fixed_window");
    }

    #[test]
    fn state_is_the_counter_and_the_window_end() {
        let opts = [Opt::Int(3), Opt::Int(60)];
        let mut slot = None;
        evaluate("fixed_window", &opts, 2, 1_000, &mut slot).unwrap();
        let stored = |count| {
            Some(Stored {
                state: State::FixedWindow { count },
                expires_at_ms: 61_000,
            })
        };
        assert_eq!(slot, stored(2));
        // A denial is undone, whatever its cost: the count never passes the limit.
        assert!(
            !evaluate("fixed_window", &opts, 2, 2_000, &mut slot)
                .unwrap()
                .allow
        );
        assert_eq!(slot, stored(2));
        assert!(
            evaluate("fixed_window", &opts, 1, 2_000, &mut slot)
                .unwrap()
                .allow
        );
        assert!(
            !evaluate("fixed_window", &opts, 1, 2_000, &mut slot)
                .unwrap()
                .allow
        );
        assert_eq!(slot, stored(3));
        // A peek writes nothing, and a cost above the limit leaves no key.
        evaluate("fixed_window", &opts, 0, 2_000, &mut slot).unwrap();
        assert_eq!(slot, stored(3));
        let mut fresh = None;
        assert!(
            !evaluate("fixed_window", &opts, 4, 2_000, &mut fresh)
                .unwrap()
                .allow
        );
        assert_eq!(fresh, None);
    }
}

//! `lua/sliding_window.lua`: the current window's count plus the previous window's, weighted by
//! how much of it still overlaps the sliding window.
//!
//! As the script: the two windows read once ([`Windows`]), then its `if sign then` block, a
//! function for each sign ([`refund`] for `-n`, [`force`] for `+n`), then [`take`], each ending
//! in the script's [`deny`] when it denies.

use plug_limit_options::{Builtin, Refusal};

use super::argv::{Argv, CAP, int, replied};
use super::state::{Reply, State, Stored};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::SlidingWindow;
const NAME: &str = BUILTIN.name();

pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 2)?;
    let mut windows = Windows::read(limit, window, now, slot.as_ref());
    match units {
        Charge::Refund(cost) => refund(&mut windows, cost, slot),
        Charge::Force(cost) => force(&mut windows, cost, slot),
        Charge::Take(cost) => take(&windows, cost, slot),
    }
}

/// The key's two windows as the script reads them at `now`.
struct Windows {
    limit: f64,
    span: f64,
    now: f64,
    start: f64,
    elapsed: f64,
    current: f64,
    previous: f64,
    /// The stored key's own expiry, which a refund keeps.
    ends: f64,
}

impl Windows {
    /// The script's GET: a count of the window before this one is the previous count, an
    /// older one counts nothing.
    #[allow(clippy::cast_precision_loss)] // values stay below 2^53
    fn read(limit: f64, window: f64, now: f64, slot: Option<&Stored>) -> Self {
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
        Self {
            limit,
            span,
            now,
            start,
            elapsed: now - start,
            current,
            previous,
            ends,
        }
    }

    /// What the estimate leaves of the limit.
    fn left(&self) -> f64 {
        self.limit - (self.previous * (self.span - self.elapsed) / self.span + self.current)
    }

    /// When the current count ages out: two windows after this one started.
    fn current_ends(&self) -> f64 {
        self.start + 2.0 * self.span
    }

    /// Seconds until the key holds nothing: two windows after the current count, one after the
    /// previous.
    fn reset_s(&self) -> f64 {
        if self.current > 0.0 {
            ((self.current_ends() - self.now) / 1000.0).ceil()
        } else if self.previous > 0.0 {
            ((self.start + self.span - self.now) / 1000.0).ceil()
        } else {
            0.0
        }
    }

    /// The script's `SET key "<start> <current> <previous>" PXAT ends`.
    #[allow(clippy::cast_possible_truncation)] // values stay below 2^53
    fn write(&self, current: f64, ends: f64) -> Option<Stored> {
        Some(Stored {
            state: State::SlidingWindow {
                start_ms: self.start as i64,
                current: current as i64,
                previous: self.previous as i64,
            },
            expires_at_ms: ends as i64,
        })
    }
}

/// The script's `sign == '-'`: from the current window's count first, then the previous
/// one's; the key keeps its own expiry, and goes once both are 0.
fn refund(
    windows: &mut Windows,
    mut cost: f64,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    if windows.current + windows.previous > 0.0 {
        let back = windows.current.min(cost);
        (windows.current, cost) = (windows.current - back, cost - back);
        windows.previous = if windows.previous > cost {
            windows.previous - cost
        } else {
            0.0
        };
        *slot = if windows.current + windows.previous > 0.0 {
            windows.write(windows.current, windows.ends)
        } else {
            None
        };
    }
    settled(windows, true)
}

/// The script's `sign == '+'`: the current count goes past the limit, up to [`CAP`].
#[allow(clippy::cast_precision_loss)] // CAP is exact
fn force(windows: &mut Windows, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    windows.current = (windows.current + cost).min(CAP as f64);
    *slot = windows.write(windows.current, windows.current_ends());
    settled(windows, false)
}

/// The block's answer: the state after, allowed on a refund or within the limit; a denial's
/// retry-after is when a cost-1 request passes.
fn settled(windows: &Windows, refund: bool) -> Result<Reply, Refusal> {
    let left = windows.left();
    if refund || left >= 0.0 {
        let remaining = int(left.floor().max(0.0));
        return replied(
            true,
            [int(windows.limit), int(windows.reset_s()), remaining],
        );
    }
    deny(windows, 1.0, left)
}

/// The script's take (a cost of 0 peeks, as a cost-1 request): admitted when the estimate has
/// room for it.
fn take(windows: &Windows, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let need = if cost > 0.0 { cost } else { 1.0 };
    let left = windows.left();
    if need > left {
        return deny(windows, need, left);
    }
    if cost > 0.0 {
        *slot = windows.write(windows.current + cost, windows.current_ends());
    }
    let reset = ((windows.current_ends() - windows.now) / 1000.0).ceil();
    let remaining = (left - need).floor();
    replied(true, [int(windows.limit), int(reset), int(remaining)])
}

/// The script's denial: retry-after when the estimate has room for `need`, as the previous
/// window's weight decays (or, past this window's room, the current one's); the reset when
/// `need` is above the limit, which never passes.
fn deny(windows: &Windows, need: f64, left: f64) -> Result<Reply, Refusal> {
    let Windows {
        limit,
        span,
        elapsed,
        current,
        previous,
        ..
    } = *windows;
    let remaining = left.floor().max(0.0);
    let reset = windows.reset_s();
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

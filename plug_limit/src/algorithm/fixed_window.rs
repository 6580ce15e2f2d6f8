//! `lua/fixed_window.lua` with an explicit `now`: a counter per window, the window timed from
//! its first request.

use super::Field;
use plug_limit_options::{Builtin, Refusal};

use super::argv::{Argv, CAP, decimal, granted, verdict};
use super::state::{State, Stored, Verdict};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::FixedWindow;
const NAME: &str = BUILTIN.name();

#[allow(clippy::cast_possible_truncation)] // every value is validated to stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Verdict, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (limit, window) = (limit as i64, window as i64);
    let (cost, now) = argv.batch_cost_and_now(NAME, 2)?;
    let now = now as i64;
    let limit_s = decimal(limit);
    // Only a new (or emptied) window's reset is the whole window: made when one is.
    let window_s = || decimal(window);

    let current = match slot {
        Some(Stored {
            state: State::FixedWindow { count },
            expires_at_ms,
        }) => Some((*count, *expires_at_ms)),
        _ => None,
    };
    // Seconds left of the window, rounded as Redis TTL rounds: the script's
    // `math.floor((ms + 500) / 1000)`, exact in integers; the script's double agrees, as
    // every reachable difference (at most about 10^13 ms) is far below 2^53.
    let ttl = |expires_at_ms: i64| Field::Int((expires_at_ms - now + 500).div_euclid(1000));

    let units = match cost.plain() {
        Ok(units) => units,
        Err(n) => {
            // A new window holds nothing yet; a stored one keeps its count and its end.
            let (count, reset) =
                current.map_or_else(|| (0, window_s()), |(count, at)| (count, ttl(at)));
            let expires_at_ms = current.map_or(now + window * 1000, |(_, at)| at);
            let window_ms = expires_at_ms - now;
            let grant = (limit - count).min(n as i64);
            if grant < 1 {
                return granted(0.0, window_ms, [limit_s, reset, Field::Int(0)]);
            }
            *slot = Some(Stored {
                state: State::FixedWindow {
                    count: count + grant,
                },
                expires_at_ms,
            });
            #[allow(clippy::cast_precision_loss)] // grant <= n <= 2147483647
            return granted(
                grant as f64,
                window_ms,
                [limit_s, reset, decimal(limit - count - grant)],
            );
        }
    };
    let cost = match units {
        Charge::Take(cost) => cost as i64,
        Charge::Refund(cost) => {
            let cost = cost as i64;
            return match current {
                Some((count, expires_at_ms)) if count > cost => {
                    set_count(slot, count - cost);
                    let left = (limit - (count - cost)).max(0);
                    verdict(true, [limit_s, ttl(expires_at_ms), decimal(left)])
                }
                // Back to an empty counter, which is no counter at all.
                Some(_) => {
                    *slot = None;
                    verdict(true, [limit_s.clone(), window_s(), limit_s])
                }
                None => verdict(true, [limit_s.clone(), window_s(), limit_s]),
            };
        }
        Charge::Force(cost) => {
            let cost = cost as i64;
            let (count, reset) = if let Some((count, expires_at_ms)) = current {
                (count + cost, ttl(expires_at_ms))
            } else {
                *slot = Some(Stored {
                    state: State::FixedWindow { count: cost },
                    expires_at_ms: now + window * 1000,
                });
                (cost, window_s())
            };
            let count = count.min(CAP);
            set_count(slot, count);
            return if count <= limit {
                verdict(true, [limit_s, reset, decimal(limit - count)])
            } else {
                verdict(false, [limit_s, reset, Field::Int(0)])
            };
        }
    };

    if cost == 0 {
        let (count, reset) =
            current.map_or_else(|| (0, window_s()), |(count, at)| (count, ttl(at)));
        return if count < limit {
            verdict(true, [limit_s, reset, decimal(limit - count - 1)])
        } else {
            verdict(false, [limit_s, reset, Field::Int(0)])
        };
    }

    let Some((count, expires_at_ms)) = current else {
        // A new window: a cost it cannot hold leaves no key behind.
        if cost > limit {
            *slot = None;
            return verdict(false, [limit_s, window_s(), decimal(limit)]);
        }
        *slot = Some(Stored {
            state: State::FixedWindow { count: cost },
            expires_at_ms: now + window * 1000,
        });
        return verdict(true, [limit_s, window_s(), decimal(limit - cost)]);
    };

    let reset = ttl(expires_at_ms);
    let count = count + cost;
    if count <= limit {
        set_count(slot, count);
        return verdict(true, [limit_s, reset, decimal(limit - count)]);
    }
    let left = (limit - (count - cost)).max(0);
    verdict(false, [limit_s, reset, decimal(left)])
}

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

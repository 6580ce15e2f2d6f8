//! `lua/token_bucket.lua` with an explicit `now`: `burst` tokens at once, the other
//! `limit - burst` refilled evenly over the window, everything reset when the window ends.

use plug_limit_options::{Builtin, Refusal};

use std::convert::Infallible;

use super::argv::{Argv, granted, int, verdict};
use super::state::{State, Stored, Verdict};
use super::{Field, Fields};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::TokenBucket;
const NAME: &str = BUILTIN.name();

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Verdict, Refusal> {
    let [limit, window, burst] = argv.options(BUILTIN)?;
    let (cost, now) = argv.batch_cost_and_now(NAME, 3)?;

    let refill = limit - burst;
    let (limit_s, window_s) = (int(limit), int(window));
    // The options are whole and within 1..=2^31-1: each fits.
    let policy = Field::TokenBucketPolicy {
        limit: limit as u32,
        window: window as u32,
        burst: burst as u32,
    };

    let current = match slot {
        Some(Stored {
            state:
                State::TokenBucket {
                    tokens,
                    remaining,
                    last_ms,
                },
            expires_at_ms,
        }) => Some((
            *tokens,
            *remaining as f64,
            *last_ms as f64,
            *expires_at_ms as f64,
        )),
        _ => None,
    };
    let bucket = |policy, limit_s, window_s| Bucket {
        limit,
        window,
        burst,
        refill,
        policy,
        limit_s,
        window_s,
    };
    let cost = match cost.plain() {
        Ok(Charge::Take(cost)) => cost,
        Ok(units) => {
            return settle(
                &bucket(policy, limit_s, window_s),
                units,
                now,
                current,
                slot,
            );
        }
        Err(n) => {
            return up_to(&bucket(policy, limit_s, window_s), n, now, current, slot);
        }
    };
    let need = if cost > 0.0 { cost } else { 1.0 };
    let Some((mut tokens, remaining, last, expiry)) = current else {
        if need > burst {
            let mut retry = window;
            if refill > 0.0 && limit >= need {
                retry = ((need - burst) * window / refill).ceil().min(window);
            }
            return verdict(false, [policy, window_s, limit_s, int(retry)]);
        }
        let (tokens, remaining, expiry) = (burst - need, limit - need, now + window * 1000.0);
        if cost > 0.0 {
            *slot = Some(Stored {
                state: State::TokenBucket {
                    tokens,
                    remaining: remaining as i64,
                    last_ms: now as i64,
                },
                expires_at_ms: expiry as i64,
            });
        }
        if tokens >= 1.0 {
            return verdict(true, [policy, window_s, int(remaining)]);
        }
        let retry = if refill > 0.0 {
            (window / refill).ceil()
        } else {
            window
        };
        return verdict(true, [policy, window_s, int(remaining), int(retry)]);
    };

    let ttl = ((expiry - now + 500.0) / 1000.0).floor();
    let elapsed = (now - last).max(0.0);
    let taken = tokens;
    if refill > 0.0 {
        tokens += refill * elapsed / window / 1000.0;
    }

    if tokens >= need && remaining >= need {
        let (tokens, remaining) = (tokens - need, remaining - need);
        if cost > 0.0
            && let Some(Stored {
                state:
                    State::TokenBucket {
                        tokens: stored_tokens,
                        remaining: stored_remaining,
                        last_ms,
                    },
                ..
            }) = slot
        {
            // Never back: a time behind the last refill would have the refill between given again.
            *last_ms = (*last_ms).max(now as i64);
            (*stored_tokens, *stored_remaining) = (tokens, remaining as i64);
        }
        if tokens >= 1.0 {
            return verdict(true, [policy, int(ttl), int(remaining)]);
        }
        let retry = if refill > 0.0 {
            (window / refill).ceil().min(ttl)
        } else {
            ttl
        };
        return verdict(true, [policy, int(ttl), int(remaining), int(retry)]);
    }

    let mut retry = ttl;
    if refill > 0.0 && remaining >= need {
        retry = ((need - taken.floor()) * window / refill - elapsed / 1000.0)
            .ceil()
            .abs()
            .min(ttl);
    }
    verdict(
        false,
        [policy, int(ttl), int(remaining.max(0.0)), int(retry)],
    )
}

/// A bucket's opts, and the header values they make.
struct Bucket {
    limit: f64,
    window: f64,
    burst: f64,
    refill: f64,
    policy: Field,
    limit_s: Field,
    window_s: Field,
}

/// A bucket as the script's `if sign then` block reads it, refilled up to `now`: a live one's
/// state, or a new window's.
struct Refilled {
    tokens: f64,
    remaining: f64,
    expiry: f64,
    ttl: f64,
    /// The tokens the last take left, before the refill since.
    taken: f64,
    elapsed: f64,
    /// The time stored as the last refill: never behind the one stored before.
    since: f64,
}

impl Refilled {
    fn new(bucket: &Bucket, now: f64, live: Option<(f64, f64, f64, f64)>) -> Self {
        let Bucket {
            limit,
            window,
            burst,
            refill,
            ..
        } = *bucket;
        match live {
            Some((taken, remaining, last, expiry)) => {
                let elapsed = (now - last).max(0.0);
                let mut tokens = taken;
                if refill > 0.0 {
                    tokens += refill * elapsed / window / 1000.0;
                }
                Self {
                    tokens,
                    remaining,
                    expiry,
                    ttl: ((expiry - now + 500.0) / 1000.0).floor(),
                    taken,
                    elapsed,
                    since: last.max(now),
                }
            }
            None => Self {
                tokens: burst,
                remaining: limit,
                expiry: now + window * 1000.0,
                ttl: window,
                taken: 0.0,
                elapsed: 0.0,
                since: now,
            },
        }
    }

    /// Writes the bucket back, as the block's `HSET`.
    #[allow(clippy::cast_possible_truncation)] // values stay below 2^53
    fn store(&self, slot: &mut Option<Stored>) {
        *slot = Some(Stored {
            state: State::TokenBucket {
                tokens: self.tokens,
                remaining: self.remaining as i64,
                last_ms: self.since as i64,
            },
            expires_at_ms: self.expiry as i64,
        });
    }
}

/// A refund's answer when no bucket is left: a new window's, full.
fn untouched(bucket: &Bucket) -> Result<Verdict, Refusal> {
    let (policy, window_s, limit_s) = (&bucket.policy, &bucket.window_s, &bucket.limit_s);
    verdict(true, [policy.clone(), window_s.clone(), limit_s.clone()])
}

/// A refund or forced charge, as the script's `if sign then` block: `current` is the stored
/// `(tokens, remaining, last, expiry)`.
fn settle(
    bucket: &Bucket,
    units: Charge<f64, Infallible>,
    now: f64,
    current: Option<(f64, f64, f64, f64)>,
    slot: &mut Option<Stored>,
) -> Result<Verdict, Refusal> {
    let Bucket {
        limit,
        window,
        burst,
        refill,
        ..
    } = *bucket;
    let live = current.filter(|&(.., expiry)| expiry > now);
    let refund = matches!(units, Charge::Refund(_));
    if refund && live.is_none() {
        return untouched(bucket);
    }
    let mut state = Refilled::new(bucket, now, live);
    let (tokens, remaining) = (&mut state.tokens, &mut state.remaining);
    match units {
        Charge::Refund(cost) => {
            let mut full = burst;
            if refill > 0.0 {
                full = burst + refill * (now - (state.expiry - window * 1000.0)) / window / 1000.0;
            }
            if *tokens + cost <= full {
                *tokens += cost;
            } else if *tokens < full {
                *tokens = full;
            }
            *remaining = (*remaining + cost).min(limit);
            if *tokens >= burst && *remaining >= limit && state.expiry == now + window * 1000.0 {
                // A window begun at `now` and given back in full is no window.
                *slot = None;
                return untouched(bucket);
            }
        }
        Charge::Force(cost) | Charge::Take(cost) => {
            *tokens = (*tokens - cost).max(-burst);
            *remaining = (*remaining - cost).max(-limit);
        }
    }
    state.store(slot);
    let Refilled {
        tokens,
        remaining,
        ttl,
        ..
    } = state;
    let mut headers = Fields::from([bucket.policy.clone(), int(ttl), int(remaining.max(0.0))]);
    if tokens < 1.0 || remaining < 1.0 {
        let mut retry = ttl;
        if refill > 0.0 && remaining >= 1.0 {
            retry = ((1.0 - tokens) * window / refill).ceil().min(ttl);
        }
        headers.push(int(retry));
    }
    Ok(Verdict {
        allow: refund || (tokens >= 0.0 && remaining >= 0.0),
        headers,
        granted: None,
        window: 0,
    })
}

/// A batch's `~n`, as the script's `sign == '~'` branch: takes up to `n`, as many as the
/// bucket has whole tokens and the window has remaining.
fn up_to(
    bucket: &Bucket,
    n: f64,
    now: f64,
    current: Option<(f64, f64, f64, f64)>,
    slot: &mut Option<Stored>,
) -> Result<Verdict, Refusal> {
    let Bucket { window, refill, .. } = *bucket;
    let live = current.filter(|&(.., expiry)| expiry > now);
    let mut state = Refilled::new(bucket, now, live);
    let Refilled {
        tokens,
        remaining,
        ttl,
        taken,
        elapsed,
        ..
    } = state;
    let grant = n.min(tokens.floor()).min(remaining);
    let policy = bucket.policy.clone();
    #[allow(clippy::cast_possible_truncation)] // whole milliseconds, below 2^53
    let window_ms = (state.expiry - now) as i64;
    if grant < 1.0 {
        // As a cost-1 request's deny.
        let mut retry = ttl;
        if refill > 0.0 && remaining >= 1.0 {
            retry = ((1.0 - taken.floor()) * window / refill - elapsed / 1000.0)
                .ceil()
                .abs()
                .min(ttl);
        }
        let left = int(remaining.max(0.0));
        return granted(0.0, window_ms, [policy, int(ttl), left, int(retry)]);
    }
    state.tokens -= grant;
    state.remaining -= grant;
    state.store(slot);
    let (reset, left) = (int(ttl), int(state.remaining));
    if state.tokens >= 1.0 {
        return granted(grant, window_ms, [policy, reset, left]);
    }
    let retry = if refill > 0.0 {
        (window / refill).ceil().min(ttl)
    } else {
        ttl
    };
    granted(grant, window_ms, [policy, reset, left, int(retry)])
}

#[cfg(test)]
mod tests {
    use super::super::state::{State, Stored};
    use super::super::tests::evaluate;
    use super::super::tests::run_scenarios;
    use crate::limit::Opt;

    #[test]
    fn shared_scenarios() {
        run_scenarios("token_bucket");
    }

    #[test]
    fn state_keeps_fractional_tokens_and_the_window_end() {
        let opts = [Opt::Int(5), Opt::Int(2), Opt::Int(3)];
        let mut slot = None;
        evaluate("token_bucket", &opts, 3, 10_000, &mut slot).unwrap();
        assert_eq!(
            slot,
            Some(Stored {
                state: State::TokenBucket {
                    tokens: 0.0,
                    remaining: 2,
                    last_ms: 10_000,
                },
                expires_at_ms: 12_000,
            })
        );
        // One token a second: 1.25 after 1250 ms, 0.25 left once one is taken.
        let taken = evaluate("token_bucket", &opts, 1, 11_250, &mut slot).unwrap();
        assert!(taken.allow);
        let Some(Stored {
            state: State::TokenBucket { tokens, .. },
            ..
        }) = slot
        else {
            panic!("{slot:?}")
        };
        assert!((tokens - 0.25).abs() < 1e-12, "{tokens}");
        // A peek writes nothing.
        let before = slot.clone();
        evaluate("token_bucket", &opts, 0, 11_900, &mut slot).unwrap();
        assert_eq!(slot, before);
    }
}

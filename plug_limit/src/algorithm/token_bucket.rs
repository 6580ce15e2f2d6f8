//! `lua/token_bucket.lua` with an explicit `now`: `burst` tokens at once, the other
//! `limit - burst` refilled evenly over the window, everything reset when the window ends.
//!
//! As the script: its `if sign then` block, a function for each sign in its order ([`batch`]
//! for `~n`, [`refund`] for `-n`, [`force`] for `+n`) over a bucket [`Refilled`] up to `now`,
//! then [`take`], which starts a window or takes from the live one.

use plug_limit_options::{Builtin, Refusal};

use super::argv::{Argv, granted, int, replied};
use super::state::{Reply, State, Stored};
use super::{Field, Fields};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::TokenBucket;
const NAME: &str = BUILTIN.name();

/// The stored hash as the script's HMGET reads it: `(tokens, remaining, last, expiry)`.
type Hash = (f64, f64, f64, f64);

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

#[allow(clippy::cast_possible_truncation)] // the options are whole and within 1..=2^31-1
pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, window, burst] = argv.options(BUILTIN)?;
    let (cost, now) = argv.batch_cost_and_now(NAME, 3)?;
    let bucket = Bucket {
        limit,
        window,
        burst,
        refill: limit - burst,
        policy: Field::TokenBucketPolicy {
            limit: limit as u32,
            window: window as u32,
            burst: burst as u32,
        },
        limit_s: int(limit),
        window_s: int(window),
    };
    let current = stored(slot.as_ref());
    match cost {
        Charge::UpTo(n) => batch(bucket, n, now, current, slot),
        Charge::Refund(cost) => refund(bucket, cost, now, current, slot),
        Charge::Force(cost) => force(bucket, cost, now, current, slot),
        Charge::Take(cost) => take(bucket, cost, now, current, slot),
    }
}

/// The script's HMGET of `b`, `r`, `t` and `e`.
#[allow(clippy::cast_precision_loss)] // values stay below 2^53
fn stored(slot: Option<&Stored>) -> Option<Hash> {
    match slot {
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
    }
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
    /// The block's `live`: a stored bucket whose window has not ended.
    fn live(current: Option<Hash>, now: f64) -> Option<Hash> {
        current.filter(|&(.., expiry)| expiry > now)
    }

    fn new(bucket: &Bucket, now: f64, live: Option<Hash>) -> Self {
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

/// The script's `sign == '~'`: takes up to `n`, as many as the bucket has whole tokens and
/// the window has remaining; a deny (nothing granted) writes nothing.
fn batch(
    bucket: Bucket,
    n: f64,
    now: f64,
    current: Option<Hash>,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    let mut state = Refilled::new(&bucket, now, Refilled::live(current, now));
    let Bucket {
        window,
        refill,
        policy,
        ..
    } = bucket;
    let Refilled {
        tokens,
        remaining,
        ttl,
        taken,
        elapsed,
        ..
    } = state;
    let grant = n.min(tokens.floor()).min(remaining);
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

/// The script's `sign == '-'`: tokens back up to what a bucket untouched since its window
/// began holds now (never lowering tokens above it), remaining up to `limit`. A key that holds
/// nothing is not written.
fn refund(
    bucket: Bucket,
    cost: f64,
    now: f64,
    current: Option<Hash>,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    let Some(live) = Refilled::live(current, now) else {
        return untouched(bucket);
    };
    let Bucket {
        limit,
        window,
        burst,
        refill,
        ..
    } = bucket;
    let mut state = Refilled::new(&bucket, now, Some(live));
    let mut full = burst;
    if refill > 0.0 {
        full = burst + refill * (now - (state.expiry - window * 1000.0)) / window / 1000.0;
    }
    if state.tokens + cost <= full {
        state.tokens += cost;
    } else if state.tokens < full {
        state.tokens = full;
    }
    state.remaining = (state.remaining + cost).min(limit);
    let begun_now = state.expiry == now + window * 1000.0;
    if state.tokens >= burst && state.remaining >= limit && begun_now {
        // A window begun at `now` and given back in full is no window.
        *slot = None;
        return untouched(bucket);
    }
    settled(bucket, &state, true, slot)
}

/// The script's `sign == '+'`: tokens and remaining go negative, by at most one burst of
/// token debt and one limit of remaining.
fn force(
    bucket: Bucket,
    cost: f64,
    now: f64,
    current: Option<Hash>,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    let mut state = Refilled::new(&bucket, now, Refilled::live(current, now));
    state.tokens = (state.tokens - cost).max(-bucket.burst);
    state.remaining = (state.remaining - cost).max(-bucket.limit);
    let allow = state.tokens >= 0.0 && state.remaining >= 0.0;
    settled(bucket, &state, allow, slot)
}

/// A refund's answer when no bucket is left: a new window's, full.
fn untouched(bucket: Bucket) -> Result<Reply, Refusal> {
    replied(true, [bucket.policy, bucket.window_s, bucket.limit_s])
}

/// The end of the block for a refund or a forced charge: the `HSET`, and the state after as
/// headers, with retry-after whenever a cost-1 request would be denied.
fn settled(
    bucket: Bucket,
    state: &Refilled,
    allow: bool,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    state.store(slot);
    let (tokens, remaining, ttl) = (state.tokens, state.remaining, state.ttl);
    let mut headers = Fields::from([bucket.policy, int(ttl), int(remaining.max(0.0))]);
    if tokens < 1.0 || remaining < 1.0 {
        let mut retry = ttl;
        if bucket.refill > 0.0 && remaining >= 1.0 {
            retry = ((1.0 - tokens) * bucket.window / bucket.refill)
                .ceil()
                .min(ttl);
        }
        headers.push(int(retry));
    }
    Ok(Reply {
        allow,
        headers,
        granted: None,
        window: 0,
    })
}

/// The script's take (a cost of 0 peeks, as a cost-1 request): from the live bucket, refilled
/// since its last take, or from a new window ([`start`]). A deny writes nothing.
/// Inline to [`evaluate`]: nearly every check is one, and a call of its own costs it.
#[inline(always)]
fn take(
    bucket: Bucket,
    cost: f64,
    now: f64,
    current: Option<Hash>,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    let need = if cost > 0.0 { cost } else { 1.0 };
    let Some((taken, remaining, last, expiry)) = current else {
        return start(bucket, cost, need, now, slot);
    };
    let Bucket {
        window,
        refill,
        policy,
        ..
    } = bucket;
    let ttl = ((expiry - now + 500.0) / 1000.0).floor();
    let elapsed = (now - last).max(0.0);
    let mut tokens = taken;
    if refill > 0.0 {
        tokens += refill * elapsed / window / 1000.0;
    }
    if tokens >= need && remaining >= need {
        let (tokens, remaining) = (tokens - need, remaining - need);
        if cost > 0.0 {
            took(slot, tokens, remaining, now);
        }
        if tokens >= 1.0 {
            return replied(true, [policy, int(ttl), int(remaining)]);
        }
        let retry = if refill > 0.0 {
            (window / refill).ceil().min(ttl)
        } else {
            ttl
        };
        return replied(true, [policy, int(ttl), int(remaining), int(retry)]);
    }
    // Counting only whole tokens left by the last take keeps cost 1 at the reference's value.
    let mut retry = ttl;
    if refill > 0.0 && remaining >= need {
        retry = ((need - taken.floor()) * window / refill - elapsed / 1000.0)
            .ceil()
            .abs()
            .min(ttl);
    }
    replied(
        false,
        [policy, int(ttl), int(remaining.max(0.0)), int(retry)],
    )
}

/// The take's `HSET` on the live bucket.
#[allow(clippy::cast_possible_truncation)] // values stay below 2^53
fn took(slot: &mut Option<Stored>, tokens: f64, remaining: f64, now: f64) {
    if let Some(Stored {
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
}

/// The take where no bucket is live: a new window's full bucket, less `need`; a cost a full
/// bucket cannot cover takes nothing and writes nothing.
#[allow(clippy::cast_possible_truncation)] // values stay below 2^53
fn start(
    bucket: Bucket,
    cost: f64,
    need: f64,
    now: f64,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    let Bucket {
        limit,
        window,
        burst,
        refill,
        policy,
        limit_s,
        window_s,
    } = bucket;
    if need > burst {
        let mut retry = window;
        if refill > 0.0 && limit >= need {
            retry = ((need - burst) * window / refill).ceil().min(window);
        }
        return replied(false, [policy, window_s, limit_s, int(retry)]);
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
        return replied(true, [policy, window_s, int(remaining)]);
    }
    let retry = if refill > 0.0 {
        (window / refill).ceil()
    } else {
        window
    };
    replied(true, [policy, window_s, int(remaining), int(retry)])
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

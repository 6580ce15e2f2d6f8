//! `lua/leaky_bucket.lua`: a bucket of `limit` units leaking `limit` units per window, its level
//! kept in unit-milliseconds so that filling and leaking are exact integer steps.
//!
//! As the script: the bucket read and leaked to `now` once ([`Bucket::read`]), then a function
//! for each way a call goes, in its order: [`refund`] (`-n`), [`force`] (`+n`), then [`take`].

use plug_limit_options::{Builtin, Refusal};

use super::Field;
use super::argv::{Argv, int, replied};
use super::state::{Reply, State, Stored};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::LeakyBucket;
const NAME: &str = BUILTIN.name();

pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, window, _] = argv.options(BUILTIN)?;
    let (units, now) = argv.cost_and_now(NAME, 2)?;
    let bucket = Bucket::read(limit, window, now, slot.as_ref());
    match units {
        Charge::Refund(cost) => refund(&bucket, cost, slot),
        Charge::Force(cost) => force(&bucket, cost, slot),
        Charge::Take(cost) => take(&bucket, cost, slot),
    }
}

/// The bucket as the script reads it at `now`, and the options it is read with.
struct Bucket {
    limit: f64,
    span: f64,
    capacity: f64,
    per_s: f64,
    /// What is left of the stored level once it leaked until `now`.
    level: f64,
    /// The time every write stores: never behind the stored one (as the script's `since`).
    since: f64,
}

#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
impl Bucket {
    /// The script's GET, leaked to `now`: a time behind the stored one leaks nothing.
    fn read(limit: f64, window: f64, now: f64, slot: Option<&Stored>) -> Self {
        let span = window * 1000.0;
        let (mut level, mut since) = (0.0, now);
        if let Some(Stored {
            state: State::LeakyBucket { level: q, at_ms },
            ..
        }) = slot
        {
            let elapsed = (now - *at_ms as f64).max(0.0);
            since = since.max(*at_ms as f64);
            level = (*q as f64 - elapsed * limit).max(0.0);
        }
        Self {
            limit,
            span,
            capacity: limit * span,
            per_s: limit * 1000.0,
            level,
            since,
        }
    }

    /// The script's `SET "<level> <since>" PXAT`, when a bucket at `level` is empty.
    fn fill(&self, level: f64) -> Option<Stored> {
        Some(Stored {
            state: State::LeakyBucket {
                level: level as i64,
                at_ms: self.since as i64,
            },
            expires_at_ms: (self.since + (level / self.limit).ceil()) as i64,
        })
    }

    /// Seconds (ceil) until a bucket at `level` is empty.
    fn reset(&self, level: f64) -> Field {
        int((level / self.per_s).ceil())
    }

    /// Whole units a bucket at `level` still holds room for.
    fn room(&self, level: f64) -> f64 {
        ((self.capacity - level) / self.span).floor()
    }
}

/// The script's `sign == '-'`: the level goes down, and the expiry moves closer, never later;
/// an empty bucket is no key.
fn refund(bucket: &Bucket, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let mut level = bucket.level;
    if level > 0.0 {
        level -= cost * bucket.span;
        if level > 0.0 {
            *slot = bucket.fill(level);
        } else {
            level = 0.0;
            *slot = None;
        }
    }
    let remaining = int(bucket.room(level).max(0.0));
    replied(true, [int(bucket.limit), bucket.reset(level), remaining])
}

/// The script's `sign == '+'`: past capacity by at most one more capacity (and 2^53, to stay
/// exact).
fn force(bucket: &Bucket, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let top = (2.0 * bucket.capacity).min(9_007_199_254_740_992.0);
    let after = (bucket.level + cost * bucket.span).min(top);
    *slot = bucket.fill(after);
    let (limit_s, reset) = (int(bucket.limit), bucket.reset(after));
    if after <= bucket.capacity {
        return replied(true, [limit_s, reset, int(bucket.room(after))]);
    }
    let retry = ((after + bucket.span - bucket.capacity) / bucket.per_s).ceil();
    replied(false, [limit_s, reset, Field::Int(0), int(retry)])
}

/// The script's take (a cost of 0 peeks, as a cost-1 request): fills the bucket when it has
/// room; a deny writes nothing.
fn take(bucket: &Bucket, cost: f64, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let need = if cost > 0.0 { cost } else { 1.0 };
    let limit_s = int(bucket.limit);
    let after = bucket.level + need * bucket.span;
    if after <= bucket.capacity {
        if cost > 0.0 {
            *slot = bucket.fill(after);
        }
        return replied(
            true,
            [limit_s, bucket.reset(after), int(bucket.room(after))],
        );
    }
    let remaining = int(bucket.room(bucket.level).max(0.0));
    let retry = ((after - bucket.capacity) / bucket.per_s).ceil();
    replied(
        false,
        [limit_s, bucket.reset(bucket.level), remaining, int(retry)],
    )
}

#[cfg(test)]
mod tests {
    use super::super::state::{State, Stored};
    use super::super::tests::evaluate;
    use super::super::tests::run_scenarios;
    use crate::limit::Opt;

    #[test]
    fn shared_scenarios() {
        run_scenarios("leaky_bucket");
    }

    #[test]
    fn level_is_exact_in_unit_milliseconds() {
        // 3 units per second: a unit is 1000 unit-ms and 3 leak each ms.
        let opts = [Opt::Int(3), Opt::Int(1)];
        let mut slot = None;
        evaluate("leaky_bucket", &opts, 2, 5_000, &mut slot).unwrap();
        let bucket = |level, at_ms, expires_at_ms| {
            Some(Stored {
                state: State::LeakyBucket { level, at_ms },
                expires_at_ms,
            })
        };
        assert_eq!(slot, bucket(2_000, 5_000, 5_667));
        // 333 ms drain 999 unit-ms, no rounding: 1001 remain.
        evaluate("leaky_bucket", &opts, 1, 5_333, &mut slot).unwrap();
        assert_eq!(slot, bucket(2_001, 5_333, 6_000));
        let denied = evaluate("leaky_bucket", &opts, 2, 5_333, &mut slot).unwrap();
        assert_eq!(denied.headers, ["3", "1", "0", "1"]);
        assert_eq!(slot, bucket(2_001, 5_333, 6_000));
    }
}

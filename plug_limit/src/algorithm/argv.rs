//! The scripts' ARGV as they read it: positions, plain-digit checks and error texts, so the
//! mirror refuses exactly what the scripts refuse, with the same words.

pub(super) use plug_limit_options::Arg;
use std::convert::Infallible;

use plug_limit_options::{Builtin, Refusal};

use super::Field;
use super::state::Reply;
use crate::limit::Charge;
use crate::limit::{Opt, ReadAhead};

/// The largest opt or cost: every value stays exact in a double.
pub(super) const MAX: f64 = 2_147_483_647.0;
/// The largest `now`: microseconds (gcra) stay exact in a double.
const NOW_MAX: f64 = 9_007_199_254_740.0;

/// The largest count a forced charge leaves (fixed_window, sliding_window, multi_window,
/// calendar_quota): far past any limit, and still exact.
pub(super) const CAP: i64 = 2 * 2_147_483_647;

/// What a script without batches says of a cost it refuses.
const PLAIN_RULE: &str = "must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647";
/// What a script with batches says of a cost it refuses.
const BATCH_RULE: &str =
    "must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647";

/// The script's ARGV: the opts, then cost and now, and a concurrency lease's id.
pub(super) struct Argv<'a> {
    opts: &'a [Opt],
    /// The options read ahead, when the limit was made: [`options`](Self::options) reads them.
    read_ahead: Option<&'a ReadAhead>,
    cost: Charge,
    now_ms: i64,
    lease: Option<&'a str>,
}

impl<'a> Argv<'a> {
    pub(super) fn new(
        opts: &'a [Opt],
        read_ahead: Option<&'a ReadAhead>,
        cost: Charge,
        now_ms: i64,
        lease: Option<&'a str>,
    ) -> Self {
        Self {
            opts,
            read_ahead,
            cost,
            now_ms,
            lease,
        }
    }

    /// `ARGV[index + 1]`.
    pub(super) fn get(&self, index: usize) -> Arg<'a> {
        let after = index.checked_sub(self.opts.len());
        match (self.opts.get(index), after) {
            (Some(Opt::Int(n)), _) => Arg::Int(*n),
            (Some(Opt::Str(s)), _) => Arg::Str(s),
            (Some(Opt::Text(s)), _) => Arg::Str(s),
            (None, Some(0)) => match self.cost {
                Charge::Take(n) => Arg::Int(i64::from(n)),
                Charge::Refund(n) => Arg::Signed('-', n),
                Charge::Force(n) => Arg::Signed('+', n),
                Charge::UpTo(n) => Arg::Signed('~', n),
            },
            (None, Some(1)) => Arg::Int(self.now_ms),
            (None, Some(2)) => self.lease.map_or(Arg::Missing, Arg::Str),
            _ => Arg::Missing,
        }
    }

    /// `builtin`'s options (a fixed number of them), read and checked as its script does:
    /// their numbers in order (see [`Builtin::read`]), or as they were read ahead.
    #[inline(always)]
    pub(super) fn options(&self, builtin: Builtin) -> Result<[f64; 3], Refusal> {
        match self.read_ahead {
            Some(read) if read.builtin == builtin => Ok(read.values),
            _ => self.read_options(builtin),
        }
    }

    /// [`options`](Self::options) not read ahead.
    fn read_options(&self, builtin: Builtin) -> Result<[f64; 3], Refusal> {
        builtin.read(|position| self.get(position))
    }

    /// The options.
    pub(super) fn opts(&self) -> &'a [Opt] {
        self.opts
    }

    /// The caller's time, which stands in for Redis TIME.
    pub(super) fn now_ms(&self) -> i64 {
        self.now_ms
    }

    pub(super) fn len(&self) -> usize {
        self.opts.len() + 2 + usize::from(self.lease.is_some())
    }

    /// The optional cost and now at `ARGV[index + 1]` and `ARGV[index + 2]`, checked as the
    /// scripts check them.
    pub(super) fn cost_and_now(
        &self,
        limiter: &str,
        index: usize,
    ) -> Result<(Charge<f64, Infallible>, f64), Refusal> {
        let (cost, now) = self.read_cost(limiter, index, false)?;
        let cost = match cost {
            Charge::Take(n) => Charge::Take(n),
            Charge::Refund(n) => Charge::Refund(n),
            Charge::Force(n) => Charge::Force(n),
            // Never read without `batches`; refused as the script refuses it, should it be.
            Charge::UpTo(_) => return Err(fail(limiter, "cost", PLAIN_RULE, self.get(index))),
        };
        Ok((cost, now))
    }

    /// [`cost_and_now`](Self::cost_and_now) for a script that also takes a batch's `~n`
    /// (fixed_window, token_bucket).
    pub(super) fn batch_cost_and_now(
        &self,
        limiter: &str,
        index: usize,
    ) -> Result<(Charge<f64>, f64), Refusal> {
        self.read_cost(limiter, index, true)
    }

    /// Inline to the twin: a call of its own returns its answer through memory.
    #[inline(always)]
    fn read_cost(
        &self,
        limiter: &str,
        index: usize,
        batches: bool,
    ) -> Result<(Charge<f64>, f64), Refusal> {
        // What nearly every check passes: a cost to take, then the caller's clock, both read as
        // the general path below reads them, without its matching.
        #[allow(clippy::cast_precision_loss)] // exact: at most NOW_MAX
        if index == self.opts.len()
            && let Charge::Take(n) = self.cost
            && f64::from(n) <= MAX
            && self.now_ms >= 0
            && self.now_ms as f64 <= NOW_MAX
        {
            return Ok((Charge::Take(f64::from(n)), self.now_ms as f64));
        }
        self.read_cost_in_full(limiter, index, batches)
    }

    /// [`read_cost`](Self::read_cost) of any other cost or time.
    fn read_cost_in_full(
        &self,
        limiter: &str,
        index: usize,
        batches: bool,
    ) -> Result<(Charge<f64>, f64), Refusal> {
        let arg = self.get(index);
        let cost = match arg {
            Arg::Missing => Charge::Take(1.0),
            _ => match (arg.digits(), arg.signed()) {
                (Some(n), _) if n <= MAX => Charge::Take(n),
                (None, Some(('-', n))) if (1.0..=MAX).contains(&n) => Charge::Refund(n),
                (None, Some(('+', n))) if (1.0..=MAX).contains(&n) => Charge::Force(n),
                (None, Some(('~', n))) if batches && (1.0..=MAX).contains(&n) => Charge::UpTo(n),
                _ => {
                    let rule = if batches { BATCH_RULE } else { PLAIN_RULE };
                    return Err(fail(limiter, "cost", rule, arg));
                }
            },
        };
        // Where the script would read Redis TIME, the caller's clock stands in.
        #[allow(clippy::cast_precision_loss)] // exact: checked against NOW_MAX first when given
        let now = match self.get(index + 1) {
            Arg::Missing => self.now_ms as f64,
            arg => match arg.digits() {
                Some(n) if n <= NOW_MAX => n,
                Some(_) => return Err(fail(limiter, "now", "must be <= 9007199254740", arg)),
                None => return Err(fail(limiter, "now", "must be a non-negative integer", arg)),
            },
        };
        Ok((cost, now))
    }
}

/// A script's error text, without the "ERR " prefix.
pub(super) fn fail(limiter: &str, field: &str, rule: &str, arg: Arg<'_>) -> Refusal {
    Refusal::new(limiter, field, rule, arg)
}

/// `string.format('%d', x)`.
#[allow(clippy::cast_possible_truncation)] // truncation toward zero is what '%d' does
pub(super) fn int(x: f64) -> Field {
    Field::Int(x as i64)
}

/// `n` as a header value: a number, formatted only if the header is sent.
pub(super) fn decimal(n: i64) -> Field {
    Field::Int(n)
}

/// A reply, allowing or not, of `headers`: what the script returns.
pub(super) fn replied<const N: usize>(allow: bool, headers: [Field; N]) -> Result<Reply, Refusal> {
    Ok(Reply {
        allow,
        headers: headers.into(),
        granted: None,
        window: 0,
    })
}

/// [`replied`] for a batch's `~n`, which reports the units it granted and the milliseconds
/// left of their window after the headers.
pub(super) fn granted<const N: usize>(
    granted: f64,
    window_ms: i64,
    headers: [Field; N],
) -> Result<Reply, Refusal> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // 0..=MAX, whole
    let units = granted as u32;
    Ok(Reply {
        allow: units > 0,
        headers: headers.into(),
        granted: Some((units, window_ms)),
        window: 0,
    })
}

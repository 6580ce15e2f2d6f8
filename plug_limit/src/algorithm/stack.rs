//! Stacked limits: several built-ins decided as one, consumed from all only if all allow.
//!
//! On Redis, one script ([`script`]) holds every built-in's script as a function and
//! `lua/stack.lua` drives them; here, [`evaluate`] mirrors that driver over the twins.

use std::fmt::Write;
use std::sync::{Arc, LazyLock};

use plug_limit_options::Refusal;
use smallvec::SmallVec;

use super::{Builtin, CATALOGUE, Reply, Runtime, Stored};
use crate::limit::Charge;
use crate::limit::{Opt, ReadAhead};
use crate::lua::Lua;

/// One limit of a stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part<'a> {
    pub(crate) algorithm: Builtin,
    pub(crate) opts: &'a [Opt],
    pub(crate) read_ahead: Option<&'a ReadAhead>,
    pub(crate) cost: u32,
    /// Its denial does not deny the stack (shadow mode).
    pub(crate) soft: bool,
    /// Which of the stack's states is its key's: parts of one key share one.
    pub(crate) slot: usize,
}

/// The stack's script: `algorithm(name)`, which makes the function of the built-in `name` (its
/// own script, as a function of its `KEYS` and `ARGV`), then the driver. Only the functions a
/// call uses are made: a closure per built-in on every call would cost more than the driver.
/// Made once per process; its SHA1 with it.
pub(crate) fn script() -> &'static Arc<Lua> {
    static SCRIPT: LazyLock<Arc<Lua>> = LazyLock::new(|| {
        let driver = include_str!("../../lua/stack.lua");
        let mut source = String::with_capacity(
            driver.len()
                + CATALOGUE
                    .iter()
                    .map(|spec| spec.script.source().len() + 80)
                    .sum::<usize>(),
        );
        source.push_str("local function algorithm(name)\n");
        for spec in &CATALOGUE {
            // Writing to a `String` cannot fail.
            let _ = write!(
                source,
                "if name == '{}' then return function(KEYS, ARGV)\n{}\nend end\n",
                spec.builtin.name(),
                spec.script.source()
            );
        }
        source.push_str("end\n");
        source.push_str(driver);
        Arc::new(Lua::new(source))
    });
    &SCRIPT
}

/// The replies of a stack's limits, in order: a stack's few held inline.
pub(crate) type Replies = SmallVec<[Reply; 4]>;

/// Where a stack's states lie while it runs: each distinct key's, by its [`Part::slot`]. A
/// store lends each where it holds it, as a single check's, so that no state is copied out
/// and back.
pub(crate) trait Slots {
    /// Runs `f` on the state of the key of `slot` (`None` for a key without one).
    fn with<R>(&mut self, slot: usize, f: impl FnOnce(&mut Option<Stored>) -> R) -> R;
}

impl Slots for [Option<Stored>] {
    fn with<R>(&mut self, slot: usize, f: impl FnOnce(&mut Option<Stored>) -> R) -> R {
        f(&mut self[slot])
    }
}

/// Where a stack's replies go, in order, as each part is run: the caller makes each its
/// answer where it will read it.
pub(crate) trait Heard {
    /// The next part's reply.
    fn push(&mut self, reply: Reply);

    /// Whether the `part`-th reply pushed allowed.
    fn allowed(&self, part: usize) -> bool;
}

impl Heard for Replies {
    fn push(&mut self, reply: Reply) {
        Self::push(self, reply);
    }

    fn allowed(&self, part: usize) -> bool {
        self[part].allow
    }
}

/// Evaluates `parts` as `lua/stack.lua` does, at `now_ms`: `slots` holds the state of each
/// distinct key, each part's at its [`Part::slot`].
///
/// Pushes the reply of every part run onto `replies` (none pushed yet), in order: fewer
/// than `parts` when the last one denied. Every part before a (not soft) denial that took
/// units gets them back, the latest first, as the script's parts do: by its own refund, or for
/// a token bucket by the state it held before (see [`restored`]); a part's error gives back the
/// same way and is returned.
pub(crate) fn evaluate(
    parts: &[Part<'_>],
    now_ms: i64,
    slots: &mut (impl Slots + ?Sized),
    replies: &mut impl Heard,
) -> Result<(), Refusal> {
    // The state each part given back by restoring it held before its take, by position; the
    // others give back by their refund.
    let mut saved: SmallVec<[(usize, Option<Stored>); 2]> = SmallVec::new();
    for (i, part) in parts.iter().enumerate() {
        let kept = restored(part.algorithm) && i + 1 < parts.len();
        let evaluated = slots.with(part.slot, |slot| {
            // A state past its expiry is a key Redis no longer has.
            if slot
                .as_ref()
                .is_some_and(|stored| stored.expires_at_ms <= now_ms)
            {
                *slot = None;
            }
            if kept {
                saved.push((i, slot.clone()));
            }
            part.algorithm.evaluate_leased(
                part.opts,
                part.read_ahead,
                Charge::Take(part.cost),
                None,
                now_ms,
                slot,
            )
        });
        match evaluated {
            Err(error) => {
                give_back(&parts[..i], replies, saved, now_ms, slots);
                return Err(error);
            }
            Ok(reply) => {
                let denied = !reply.allow && !part.soft;
                if denied {
                    give_back(&parts[..i], replies, saved, now_ms, slots);
                    replies.push(reply);
                    return Ok(());
                }
                replies.push(reply);
            }
        }
    }
    Ok(())
}

/// Whether a stack gives `algorithm`'s units back by restoring the state it held before its
/// take rather than by its refund: a token bucket's refill and retry-after hang on the time of
/// its last take, which a refund cannot move back.
fn restored(algorithm: Builtin) -> bool {
    algorithm == Builtin::TokenBucket
}

/// Gives back what each of `parts` took (an allow of a cost above 0), the latest first, as the
/// script does, so a key two parts share ends as it began: the state `saved` before its take
/// (a part of [`restored`]), or its refund.
fn give_back(
    parts: &[Part<'_>],
    replies: &impl Heard,
    mut saved: SmallVec<[(usize, Option<Stored>); 2]>,
    now_ms: i64,
    slots: &mut (impl Slots + ?Sized),
) {
    for (i, part) in parts.iter().enumerate().rev() {
        let before = saved
            .iter_mut()
            .find(|(at, _)| *at == i)
            .map(|(_, before)| before.take());
        if !(replies.allowed(i) && part.cost > 0) {
            continue;
        }
        slots.with(part.slot, |slot| match before {
            Some(before) => *slot = before,
            None => {
                // The options just took: their refund cannot be refused.
                let _ = part.algorithm.evaluate_leased(
                    part.opts,
                    part.read_ahead,
                    Charge::Refund(part.cost),
                    None,
                    now_ms,
                    slot,
                );
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUCKET: &[Opt] = &[Opt::Int(10), Opt::Int(10), Opt::Int(2)];
    const WINDOW: &[Opt] = &[Opt::Int(10), Opt::Int(60)];

    fn part(algorithm: Builtin, opts: &'static [Opt], slot: usize) -> Part<'static> {
        Part {
            algorithm,
            opts,
            read_ahead: None,
            cost: 1,
            soft: false,
            slot,
        }
    }

    #[test]
    fn a_denial_restores_each_token_bucket_before_it_as_it_was() {
        let now = 1_000_000;
        let mut slots = [None, None, None];
        // The first bucket took a unit 300 ms ago: its refund now would move its last refill
        // to now, where restoring keeps it 300 ms back. The second is drained: it denies,
        // and is not the last part.
        Builtin::TokenBucket
            .evaluate(BUCKET, Charge::Take(1), now - 300, &mut slots[0])
            .unwrap();
        Builtin::TokenBucket
            .evaluate(BUCKET, Charge::Take(2), now, &mut slots[1])
            .unwrap();
        let before = slots.clone();
        let parts = [
            part(Builtin::TokenBucket, BUCKET, 0),
            part(Builtin::TokenBucket, BUCKET, 1),
            part(Builtin::FixedWindow, WINDOW, 2),
        ];
        let mut replies = Replies::new();
        evaluate(&parts, now, &mut slots[..], &mut replies).unwrap();
        let allowed: Vec<bool> = replies.iter().map(|reply| reply.allow).collect();
        assert_eq!(allowed, [true, false]);
        assert_eq!(slots[0], before[0]);
        // Not run after the denial.
        assert_eq!(slots[2], None);
    }
}

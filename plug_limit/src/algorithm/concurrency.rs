//! `lua/concurrency.lua`: the leases of the requests in flight, each until released or
//! expired.
//!
//! As the script: its arguments read in its order ([`cost`], [`now`], [`lease_id`]), the set
//! read once past its ZREMRANGEBYSCORE ([`Held::read`]), then the release or [`take`], each
//! ending in the script's [`answer`].

use super::Field;
use plug_limit_options::{Builtin, Refusal};

use super::argv::{Arg, Argv, MAX, fail, int, replied};
use super::state::{Reply, State, Stored};

const BUILTIN: Builtin = Builtin::Concurrency;
const NAME: &str = BUILTIN.name();
/// The longest lease id the script takes.
const ID_MAX: usize = 64;

pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let [limit, lease, _] = argv.options(BUILTIN)?;
    let (cost, release) = cost(argv.get(2))?;
    // Where the script would read Redis TIME, the caller's clock stands in.
    let now = now(argv.get(3))?.unwrap_or(argv.now_ms());
    let id = lease_id(argv.get(4), cost)?;
    let mut held = Held::read(slot, now);
    let reply = if release {
        held.release(id, cost);
        answer(true, limit, &held.leases, 0.0, now)
    } else {
        take(&mut held, limit, lease, id, cost, now)
    };
    held.write(slot);
    reply
}

/// The `now` slot: a time, or none (`''` or missing) for Redis TIME.
#[allow(clippy::cast_possible_truncation)] // whole, checked below 2^53
fn now(arg: Arg<'_>) -> Result<Option<i64>, Refusal> {
    match arg {
        Arg::Missing | Arg::Str("") => Ok(None),
        arg => match arg.digits() {
            Some(n) if n <= 9_007_199_254_740.0 => Ok(Some(n as i64)),
            Some(_) => Err(fail(NAME, "now", "must be <= 9007199254740", arg)),
            None => Err(fail(
                NAME,
                "now",
                "must be a non-negative integer or ''",
                arg,
            )),
        },
    }
}

/// The lease id slot: required unless the cost peeks.
fn lease_id(arg: Arg<'_>, cost: u32) -> Result<&str, Refusal> {
    match arg {
        Arg::Str(id) if valid_id(id) => Ok(id),
        arg if cost > 0 => Err(Refusal::worded(format!(
            "{NAME}: lease must be 1 to 64 letters, digits, '_' or '-', got '{}'",
            arg.text()
        ))),
        _ => Ok(""),
    }
}

/// The key's sorted set, as the script finds it past its ZREMRANGEBYSCORE.
struct Held {
    /// `(score, member)` in the set's order.
    leases: Vec<(i64, Box<str>)>,
    expires_at_ms: i64,
}

impl Held {
    /// The key's leases, taken out of `slot` until [`write`](Self::write) puts them back,
    /// without those expired at `now`.
    fn read(slot: &mut Option<Stored>, now: i64) -> Self {
        let (mut leases, expires_at_ms) = match slot.take() {
            Some(Stored {
                state: State::Concurrency { leases },
                expires_at_ms,
            }) => (leases, expires_at_ms),
            other => {
                *slot = other;
                (Vec::new(), 0)
            }
        };
        leases.retain(|(expiry, _)| *expiry > now);
        Self {
            leases,
            expires_at_ms,
        }
    }

    /// Puts the leases back: Redis deletes a sorted set that loses its last member.
    fn write(self, slot: &mut Option<Stored>) {
        if !self.leases.is_empty() {
            *slot = Some(Stored {
                state: State::Concurrency {
                    leases: self.leases,
                },
                expires_at_ms: self.expires_at_ms,
            });
        }
    }

    /// The script's release: ZREM of the lease's members; one not held changes nothing.
    fn release(&mut self, id: &str, units: u32) {
        let gone = members(id, units);
        self.leases.retain(|(_, member)| !gone.contains(member));
    }

    /// The script's ZMSCORE: how many of the lease's units the set holds already.
    #[allow(clippy::cast_precision_loss)] // at most limit
    fn mine(&self, id: &str, units: u32) -> f64 {
        let owned = self
            .leases
            .iter()
            .filter(|(_, member)| owns(member, id, units));
        owned.count() as f64
    }

    /// The script's ZADD of the lease's members at `expiry` (one held already takes the new
    /// score), then PEXPIREAT, with GT unless the set was new.
    fn hold(&mut self, id: &str, units: u32, expiry: i64) {
        let new = self.leases.is_empty();
        for member in members(id, units) {
            self.leases.retain(|(_, held)| *held != member);
            let at = self
                .leases
                .partition_point(|(score, held)| (*score, &**held) < (expiry, &*member));
            self.leases.insert(at, (expiry, member));
        }
        self.expires_at_ms = if new {
            expiry
        } else {
            self.expires_at_ms.max(expiry)
        };
    }
}

/// The script's take (a cost of 0 peeks, as a cost-1 request): admitted when the units other
/// leases hold leave room for `cost`.
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)] // values stay below 2^53
fn take(
    held: &mut Held,
    limit: f64,
    lease: f64,
    id: &str,
    cost: u32,
    now: i64,
) -> Result<Reply, Refusal> {
    let count = held.leases.len() as f64;
    let need = if cost > 0 { f64::from(cost) } else { 1.0 };
    // Only at the limit do the units this lease holds already count (a renewal, or a
    // duplicated call). A cost above the limit is never admitted, and is not counted.
    let mine = if cost > 0 && need <= limit && count + need > limit {
        held.mine(id, cost)
    } else {
        0.0
    };
    if count - mine + need > limit {
        return answer(false, limit, &held.leases, 0.0, now);
    }
    if cost == 0 {
        return answer(true, limit, &held.leases, need, now);
    }
    held.hold(id, cost, now + (lease * 1000.0) as i64);
    answer(true, limit, &held.leases, 0.0, now)
}

/// The cost slot: units to take (0 peeks), or `-n` to release a lease's `n` units.
fn cost(arg: Arg<'_>) -> Result<(u32, bool), Refusal> {
    let (digits, release) = match arg {
        Arg::Missing => return Ok((1, false)),
        Arg::Signed('-', n) => (Arg::Int(i64::from(n)), true),
        Arg::Str(s) if s.starts_with('-') => (Arg::Str(&s[1..]), true),
        // '+n' (a forced charge) is no integer here: refused below, as the script refuses it.
        Arg::Signed(..) => (Arg::Missing, false),
        arg => (arg, false),
    };
    match digits.digits() {
        Some(n) if n <= MAX && !(release && n < 1.0) => {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // 0..=MAX
            Ok((n as u32, release))
        }
        _ => Err(Refusal::worded(format!(
            "{NAME}: cost must be an integer 0..2147483647, or '-n' (n >= 1) to release a lease, got '{}'",
            arg.text()
        ))),
    }
}

/// `#id <= 64 and find(id, '^[%w_%-]+$')`.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ID_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The members of lease `id` holding `units`: `<id>` for one, `<id>:1` .. `<id>:n` for more.
fn members(id: &str, units: u32) -> Vec<Box<str>> {
    if units == 1 {
        return vec![id.into()];
    }
    (1..=units).map(|i| format!("{id}:{i}").into()).collect()
}

/// Whether `member` is one of [`members`]`(id, units)`, without making them.
fn owns(member: &str, id: &str, units: u32) -> bool {
    if units == 1 {
        return member == id;
    }
    let Some(unit) = member
        .strip_prefix(id)
        .and_then(|rest| rest.strip_prefix(':'))
    else {
        return false;
    };
    // Exactly the digits `members` writes: no sign, no leading zero.
    !unit.starts_with('0')
        && unit.bytes().all(|b| b.is_ascii_digit())
        && unit
            .parse::<u32>()
            .is_ok_and(|unit| (1..=units).contains(&unit))
}

/// The script's `answer`: the reset from the oldest lease, remaining after `taken` more.
#[allow(clippy::cast_precision_loss)] // values stay below 2^53
fn answer(
    allow: bool,
    limit: f64,
    leases: &[(i64, Box<str>)],
    taken: f64,
    now: i64,
) -> Result<Reply, Refusal> {
    let held = leases.len() as f64;
    let reset = leases
        .first()
        .map_or(0.0, |(oldest, _)| ((*oldest - now) as f64 / 1000.0).ceil());
    let remaining = (limit - held - taken).max(0.0);
    if allow {
        replied(true, [int(limit), int(reset), int(remaining)])
    } else {
        replied(
            false,
            [int(limit), int(reset), int(remaining), Field::Int(1)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::Builtin;
    use super::super::Runtime;
    use super::super::state::{Reply, State, Stored};
    use crate::limit::Charge;
    use crate::limit::Opt;

    const OPTS: [Opt; 2] = [Opt::Int(2), Opt::Int(30)];

    fn call(
        cost: u32,
        lease: Option<(&str, bool)>,
        now_ms: i64,
        slot: &mut Option<Stored>,
    ) -> Result<Reply, String> {
        if slot.as_ref().is_some_and(|s| s.expires_at_ms <= now_ms) {
            *slot = None;
        }
        let (charge, lease) = match lease {
            Some((id, true)) => (Charge::Refund(cost), Some(id)),
            Some((id, false)) => (Charge::Take(cost), Some(id)),
            None => (Charge::Take(cost), None),
        };
        Builtin::Concurrency
            .evaluate_leased(&OPTS, None, charge, lease, now_ms, slot)
            .map_err(String::from)
    }

    fn said(reply: Result<Reply, String>) -> String {
        match reply {
            Ok(v) => format!(
                "{} {}",
                if v.allow { "allow" } else { "deny" },
                v.headers.texts().join(" ")
            ),
            Err(e) => format!("error {e}"),
        }
    }

    #[test]
    fn holds_releases_and_expires() {
        let mut slot = None;
        assert_eq!(
            said(call(1, Some(("a", false)), 1_000, &mut slot)),
            "allow 2 30 1"
        );
        assert_eq!(
            said(call(1, Some(("b", false)), 6_000, &mut slot)),
            "allow 2 25 0"
        );
        assert_eq!(
            said(call(1, Some(("c", false)), 7_000, &mut slot)),
            "deny 2 24 0 1"
        );
        assert_eq!(said(call(0, None, 7_000, &mut slot)), "deny 2 24 0 1");
        assert_eq!(
            said(call(1, Some(("a", true)), 8_000, &mut slot)),
            "allow 2 28 1"
        );
        assert_eq!(
            said(call(1, Some(("c", false)), 9_000, &mut slot)),
            "allow 2 27 0"
        );
        // b's lease ends at 36 000: its unit comes back without a release.
        assert_eq!(
            said(call(1, Some(("d", false)), 36_000, &mut slot)),
            "allow 2 3 0"
        );
        assert_eq!(
            slot,
            Some(Stored {
                state: State::Concurrency {
                    leases: vec![(39_000, "c".into()), (66_000, "d".into())],
                },
                expires_at_ms: 66_000,
            })
        );
        // Releasing the last lease deletes the key; releasing again changes nothing.
        call(1, Some(("c", true)), 37_000, &mut slot).unwrap();
        call(1, Some(("d", true)), 37_000, &mut slot).unwrap();
        assert_eq!(slot, None);
        assert_eq!(
            said(call(1, Some(("d", true)), 37_000, &mut slot)),
            "allow 2 0 2"
        );
        assert_eq!(slot, None);
    }

    #[test]
    fn a_lease_of_several_units_is_released_whole_and_counts_once_when_repeated() {
        let mut slot = None;
        assert_eq!(
            said(call(2, Some(("x", false)), 0, &mut slot)),
            "allow 2 30 0"
        );
        // The same lease again renews it, at the limit: still two units.
        assert_eq!(
            said(call(2, Some(("x", false)), 0, &mut slot)),
            "allow 2 30 0"
        );
        assert_eq!(
            said(call(3, Some(("y", false)), 0, &mut slot)),
            "deny 2 30 0 1"
        );
        assert_eq!(
            said(call(2, Some(("x", true)), 1_000, &mut slot)),
            "allow 2 0 2"
        );
        assert_eq!(slot, None);
        assert_eq!(
            said(call(1, Some(("z", false)), 1_000, &mut slot)),
            "allow 2 30 1"
        );
        assert_eq!(
            said(call(1, Some(("z", false)), 2_000, &mut slot)),
            "allow 2 30 1"
        );
    }

    /// The same steps as `tests/standalone/scripts.rs`'s
    /// `concurrency_renews_a_held_lease_at_its_limit`, on the script.
    #[test]
    fn a_held_lease_renews_at_its_limit_and_a_new_one_waits() {
        let mut slot = None;
        let mut step = |id: &str, now_ms: i64| said(call(1, Some((id, false)), now_ms, &mut slot));
        assert_eq!(step("a", 0), "allow 2 30 1");
        assert_eq!(step("b", 0), "allow 2 30 0");
        // a renews at the limit: it holds its unit already. b's lease is now the oldest.
        assert_eq!(step("a", 20_000), "allow 2 10 0");
        assert_eq!(step("c", 20_000), "deny 2 10 0 1");
        // b ran out at 30 s; a, renewed at 20 s, holds until 50 s.
        assert_eq!(step("c", 31_000), "allow 2 19 0");
        assert_eq!(step("d", 45_000), "deny 2 5 0 1");
        assert_eq!(step("d", 50_000), "allow 2 11 0");

        // A lease of two units renews whole; a cost past the limit is denied at once, its
        // units never listed.
        let mut slot = None;
        let mut step = |id: &str, cost: u32, now_ms: i64| {
            said(call(cost, Some((id, false)), now_ms, &mut slot))
        };
        assert_eq!(step("x", 2, 0), "allow 2 30 0");
        assert_eq!(step("x", 2, 10_000), "allow 2 30 0");
        assert_eq!(step("y", 1, 10_000), "deny 2 30 0 1");
        assert_eq!(step("y", 1, 35_000), "deny 2 5 0 1");
        assert_eq!(step("z", u32::MAX >> 1, 35_000), "deny 2 5 0 1");
        assert_eq!(step("y", 1, 40_000), "allow 2 30 1");
    }

    #[test]
    fn refuses_what_the_script_refuses() {
        let mut slot = None;
        assert_eq!(
            said(call(1, None, 0, &mut slot)),
            "error concurrency: lease must be 1 to 64 letters, digits, '_' or '-', got ''"
        );
        assert_eq!(
            said(call(1, Some(("a b", false)), 0, &mut slot)),
            "error concurrency: lease must be 1 to 64 letters, digits, '_' or '-', got 'a b'"
        );
        let long = "x".repeat(65);
        assert_eq!(
            said(call(1, Some((&long, false)), 0, &mut slot)),
            format!(
                "error concurrency: lease must be 1 to 64 letters, digits, '_' or '-', got '{long}'"
            )
        );
        assert_eq!(slot, None);
    }
}

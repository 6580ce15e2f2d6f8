//! `lua/multi_window.lua`: several fixed-window limits on one key, all admitting or none
//! counting.
//!
//! As the script: the rates read ([`rates`]), every window read at `now` ([`read`]), then a
//! function for each way a call goes, in its order ([`refund`], [`force`], [`take`]), each
//! answering with the script's [`reply`].

use plug_limit_options::{Builtin, Refusal};

use super::argv::{Arg, Argv, CAP, int, replied};
use super::state::{Reply, State, Stored, Window};
use crate::limit::Charge;

const BUILTIN: Builtin = Builtin::MultiWindow;
const NAME: &str = BUILTIN.name();

/// One `"<limit>/<window>"` opt and its window's state at this call.
struct Limit {
    limit: f64,
    window: f64,
    count: f64,
    ends: f64,
}

pub(super) fn evaluate(argv: &Argv<'_>, slot: &mut Option<Stored>) -> Result<Reply, Refusal> {
    let (mut limits, count) = rates(argv)?;
    // The cost and `now` follow the rates.
    let (units, now) = argv.cost_and_now(NAME, count)?;
    match units {
        Charge::Refund(cost) => refund(&mut limits, cost, now, slot),
        Charge::Force(cost) => force(&mut limits, cost, now, slot),
        Charge::Take(cost) => take(&mut limits, cost, now, slot),
    }
}

/// The script's opts: the ARGV up to the last entry holding a "/", each a rate; and how many.
fn rates(argv: &Argv<'_>) -> Result<(Vec<Limit>, usize), Refusal> {
    let slashed = |i: &usize| matches!(argv.get(*i), Arg::Str(s) if s.contains('/'));
    let count = (0..argv.len())
        .rev()
        .find(slashed)
        .map_or(0, |last| last + 1);
    let limits = BUILTIN
        .rates(count, |position| argv.get(position))?
        .into_iter()
        .map(|(limit, window)| Limit {
            limit,
            window,
            count: 0.0,
            ends: 0.0,
        })
        .collect();
    Ok((limits, count))
}

/// The script's HMGET of every window: a window that ended (or never began) starts at `now`.
/// Whether any limit denies `need`, and whether a window started.
#[allow(clippy::cast_precision_loss)] // values stay below 2^53
fn read(limits: &mut [Limit], slot: Option<&Stored>, now: f64, need: f64) -> (bool, bool) {
    let stored: &[Window] = match slot {
        Some(Stored {
            state: State::MultiWindow { windows },
            ..
        }) => windows,
        _ => &[],
    };
    let (mut denied, mut started) = (false, false);
    for l in limits {
        let field = stored.iter().find(|w| w.window_s as f64 == l.window);
        match field {
            Some(w) if w.ends_ms as f64 > now => {
                (l.count, l.ends) = (w.count as f64, w.ends_ms as f64);
            }
            _ => (l.count, l.ends, started) = (0.0, now + l.window * 1000.0, true),
        }
        denied |= l.count + need > l.limit;
    }
    (denied, started)
}

/// The script's refund: every window counting something gives back up to `cost`; always
/// allowed, the headers of the state after.
fn refund(
    limits: &mut [Limit],
    cost: f64,
    now: f64,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    // Whether a limit would deny is no matter to a refund.
    read(limits, slot.as_ref(), now, cost);
    give_back(slot, limits, cost, now);
    reply(limits, now, false, 1.0, true)
}

/// The script's forced charge: every window counts `cost` more, up to [`CAP`], written as an
/// admitted request is; denied past any limit.
#[allow(clippy::cast_precision_loss)] // CAP is exact
fn force(
    limits: &mut [Limit],
    cost: f64,
    now: f64,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    let (_, started) = read(limits, slot.as_ref(), now, cost);
    for l in &mut *limits {
        l.count = (l.count + cost).min(CAP as f64);
    }
    consume(slot, limits, 0.0, started);
    let denied = limits.iter().any(|l| l.count > l.limit);
    reply(limits, now, denied, 1.0, true)
}

/// The script's take (a cost of 0 peeks, as a cost-1 request): counted in every window when
/// every limit has room for it, in none when any denies.
fn take(
    limits: &mut [Limit],
    cost: f64,
    now: f64,
    slot: &mut Option<Stored>,
) -> Result<Reply, Refusal> {
    let need = if cost > 0.0 { cost } else { 1.0 };
    let (denied, started) = read(limits, slot.as_ref(), now, need);
    if !denied && cost > 0.0 {
        consume(slot, limits, cost, started);
    }
    reply(limits, now, denied, need, false)
}

/// The script's reply: the most restrictive limit (the smallest remaining, then the longest
/// reset, then the first given), and on deny the longest wait among those that deny. After a
/// refund or a forced charge (`settled`) the headers describe the state after.
fn reply(
    limits: &[Limit],
    now: f64,
    denied: bool,
    need: f64,
    settled: bool,
) -> Result<Reply, Refusal> {
    let (mut pick, mut pick_left, mut pick_reset, mut retry) = (0, 0.0, 0.0, 0.0);
    for (i, l) in limits.iter().enumerate() {
        let mut left = l.limit - l.count;
        if !(denied || settled) {
            left -= need;
        }
        if left < 0.0 {
            left = 0.0;
        }
        let reset = ((l.ends - now) / 1000.0).ceil();
        if i == 0 || left < pick_left || (left == pick_left && reset > pick_reset) {
            (pick, pick_left, pick_reset) = (i, left, reset);
        }
        if denied && l.count + need > l.limit && reset > retry {
            retry = reset;
        }
    }
    let headers = [int(limits[pick].limit), int(pick_reset), int(pick_left)];
    let mut reply = if denied {
        let [limit, reset, remaining] = headers;
        replied(false, [limit, reset, remaining, int(retry)])
    } else {
        replied(true, headers)
    }?;
    // The script replies which window it picked after the headers (from 0).
    reply.window = u32::try_from(pick).unwrap_or(u32::MAX);
    Ok(reply)
}

/// HSET of every window's count (and end), PEXPIREAT at the last end when a window started.
#[allow(clippy::cast_possible_truncation)] // values stay below 2^53
fn consume(slot: &mut Option<Stored>, limits: &[Limit], cost: f64, started: bool) {
    let stored = slot.get_or_insert_with(|| Stored {
        state: State::MultiWindow {
            windows: Vec::with_capacity(limits.len()),
        },
        expires_at_ms: 0,
    });
    if !matches!(stored.state, State::MultiWindow { .. }) {
        stored.state = State::MultiWindow {
            windows: Vec::with_capacity(limits.len()),
        };
    }
    let State::MultiWindow { windows } = &mut stored.state else {
        return;
    };
    let mut last = 0.0_f64;
    for l in limits {
        let (window_s, count, ends_ms) = (l.window as i64, (l.count + cost) as i64, l.ends as i64);
        match windows.iter_mut().find(|w| w.window_s == window_s) {
            Some(w) => (w.count, w.ends_ms) = (count, ends_ms),
            None => windows.push(Window {
                window_s,
                count,
                ends_ms,
            }),
        }
        last = last.max(l.ends);
    }
    if started {
        stored.expires_at_ms = last as i64;
    }
}

/// HSET of the count of every window that counts something, less `cost` (never below 0);
/// HDEL of a window begun at `now` and given back in full, and the key goes with its last
/// window.
#[allow(clippy::cast_possible_truncation)] // values stay below 2^53
fn give_back(slot: &mut Option<Stored>, limits: &mut [Limit], cost: f64, now: f64) {
    let Some(Stored {
        state: State::MultiWindow { windows },
        ..
    }) = slot
    else {
        return;
    };
    for l in limits.iter_mut().filter(|l| l.count > 0.0) {
        l.count = if l.count > cost { l.count - cost } else { 0.0 };
        let begun_now = l.count == 0.0 && l.ends == now + l.window * 1000.0;
        let at = windows.iter().position(|w| w.window_s as f64 == l.window);
        match at {
            Some(at) if begun_now => {
                windows.remove(at);
            }
            Some(at) => windows[at].count = l.count as i64,
            None => {}
        }
    }
    if windows.is_empty() {
        *slot = None;
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::{State, Stored, Window};
    use super::super::tests::evaluate;
    use super::super::tests::run_scenarios;
    use crate::limit::Opt;

    #[test]
    fn shared_scenarios() {
        run_scenarios("multi_window");
    }

    #[test]
    fn a_denied_request_counts_in_no_window() {
        let opts = [Opt::Str("2/10"), Opt::Str("3/60")];
        let mut slot = None;
        evaluate("multi_window", &opts, 2, 0, &mut slot).unwrap();
        let state = |short, long| {
            Some(Stored {
                state: State::MultiWindow {
                    windows: vec![
                        Window {
                            window_s: 10,
                            count: short,
                            ends_ms: 10_000,
                        },
                        Window {
                            window_s: 60,
                            count: long,
                            ends_ms: 60_000,
                        },
                    ],
                },
                expires_at_ms: 60_000,
            })
        };
        assert_eq!(slot, state(2, 2));
        // Denied by the 10 s limit: the 60 s one, which had room, counts nothing either.
        assert!(
            !evaluate("multi_window", &opts, 1, 5_000, &mut slot)
                .unwrap()
                .allow
        );
        assert_eq!(slot, state(2, 2));
    }
}

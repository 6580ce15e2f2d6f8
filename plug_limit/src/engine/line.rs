//! The waiters of one key at this instance, in one line: first come, first served, and only
//! the one at its head checks the store, on the limit's pace, where each waiter retried on its
//! own and the calls grew with the waiters rather than with the limit.
//!
//! A line is found by its key: a keyed hash of what its waiters check (each limit's limiter,
//! options, scope and cost, and every part of the client's key), so two waiters share a line
//! when they wait on the same budget (a collision of the 64-bit keyed hash, which a client
//! cannot aim for, would put two budgets' waiters in one line, pacing on each other's
//! denials). A line lives while someone waits in it.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::deny_cache::count_down;

use crate::outcome::Outcome;

/// Every line of this instance, by key.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    lines: Mutex<HashMap<u64, Arc<Line>>>,
}

/// The waiters of one key, oldest first, and the last denial their checks met.
#[derive(Debug, Default)]
pub(crate) struct Line {
    state: Mutex<LineState>,
}

#[derive(Debug, Default)]
struct LineState {
    /// Each waiter's ticket, and what wakes it when its turn comes (only the next head is
    /// woken when the head leaves, never the whole line).
    waiting: VecDeque<(u64, Arc<Notify>)>,
    next: u64,
    /// The last denial a check of the line met, and when.
    denial: Option<(Outcome, Instant)>,
    /// The line's last check admitted its head with room left (units remaining, and no
    /// `retry-after`): the next head checks at once.
    granted: bool,
}

/// Why a request could not join its line.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The line holds as many as it may: answered with its last denial, if a check has met
    /// one yet.
    Full(Option<Outcome>),
}

/// A waiter's place in its line; leaving it (answered, or dropped) frees it and wakes the
/// next.
#[derive(Debug)]
pub(crate) struct Place<'a> {
    lines: &'a Lines,
    key: u64,
    line: Arc<Line>,
    ticket: u64,
    woken: Arc<Notify>,
}

impl Lines {
    fn map(&self) -> MutexGuard<'_, HashMap<u64, Arc<Line>>> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place at the end of `key`'s line, whose waiters last met `denial` (when the joiner
    /// checked; else the line's own); refused, with the line's last denial, when `most` wait
    /// in it already.
    pub(crate) fn join(
        &self,
        key: u64,
        denial: Option<Outcome>,
        most: usize,
    ) -> Result<Place<'_>, Refused> {
        let mut map = self.map();
        let line = Arc::clone(map.entry(key).or_default());
        // The line's lock inside the map's, as `leave` takes them: a line emptied and dropped
        // from the map meanwhile is never joined.
        let mut state = line.state();
        if state.waiting.len() >= most {
            return Err(Refused::Full(denial.or_else(|| state.denial())));
        }
        let ticket = state.next;
        state.next += 1;
        let woken = Arc::new(Notify::new());
        state.waiting.push_back((ticket, Arc::clone(&woken)));
        if let Some(denial) = denial {
            state.denial = Some((denial, Instant::now()));
            state.granted = false;
        }
        drop(state);
        drop(map);
        Ok(Place {
            lines: self,
            key,
            line,
            ticket,
            woken,
        })
    }
}

impl Line {
    fn state(&self) -> MutexGuard<'_, LineState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl LineState {
    /// The last denial, as it reads now: its waits counted down by the whole seconds since a
    /// check met it.
    fn denial(&self) -> Option<Outcome> {
        let (denial, at) = self.denial.as_ref()?;
        let elapsed = i64::try_from(at.elapsed().as_millis()).unwrap_or(i64::MAX);
        Some(count_down(denial, elapsed))
    }
}

impl Place<'_> {
    /// Waits until this place is the line's head.
    pub(crate) async fn turn(&self) {
        // The head leaving stores a wake-up for the next if it is not waiting yet: none is
        // lost between the look and the wait.
        while !self.is_head() {
            self.woken.notified().await;
        }
    }

    fn is_head(&self) -> bool {
        self.line
            .state()
            .waiting
            .front()
            .is_some_and(|(ticket, _)| *ticket == self.ticket)
    }

    /// The last denial a check of this line met, as it reads now.
    pub(crate) fn denial(&self) -> Option<Outcome> {
        self.line.state().denial()
    }

    /// Remembers the denial the head's check met, for the line.
    pub(crate) fn denied(&self, denial: &Outcome) {
        let mut state = self.line.state();
        state.denial = Some((denial.clone(), Instant::now()));
        state.granted = false;
    }

    /// Tells the line the head's check admitted it with `admitted`: the next head checks at
    /// once when it says the limit has room left, else waits the pace.
    pub(crate) fn admitted(&self, admitted: &Outcome) {
        let room = admitted
            .report()
            .is_some_and(|report| report.remaining() > 0 && report.retry_after().is_none());
        self.line.state().granted = room;
    }

    /// Whether the line's last check admitted its head.
    pub(crate) fn granted(&self) -> bool {
        self.line.state().granted
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut map = self.lines.map();
        let mut state = self.line.state();
        let was_head = state
            .waiting
            .front()
            .is_some_and(|(ticket, _)| *ticket == self.ticket);
        state.waiting.retain(|(ticket, _)| *ticket != self.ticket);
        if was_head && let Some((_, next)) = state.waiting.front() {
            next.notify_one();
        }
        if state.waiting.is_empty()
            && map
                .get(&self.key)
                .is_some_and(|line| Arc::ptr_eq(line, &self.line))
        {
            map.remove(&self.key);
        }
    }
}

/// The key of a line: what `write` writes of its waiters' budget, hashed under a seed drawn
/// once per process.
pub(crate) fn key(write: impl FnOnce(&mut dyn Hasher)) -> u64 {
    static SEED: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);
    let mut hasher = SEED.build_hasher();
    write(&mut hasher);
    hasher.finish()
}

/// Writes `text` into a line's key, its length first, so that two texts never run together.
pub(crate) fn write_text(hasher: &mut dyn Hasher, text: &str) {
    text.len().hash(&mut HasherRef(hasher));
    hasher.write(text.as_bytes());
}

/// A `&mut dyn Hasher` as a `Hasher`, for `Hash::hash`.
struct HasherRef<'a>(&'a mut dyn Hasher);

impl Hasher for HasherRef<'_> {
    fn finish(&self) -> u64 {
        self.0.finish()
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Decision;

    fn denial() -> Outcome {
        Outcome::new(Decision::Deny, Vec::new())
    }

    #[tokio::test]
    async fn waiters_take_their_turns_in_order_and_a_dropped_one_frees_its_place() {
        let lines = Lines::default();
        let first = lines.join(7, Some(denial()), 3).unwrap();
        let second = lines.join(7, None, 3).unwrap();
        let third = lines.join(7, None, 3).unwrap();
        assert!(matches!(lines.join(7, None, 3), Err(Refused::Full(_))));
        assert!(first.is_head() && !second.is_head());
        // The second gives up: the third is next after the first.
        drop(second);
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(1), third.turn())
            .await
            .unwrap();
        assert!(lines.map().contains_key(&7));
        drop(third);
        assert!(!lines.map().contains_key(&7), "an empty line is gone");
    }
}

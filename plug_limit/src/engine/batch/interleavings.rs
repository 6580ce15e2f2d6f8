//! Local batches under every interleaving of the threads that meet at a key's slot: requests
//! spending a unit or joining the key's queue, a reservation landing, a watch giving units
//! back, a reset (see the guide, "What is proved about threads").
//!
//! The call to Redis and the tasks a landing starts need a runtime, which the model checker
//! does not run: their critical sections do run, as the tasks run them, under the slot's lock
//! ([`Landing::landed`], [`look`]), with the grant a call would bring.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use deadpool_redis::redis::Value;
use loom::thread::{self, JoinHandle};
use tokio::sync::oneshot;

use super::denial::Refill;
use super::give_back::look;
use super::reserver::{Landed, Landing, Leftover};
use super::slot::Served;
use super::{Batches, Joined, Slot};
use crate::algorithm::{Builtin, Field, Report, Runtime};
use crate::backend::Program;
use crate::config::LocalBatches;
use crate::outcome::{Decision, Names, Outcome};

/// The limit the requests are of (a hash of its options, as batches tell limits apart).
const OPTS: u64 = 7;
/// What a reservation asked for, and what Redis had left to grant.
const ASKED: u32 = 3;
const GRANTED: u32 = 2;
const EVERY: Duration = Duration::from_millis(100);

/// One key's batches, and the key.
struct Key {
    batches: Batches,
    key: [String; 1],
    /// Reservations the requests started (none runs: the model lands one grant by hand).
    started: AtomicU32,
}

impl Key {
    fn new() -> Self {
        Self {
            batches: Batches::new(
                LocalBatches::new(10).every(EVERY),
                Program::builtin(Builtin::FixedWindow),
                NonZeroUsize::new(8).unwrap(),
                Duration::from_secs(1),
                "p",
            ),
            key: ["p:{0000}:fixed_window:10,60:1:/:client".to_owned()],
            started: AtomicU32::new(0),
        }
    }

    /// A request of the key, as `Decider` makes one: a unit of the batch, or the held
    /// denial, else a place in the queue of the key's slot.
    fn request(&self) -> Answered {
        let no_ahead = |_| panic!("no batch here runs low: nothing is reserved ahead");
        let slot = match self.batches.spend(&self.key, OPTS, no_ahead) {
            Ok(outcome) => return Answered::Now(outcome.is_allowed()),
            Err(slot) => slot,
        };
        let start = || {
            self.started.fetch_add(1, Ordering::Relaxed);
        };
        match self.batches.join(&slot, OPTS, Instant::now(), start) {
            Joined::Answered(outcome) => Answered::Now(outcome.is_allowed()),
            Joined::Exact => Answered::Exact,
            Joined::Failed(error) => panic!("no reservation failed: {error}"),
            Joined::Waiting(receiver) => Answered::Waiting(slot, receiver),
        }
    }

    fn slot(&self) -> Arc<Slot> {
        self.batches.slot(&self.key, Instant::now())
    }

    /// The reservation on its way to `slot` lands, `sent_at`, with [`GRANTED`] units of the
    /// [`ASKED`]: what its task does under the slot's lock.
    fn land(&self, slot: &Slot, sent_at: Instant) -> Landed {
        let refill = Refill::of(Some(Builtin::FixedWindow), &[]);
        let landing = Landing {
            inner: &self.batches.inner,
            opts_id: OPTS,
            refill: &refill,
        };
        let mut state = slot.state();
        landing.landed(&mut state, Ok(grant()), ASKED, sent_at)
    }
}

/// What a request came to.
enum Answered {
    /// At once: allowed (a unit) or denied.
    Now(bool),
    /// Not batched: one unit taken exactly, in a call of its own.
    Exact,
    /// Waiting on its slot's reservation.
    Waiting(Arc<Slot>, oneshot::Receiver<Served>),
}

/// A fixed window's `~3` answered with 2 units, the window having a minute left.
fn grant() -> Outcome {
    let values = [10, 60, 0].map(Field::Int);
    Outcome::reported(
        Decision::Allow,
        Names::Builtin(Builtin::FixedWindow.headers()),
        Report::from_values(&values, 0).unwrap(),
        vec![Value::Int(GRANTED.into()), Value::Int(60_000)],
    )
}

/// What the requests came to, once every thread is done: the units they were handed, and how
/// many were answered not batched. Panics on a request left waiting on a slot with no
/// reservation on its way, or answered twice.
fn settled(answers: Vec<Answered>) -> (u32, u32) {
    let (mut handed, mut exact) = (0, 0);
    for answer in answers {
        match answer {
            Answered::Now(allowed) => handed += u32::from(allowed),
            Answered::Exact => exact += 1,
            Answered::Waiting(slot, mut receiver) => match receiver.try_recv() {
                Ok(Served::Answer(outcome)) => handed += u32::from(outcome.is_allowed()),
                Ok(Served::Exact) => exact += 1,
                Ok(Served::Failed(error)) => panic!("no reservation failed: {error}"),
                Err(_) => assert!(
                    slot.state().reserving.is_some(),
                    "a request waits on a slot with no reservation on its way"
                ),
            },
        }
    }
    (handed, exact)
}

/// A key whose first request found nothing and waits on the reservation it started, and the
/// thread that lands that reservation.
fn first_request_and_its_landing() -> (Arc<Key>, Arc<Slot>, Answered, JoinHandle<Landed>) {
    let key = Arc::new(Key::new());
    let slot = key.slot();
    let sent_at = Instant::now();
    let first = key.request();
    assert!(matches!(first, Answered::Waiting(..)));
    let lander = {
        let (key, slot) = (Arc::clone(&key), Arc::clone(&slot));
        thread::spawn(move || key.land(&slot, sent_at))
    };
    (key, slot, first, lander)
}

/// The units a landing gave back at once.
fn refunded(landed: &Landed) -> u32 {
    match landed {
        Landed::Done(Leftover::Refund(units)) => *units,
        _ => 0,
    }
}

#[test]
fn units_granted_are_handed_out_once_given_back_or_held_and_no_request_waits_on_nothing() {
    loom::model(|| {
        let (key, slot, first, lander) = first_request_and_its_landing();
        let requests: Vec<_> = (0..2)
            .map(|_| {
                let key = Arc::clone(&key);
                thread::spawn(move || key.request())
            })
            .collect();
        // A watch looking at the first grant as if its batch had gone unspent long enough:
        // before the grant it finds nothing, after it the units still held.
        let watch = {
            let slot = Arc::clone(&slot);
            thread::spawn(move || {
                let later = Instant::now() + 2 * EVERY;
                look(&slot, 1, later, EVERY, Duration::from_secs(1))
            })
        };
        let landed = lander.join().unwrap();
        let mut answers = vec![first];
        answers.extend(requests.into_iter().map(|t| t.join().unwrap()));
        let watched = match watch.join().unwrap() {
            super::held::GiveBack::Units(units) => units,
            _ => 0,
        };
        // Redis granted fewer than asked: nothing to reserve again.
        assert_ne!(landed, Landed::Again);
        let refunded = refunded(&landed);
        let (handed, exact) = settled(answers);
        assert_eq!(exact, 0, "no reset: every request is batched");
        let held = slot.state().held.units();
        assert_eq!(
            handed + watched + refunded + held,
            GRANTED,
            "handed {handed}, given back {watched} + {refunded}, held {held}"
        );
    });
}

#[test]
fn a_reset_while_a_reservation_is_on_its_way_hands_out_nothing_of_the_old_window() {
    loom::model(|| {
        let (key, slot, first, lander) = first_request_and_its_landing();
        let request = {
            let key = Arc::clone(&key);
            thread::spawn(move || key.request())
        };
        let reset = {
            let key = Arc::clone(&key);
            thread::spawn(move || key.batches.forget(&key.key))
        };
        let landed = lander.join().unwrap();
        let answers = vec![first, request.join().unwrap()];
        reset.join().unwrap();
        let (handed, _) = settled(answers);
        // Whatever was handed out went before the reset; what the old slot held then, it
        // dropped, and a grant landing after it is not held.
        let refunded = refunded(&landed);
        assert!(
            handed + refunded <= GRANTED,
            "handed {handed}, given back {refunded}"
        );
        assert_eq!(slot.state().held.units(), 0, "the reset slot holds nothing");
        assert!(slot.state().held.is_forgotten());
    });
}

//! The memory backend: the built-in limiters evaluated in process, for one instance, tests and
//! local development.

use std::fmt;
use std::num::NonZeroUsize;
use std::ops::DerefMut;
use std::sync::Arc;

use super::answer::{Answer, Outcomes, Twin};
use super::call::{Call, StackPart, head_len, past_head};
use super::digest::ClientMemo;
use super::sharded::{self, Digest, FEW, KeyAt, LockedAll, Sharded};
use crate::algorithm::{Builtin, Reply, Runtime, Stored, stack};
use crate::clock::Clock;
use crate::error::Error;
use crate::outcome::{Names, Outcome};
use plug_limit_options::Refusal;
use smallvec::SmallVec;

const SHARDS: usize = 64;

// The `Option` around each key's state costs no memory: `State`'s tag has room for `None`.
const _: () = assert!(size_of::<Option<Stored>>() == size_of::<Stored>());

/// Keeps each key's limiter state in a [`Sharded`] map, evaluated by the same rules as the Lua
/// scripts; expired state is swept as traffic flows, without a background task, and a full
/// shard evicts the state that expires soonest (see
/// [`Builder::memory_capacity`](crate::Builder::memory_capacity)).
///
/// A key is told apart by the digest of its text past its `{prefix}:{TAG}:` head (see
/// `digest.rs`): one handle's keys share its prefix, and the tag is a function of the client
/// part that ends the key, so the head tells no two keys apart and hashing it would only cost.
/// A memory backend serves one handle.
pub(crate) struct MemoryBackend {
    /// `None` only while an evaluation runs: a key whose state it deletes is removed.
    states: Sharded<Option<Stored>>,
    clock: Arc<dyn Clock>,
    /// The length of its keys' `{prefix}:{TAG}:` head.
    head: usize,
}

impl MemoryBackend {
    /// A backend holding state for at most `capacity` keys, of a handle whose keys start with
    /// `prefix`.
    pub(crate) fn new(clock: Arc<dyn Clock>, capacity: NonZeroUsize, prefix: &str) -> Self {
        Self {
            states: Sharded::bounded(SHARDS, capacity),
            clock,
            head: head_len(prefix),
        }
    }

    /// Evaluates `call` as its built-in's script would, on the first key (the only one a
    /// built-in reads).
    pub(crate) fn eval(&self, call: Call<'_>) -> Result<Outcome, Error> {
        let algorithm = call.program.builtin_only()?;
        let key = call.keys.first_digest(self.head, self.states.digests());
        let reply = self.evaluate(algorithm, key, call);
        outcome(
            reply.map_err(|refusal| Error::Input(refusal.into()))?,
            &call.program.headers,
        )
    }

    fn evaluate(&self, algorithm: Builtin, key: Digest, call: Call<'_>) -> Result<Reply, Refusal> {
        let (opts, read_ahead, cost, lease) = (call.opts, call.read_ahead, call.cost, call.lease);
        let now_ms = self.clock.now_ms();
        let mut shard = self.states.lock_digest(key);
        shard.sweep_if_due(|slot| expires_at(slot.as_ref()) > now_ms);
        in_place(&mut shard, now_ms, |slot| {
            algorithm.evaluate_leased(opts, read_ahead, cost, lease, now_ms, slot)
        })
    }

    /// Evaluates stacked limits as `lua/stack.lua` does: atomically, with the shards of every
    /// key locked (in one order, so two stacks never wait on each other in a cycle). Pushes
    /// each part's answer onto `answers` (empty when called), in order, `None` for those not
    /// run (after a denial); on an error, what it pushed so far, which the caller does not
    /// read.
    pub(crate) fn eval_stack<'p>(
        &self,
        parts: impl Iterator<Item = StackPart<'p>> + Clone,
        answers: &mut Outcomes,
    ) -> Result<(), Error> {
        // Pushed one by one, as `sharded::few` fills a collection (why, there): this loop fills
        // two at once.
        let mut algorithms: SmallVec<[stack::Part<'_>; FEW]> = SmallVec::new();
        // Parts counting under one key share its state, as they share the Redis key: one
        // digest, which no two keys share.
        let mut keys: SmallVec<[KeyAt; FEW]> = SmallVec::new();
        let mut memo = ClientMemo::default();
        for part in parts.clone() {
            let digest = part
                .keys
                .first_digest_shared(self.head, self.states.digests(), &mut memo);
            let slot = keys.iter().position(|&(key, _)| key == digest);
            algorithms.push(stack::Part {
                algorithm: part.builtin()?,
                opts: part.opts,
                read_ahead: part.read_ahead,
                cost: part.cost,
                soft: part.soft,
                slot: slot.unwrap_or_else(|| {
                    keys.push((digest, 0));
                    keys.len() - 1
                }),
            });
        }
        let count = keys.len();
        let now_ms = self.clock.now_ms();
        let mut locked = self.states.lock_all(&mut keys);
        for i in 0..count {
            locked
                .key(i)
                .sweep_if_due(|slot| expires_at(slot.as_ref()) > now_ms);
        }
        let mut states = StackStates {
            locked,
            now_ms,
            new: SmallVec::new(),
        };
        let mut heard = StackAnswers {
            parts,
            answers,
            refused: None,
        };
        let evaluated = stack::evaluate(&algorithms, now_ms, &mut states, &mut heard);
        states.store_new();
        evaluated.map_err(|refusal| Error::Input(refusal.into()))?;
        if let Some((refused, _)) = heard.refused {
            return Err(refused);
        }
        // The parts after a denial were not run.
        while answers.len() < algorithms.len() {
            answers.push(None);
        }
        Ok(())
    }

    /// Deletes `key`'s state.
    pub(crate) fn reset(&self, key: &str) {
        self.states.lock_text(past_head(key, self.head)).remove();
    }

    /// Deletes `client`'s state (its client part as a key holds it) under every options and
    /// scope of `limiter` this backend counted; returns how many keys held state.
    pub(crate) fn reset_client(&self, limiter: &str, client: &str) -> usize {
        self.states
            .remove_client(limiter, client.as_bytes(), |_| {})
    }

    /// Forgets every key; returns how many held state.
    pub(crate) fn clear(&self) -> usize {
        self.states.clear()
    }

    /// How many keys hold state, expired ones not yet swept included.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }
}

/// Runs `f` on the state of the key `shard` is locked for, where the shard holds it, as a
/// script runs on its Redis key: a state past its expiry reads as none, a state `f` deletes
/// is removed, and a new key's state is stored ([`store`]).
#[inline(always)]
fn in_place<G, R>(
    shard: &mut sharded::Locked<'_, Option<Stored>, G>,
    now_ms: i64,
    f: impl FnOnce(&mut Option<Stored>) -> R,
) -> R
where
    G: DerefMut<Target = sharded::Shard<Option<Stored>>>,
{
    // An existing key is evaluated in place: one lookup, no allocation.
    if let Some(slot) = shard.get_mut() {
        if expires_at(slot.as_ref()) <= now_ms {
            *slot = None;
        }
        let result = f(slot);
        if slot.is_none() {
            shard.remove();
        }
        return result;
    }
    let mut slot = None;
    let result = f(&mut slot);
    store(shard, now_ms, slot, |_| false);
    result
}

/// Stores a new key's state, if it has one, room made first but not at the cost of a key
/// `spare` picks (see [`make_room_sparing`](sharded::Locked::make_room_sparing)). Only a new
/// key (or one a stack's part deleted and another gave a state again) can fill a shard: a
/// known one is evaluated in place, where its shard holds it.
#[inline(always)]
fn store<G>(
    shard: &mut sharded::Locked<'_, Option<Stored>, G>,
    now_ms: i64,
    slot: Option<Stored>,
    spare: impl Fn(&Digest) -> bool,
) where
    G: DerefMut<Target = sharded::Shard<Option<Stored>>>,
{
    if slot.is_some() {
        shard.make_room_sparing(now_ms, |slot| expires_at(slot.as_ref()), spare);
        shard.insert(slot);
    }
}

/// A stack's states, every shard locked: each part runs on its key's state where the shard
/// holds it, as a single check does. A new key's state is held aside until every part has run
/// and given back ([`store_new`](Self::store_new)): making room for it then evicts no key a
/// later part reads, and a denied stack that leaves it empty evicts nothing.
struct StackStates<'a, 'k> {
    locked: LockedAll<'a, 'k, Option<Stored>>,
    now_ms: i64,
    /// The states of the keys the shards did not hold, or no longer hold (a part deleted
    /// their state), by their slot.
    new: SmallVec<[(usize, Option<Stored>); 2]>,
}

impl StackStates<'_, '_> {
    /// Stores the new keys' states, sparing the stack's other keys when room is made. Inline
    /// for a stack of known keys, which most often has none.
    #[inline]
    fn store_new(&mut self) {
        if !self.new.is_empty() {
            self.store_new_keys();
        }
    }

    /// The state held aside for the new key of `slot`: none until a part gives it one.
    fn new_state(&mut self, slot: usize) -> &mut Option<Stored> {
        let at = self.new.iter().position(|(new, _)| *new == slot);
        let at = at.unwrap_or_else(|| {
            self.new.push((slot, None));
            self.new.len() - 1
        });
        &mut self.new[at].1
    }

    fn store_new_keys(&mut self) {
        let keys = self.locked.keys();
        let spare = |digest: &Digest| keys.iter().any(|(key, _)| key == digest);
        for (slot, state) in &mut self.new {
            store(
                &mut self.locked.key(*slot),
                self.now_ms,
                state.take(),
                spare,
            );
        }
    }
}

impl stack::Slots for StackStates<'_, '_> {
    #[inline]
    fn with<R>(&mut self, slot: usize, f: impl FnOnce(&mut Option<Stored>) -> R) -> R {
        // A held state is run where it lies (`stack::evaluate` reads one past its expiry as
        // none), and removed if the part deletes it.
        let mut shard = self.locked.key(slot);
        if let Some(state) = shard.get_mut() {
            let result = f(state);
            if state.is_none() {
                shard.remove();
            }
            return result;
        }
        f(self.new_state(slot))
    }
}

/// A stack's replies, each made its part's answer as it is reached, checked as a reply is.
struct StackAnswers<'o, I> {
    /// The parts not yet answered, in order.
    parts: I,
    answers: &'o mut Outcomes,
    /// The first reply out of contract, and the parts refused that allowed: each gets back
    /// what it took if a later part denies, as any other.
    refused: Option<(Error, SmallVec<[usize; 1]>)>,
}

impl<'p, I: Iterator<Item = StackPart<'p>>> stack::Heard for StackAnswers<'_, I> {
    #[inline]
    fn push(&mut self, reply: Reply) {
        let Some(part) = self.parts.next() else {
            return;
        };
        let allow = reply.allow;
        match Twin::checked(reply, &part.program.headers) {
            Ok(twin) => self.answers.push(Some(Answer::Twin(twin))),
            Err(error) => {
                let (_, allowed) = self.refused.get_or_insert((error, SmallVec::new()));
                if allow {
                    allowed.push(self.answers.len());
                }
                self.answers.push(None);
            }
        }
    }

    fn allowed(&self, part: usize) -> bool {
        match self.answers.get(part) {
            Some(Some(answer)) => answer.is_allowed(),
            _ => self
                .refused
                .as_ref()
                .is_some_and(|(_, allowed)| allowed.contains(&part)),
        }
    }
}

/// When a key's state ends by itself, as its Redis key's TTL would end it: what eviction orders
/// by. A slot is only `None` while it is evaluated; such a slot is as good as gone.
fn expires_at(slot: Option<&Stored>) -> i64 {
    slot.map_or(i64::MIN, |stored| stored.expires_at_ms)
}

/// A twin's reply as the outcome its script's reply would parse to: its report, its values
/// under the declared names, checked as a reply's are and made into headers only when read.
fn outcome(reply: Reply, declared: &Names) -> Result<Outcome, Error> {
    Ok(Twin::checked(reply, declared)?.into_outcome(declared))
}

impl fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("keys", &self.len())
            .field("now_ms", &self.clock.now_ms())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Program;
    use crate::clock::ManualClock;
    use crate::limit::{Charge, Opt};

    const MINUTE: &[Opt] = &[Opt::Int(5), Opt::Int(60)];
    const HOUR: &[Opt] = &[Opt::Int(5), Opt::Int(3600)];

    /// A backend of one shard holding at most `capacity` keys, so that every key shares it.
    fn one_shard(capacity: usize) -> MemoryBackend {
        MemoryBackend {
            states: Sharded::bounded(1, NonZeroUsize::new(capacity).unwrap()),
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            head: 0,
        }
    }

    /// One fixed-window request of `key`: what it has left.
    fn check(backend: &MemoryBackend, key: &str, opts: &[Opt]) -> String {
        let program = Program::builtin(Builtin::FixedWindow);
        let keys = [key.to_owned()];
        let outcome = backend
            .eval(Call {
                program: &program,
                keys: &keys,
                opts,
                read_ahead: None,
                cost: Charge::Take(1),
                lease: None,
            })
            .unwrap();
        let remaining = outcome.header("x-ratelimit-remaining").unwrap();
        remaining.to_str().unwrap().to_owned()
    }

    /// A stack of one fixed-window request of each of `limits`: each part's allow (`None`: not
    /// run).
    fn stack(backend: &MemoryBackend, limits: &[(&str, &[Opt])]) -> Vec<Option<bool>> {
        let program = Program::builtin(Builtin::FixedWindow);
        let keys: Vec<[String; 1]> = limits.iter().map(|(key, _)| [(*key).to_owned()]).collect();
        let parts = limits.iter().zip(&keys).map(|((_, opts), keys)| StackPart {
            program: &program,
            keys,
            opts,
            read_ahead: None,
            cost: 1,
            soft: false,
        });
        let mut answers = Outcomes::new();
        backend.eval_stack(parts, &mut answers).unwrap();
        answers
            .iter()
            .map(|answer| answer.as_ref().map(Answer::is_allowed))
            .collect()
    }

    /// Spends all five of `key`'s requests in the window of `opts`.
    fn exhaust(backend: &MemoryBackend, key: &str, opts: &[Opt]) {
        for _ in 0..5 {
            check(backend, key, opts);
        }
        assert_eq!(check(backend, key, opts), "0");
    }

    #[test]
    fn a_stack_never_evicts_a_key_it_just_counted_to_store_another() {
        let backend = one_shard(4);
        for filler in ["f1", "f2", "f3"] {
            assert_eq!(check(&backend, filler, HOUR), "4");
        }
        assert_eq!(check(&backend, "a", MINUTE), "4");
        // The shard is full, and `a` expires soonest: storing `b` evicts one of the fillers,
        // not `a`, which the stack has just counted a second time.
        assert_eq!(
            stack(&backend, &[("a", MINUTE), ("b", HOUR)]),
            [Some(true), Some(true)]
        );
        assert_eq!(backend.len(), 4);
        assert_eq!(check(&backend, "a", MINUTE), "2");
        assert_eq!(check(&backend, "b", HOUR), "3");
    }

    #[test]
    fn a_shard_a_stack_fills_alone_keeps_its_bound() {
        let backend = one_shard(1);
        assert_eq!(check(&backend, "a", MINUTE), "4");
        assert_eq!(
            stack(&backend, &[("a", MINUTE), ("b", HOUR)]),
            [Some(true), Some(true)]
        );
        // Only `a` could make room for `b`: it goes, as any other key would.
        assert_eq!(backend.len(), 1);
        assert_eq!(check(&backend, "b", HOUR), "3");
    }

    #[test]
    fn a_new_key_never_evicts_a_key_a_later_part_reads() {
        // One key a shard (as `memory_capacity(10)` makes ten shards of one): the new
        // per-client key shares the exhausted global key's shard. Made room for before the
        // global part ran, it would evict that key, and the global limit would allow.
        let backend = one_shard(1);
        exhaust(&backend, "global", MINUTE);
        let replies = stack(&backend, &[("client", HOUR), ("global", MINUTE)]);
        assert_eq!(replies, [Some(true), Some(false)]);
        assert_eq!(check(&backend, "global", MINUTE), "0");
    }

    #[test]
    fn a_denied_stack_leaves_an_earlier_key_as_it_was() {
        let backend = one_shard(2);
        assert_eq!(check(&backend, "a", MINUTE), "4");
        exhaust(&backend, "denier", HOUR);
        let replies = stack(&backend, &[("a", MINUTE), ("new", HOUR), ("denier", HOUR)]);
        assert_eq!(replies, [Some(true), Some(true), Some(false)]);
        assert_eq!(check(&backend, "a", MINUTE), "3");
    }

    #[test]
    fn a_denied_stack_evicts_no_bystander() {
        let backend = one_shard(8);
        assert_eq!(check(&backend, "bystander", MINUTE), "4");
        for filler in ["f1", "f2", "f3", "f4", "f5", "f6"] {
            check(&backend, filler, HOUR);
        }
        exhaust(&backend, "denier", HOUR);
        assert_eq!(backend.len(), 8);
        let replies = stack(&backend, &[("new", HOUR), ("denier", HOUR)]);
        assert_eq!(replies, [Some(true), Some(false)]);
        // The new key was given back to nothing: nothing stored, nothing evicted.
        assert_eq!(backend.len(), 8);
        assert_eq!(check(&backend, "bystander", MINUTE), "3");
    }

    /// The memory backend's shards under every interleaving of the threads that meet at them
    /// (see the guide, "What is proved about threads").
    #[cfg(plug_limit_loom)]
    mod interleavings {
        use std::sync::Arc;

        use loom::thread;

        use super::*;

        const THREE: &[Opt] = &[Opt::Int(3), Opt::Int(60)];
        const ONE: &[Opt] = &[Opt::Int(1), Opt::Int(60)];

        /// One fixed-window request of `key` taking `cost` (0: a peek): its outcome.
        fn take(backend: &MemoryBackend, key: &str, opts: &[Opt], cost: u32) -> Outcome {
            let program = Program::builtin(Builtin::FixedWindow);
            let keys = [key.to_owned()];
            backend
                .eval(Call {
                    program: &program,
                    keys: &keys,
                    opts,
                    read_ahead: None,
                    cost: Charge::Take(cost),
                    lease: None,
                })
                .unwrap()
        }

        /// What `key`'s window has counted, read by a peek (which answers as a request of 1
        /// would) under a limit of 100 it never reaches: a window keeps its count and its
        /// end, whatever the limit it is read by.
        fn counted(backend: &MemoryBackend, key: &str) -> u64 {
            const HUNDRED: &[Opt] = &[Opt::Int(100), Opt::Int(60)];
            99 - take(backend, key, HUNDRED, 0).remaining().unwrap()
        }

        #[test]
        fn threads_charging_one_key_never_admit_past_its_limit_and_count_what_they_admit() {
            loom::model(|| {
                let backend = Arc::new(one_shard(8));
                // Costs of 1, 1 and 2 against a limit of 3: which take is refused depends on
                // the order the lock is taken in.
                let takers: Vec<_> = [1, 1, 2]
                    .into_iter()
                    .map(|cost| {
                        let backend = Arc::clone(&backend);
                        thread::spawn(move || {
                            let admitted = take(&backend, "k", THREE, cost).is_allowed();
                            if admitted { u64::from(cost) } else { 0 }
                        })
                    })
                    .collect();
                let admitted: u64 = takers.into_iter().map(|t| t.join().unwrap()).sum();
                assert!(admitted <= 3, "admitted {admitted} of 3");
                // Two of the three always fit: a refused take counts nothing.
                assert!(admitted >= 2, "admitted {admitted}");
                assert_eq!(counted(&backend, "k"), admitted);
            });
        }

        #[test]
        fn stacks_locking_two_shards_in_either_order_count_all_or_nothing() {
            loom::model(|| {
                let backend = Arc::new(MemoryBackend {
                    states: Sharded::bounded(2, NonZeroUsize::new(8).unwrap()),
                    clock: Arc::new(ManualClock::new(1_700_000_000_000)),
                    head: 0,
                });
                // A key of each shard, found anew each run (the hash keys are drawn per map).
                let of_shard = |shard: usize| {
                    (0..)
                        .map(|i| format!("key{i}"))
                        .find(|key| backend.states.shard_of(key) == shard)
                        .unwrap()
                };
                let (a, b) = (of_shard(0), of_shard(1));
                // Two stacks naming the shards in opposite orders, and a lone check of one key,
                // each limit of one request: exactly one of the three is admitted.
                let run = |parts: Vec<String>| {
                    let backend = Arc::clone(&backend);
                    thread::spawn(move || {
                        let limits: Vec<(&str, &[Opt])> =
                            parts.iter().map(|key| (key.as_str(), ONE)).collect();
                        if let [(key, _)] = limits[..] {
                            return take(&backend, key, ONE, 1).is_allowed();
                        }
                        stack(&backend, &limits)
                            .iter()
                            .all(|part| *part == Some(true))
                    })
                };
                let forward = run(vec![a.clone(), b.clone()]);
                let backward = run(vec![b.clone(), a.clone()]);
                let lone = run(vec![a.clone()]);
                let [forward, backward, lone] =
                    [forward, backward, lone].map(|t| t.join().unwrap());
                let stacked = u64::from(forward) + u64::from(backward);
                assert_eq!(stacked + u64::from(lone), 1, "{forward} {backward} {lone}");
                assert_eq!(counted(&backend, &a), 1);
                // A denied stack gave back what its earlier part took.
                assert_eq!(counted(&backend, &b), stacked);
            });
        }
    }
}

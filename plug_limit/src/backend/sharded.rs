//! A map keyed by keys' digests, split over independently locked shards, with expired entries
//! swept as traffic flows and, when the map is bounded, the soonest-expiring entries evicted to
//! make room: the store of the memory backend, of the local deny cache and of local batches.

use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::ops::DerefMut;
use std::sync::PoisonError;

use hashbrown::HashTable;
use smallvec::SmallVec;

use super::call::KeyText;
pub(crate) use super::digest::Digest;
use super::digest::KeyDigests;
use crate::sync::{Mutex, MutexGuard};

/// A shard sweeps after at least this many operations: below it a sweep costs more than the
/// memory it frees.
const MIN_SWEEP: usize = 64;

/// A full shard frees at least `1 / EVICT_SHARE` of its capacity at once, so that the pass over
/// the shard that finds what to evict is paid for by that many new keys, not by every one.
const EVICT_SHARE: usize = 8;

/// Independent locks, so concurrent requests for different keys rarely wait on each other.
///
/// A key is stored as its [`Digest`] (see [`KeyDigests`]), not as its text: an entry holds no
/// allocation of its own, and a lookup compares the digest where the table holds it, without
/// a second read from the heap: at ten thousand keys and more, that read missed the CPU's
/// caches on most checks.
///
/// One digest per operation: it picks the shard (from the high bits of its first half)
/// and probes the shard's table (which reads that half's low bits and its top seven). A client
/// cannot choose which shard its keys land in, which is what spreads a bound kept per shard
/// evenly over a spray.
pub(crate) struct Sharded<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    digests: KeyDigests,
}

/// One shard: its entries, when it sweeps next, and how many entries it may hold.
///
/// Expired entries are evicted without a background task: a shard sweeps once it has counted
/// as many operations as it kept entries at its last sweep. A sweep of `n` entries thus follows
/// at least `n / 2` operations (O(1) per operation, amortised), and an unbounded shard holds at
/// most its live entries plus the operations since its last sweep: about twice its live
/// entries. A bounded shard also never holds more than its `capacity` (see
/// [`Locked::make_room`]).
#[derive(Debug)]
pub(crate) struct Shard<V> {
    entries: HashTable<(Digest, V)>,
    ops_since_sweep: usize,
    next_sweep: usize,
    capacity: usize,
}

/// The shard that holds one key, locked (by its own guard, or within a [`LockedAll`]), with
/// the key's digest: its operations are on that key.
pub(crate) struct Locked<'a, V, G = MutexGuard<'a, Shard<V>>> {
    shard: G,
    digest: Digest,
    _value: PhantomData<fn() -> &'a V>,
}

/// The shards that hold several keys, each locked once, for one operation over all of them
/// (a stack of limits decided together).
pub(crate) struct LockedAll<'a, 'k, V> {
    /// By shard index, ascending: the order every caller locks in, so two never wait on each
    /// other in a cycle.
    guards: SmallVec<[(usize, MutexGuard<'a, Shard<V>>); FEW]>,
    keys: &'k [KeyAt],
}

/// A key locked with others ([`Sharded::lock_all`]): its digest, and the position of its
/// shard's guard among theirs, set by the lock. Each key is hashed once, by its caller.
pub(crate) type KeyAt = (Digest, usize);

/// How many keys a [`LockedAll`] holds without an allocation: a stack's limits, most often.
pub(crate) const FEW: usize = 4;

/// `items`, held inline, pushed one by one: `SmallVec`'s `collect` (its `extend`) reserves
/// from the size hint first, which cost more than a stack's few items (`benches/HISTORY.md`, "A
/// stack's collections, and one codegen unit").
#[inline]
pub(crate) fn few<T>(items: impl IntoIterator<Item = T>) -> SmallVec<[T; FEW]> {
    let mut few = SmallVec::new();
    for item in items {
        few.push(item);
    }
    few
}

impl<V> Sharded<V> {
    /// A map without a bound on its entries: only expiry removes them.
    #[cfg(test)]
    pub(crate) fn new(shards: usize) -> Self {
        Self::with_capacities(shards.max(1), |_| usize::MAX)
    }

    /// A map that holds at most `capacity` entries, split over `shards` shards (fewer when
    /// `capacity` is smaller, so that each holds at least one).
    ///
    /// The shares differ by at most one and add up to `capacity` exactly, so the bound holds
    /// for the whole map while each shard keeps its own under its own lock.
    pub(crate) fn bounded(shards: usize, capacity: NonZeroUsize) -> Self {
        let capacity = capacity.get();
        let shards = shards.clamp(1, capacity);
        let (share, rest) = (capacity / shards, capacity % shards);
        Self::with_capacities(shards, |index| share + usize::from(index < rest))
    }

    fn with_capacities(shards: usize, capacity: impl Fn(usize) -> usize) -> Self {
        Self {
            shards: (0..shards)
                .map(|index| {
                    Mutex::new(Shard {
                        entries: HashTable::new(),
                        ops_since_sweep: 0,
                        next_sweep: MIN_SWEEP,
                        capacity: capacity(index),
                    })
                })
                .collect(),
            digests: KeyDigests::new(),
        }
    }

    /// How this map digests keys.
    pub(crate) fn digests(&self) -> &KeyDigests {
        &self.digests
    }

    /// The locked shard that holds `key`, ready for operations on `key`.
    #[cfg(test)]
    pub(crate) fn lock(&self, key: &str) -> Locked<'_, V> {
        self.lock_text(key.as_bytes())
    }

    /// The shard that holds `key`: a model picks keys of known shards by it, the same in each
    /// of its runs, whatever hash keys each run draws.
    #[cfg(all(test, plug_limit_loom))]
    pub(crate) fn shard_of(&self, key: &str) -> usize {
        shard_index(self.digests.of_text(key.as_bytes()), self.shards.len())
    }

    /// The locked shard that holds `key` (a composed key past its head), ready for operations
    /// on `key`.
    pub(crate) fn lock_text(&self, key: &[u8]) -> Locked<'_, V> {
        self.lock_digest(self.digests.of_text(key))
    }

    /// The locked shard that holds the first of `keys` past its first `head` bytes.
    pub(crate) fn lock_first(&self, keys: &dyn KeyText, head: usize) -> Locked<'_, V> {
        self.lock_digest(keys.first_digest(head, &self.digests))
    }

    /// The locked shard that holds the key of `digest`, ready for operations on that key.
    pub(crate) fn lock_digest(&self, digest: Digest) -> Locked<'_, V> {
        Locked {
            shard: self.lock_shard(shard_index(digest, self.shards.len())),
            digest,
            _value: PhantomData,
        }
    }

    /// The shards that hold `keys` (each a digest of [`digests`](Self::digests)), each locked
    /// once, in ascending order, with each key's guard written beside it; the `i`-th key is
    /// then reached with [`LockedAll::key`]`(i)`.
    pub(crate) fn lock_all<'k>(&self, keys: &'k mut [KeyAt]) -> LockedAll<'_, 'k, V> {
        let shards = self.shards.len();
        // Each key's shard with the key's position, in the order the shards are locked.
        let mut order = few(keys
            .iter()
            .enumerate()
            .map(|(i, &(digest, _))| (shard_index(digest, shards), i)));
        order.sort_unstable();
        let mut guards: SmallVec<[(usize, MutexGuard<'_, Shard<V>>); FEW]> = SmallVec::new();
        for &(index, i) in &order {
            // Keys of one shard are next to each other: its guard is the last one taken.
            if guards.last().is_none_or(|(last, _)| *last != index) {
                guards.push((index, self.lock_shard(index)));
            }
            keys[i].1 = guards.len() - 1;
        }
        LockedAll { guards, keys }
    }

    fn lock_shard(&self, index: usize) -> MutexGuard<'_, Shard<V>> {
        // Only plain map operations and non-panicking evaluations run under the lock: nothing
        // can leave a shard half-written.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops `client`'s entries (its client part as a key holds it) under every options and
    /// scope of `limiter` this map has digested (see [`KeyDigests::client_keys`]), each value
    /// given to `dropped` first; returns how many there were.
    pub(crate) fn remove_client(
        &self,
        limiter: &str,
        client: &[u8],
        mut dropped: impl FnMut(&mut V),
    ) -> usize {
        let digests = self.digests.client_keys(limiter, client);
        digests
            .into_iter()
            .filter(|&digest| {
                let mut locked = self.lock_digest(digest);
                if let Some(value) = locked.get_mut() {
                    dropped(value);
                }
                locked.remove()
            })
            .count()
    }

    /// Drops every entry; returns how many there were.
    pub(crate) fn clear(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
                let held = shard.entries.len();
                shard.entries.clear();
                held
            })
            .sum()
    }

    /// Calls `f` on every value, one shard locked at a time.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&V)) {
        for shard in &*self.shards {
            let shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            shard.entries.iter().for_each(|(_, value)| f(value));
        }
    }

    /// How many entries the shards hold, expired ones not yet swept included.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entries
                    .len()
            })
            .sum()
    }
}

impl<V> std::fmt::Debug for Sharded<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the digests' hash keys: they are what keeps digests unpredictable.
        f.debug_struct("Sharded")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

/// The shard a key of `digest` lives in.
fn shard_index((hash, _): Digest, shards: usize) -> usize {
    // Truncation is the point: any bits of the hash pick a shard. With a power-of-two count of
    // shards (the default 64) these are bits the table does not probe by; with fewer shards
    // than 64 (a capacity under 64 keys) the modulo also mixes in the control bits, which
    // only costs those tiny tables a little spread.
    #[allow(clippy::cast_possible_truncation)]
    let index = (hash >> 32) as usize % shards;
    index
}

impl<'k, V> LockedAll<'_, 'k, V> {
    /// The keys locked for, in the order given.
    pub(crate) fn keys(&self) -> &'k [KeyAt] {
        self.keys
    }

    /// The locked shard of the `i`-th key locked for, ready for operations on that key.
    pub(crate) fn key(&mut self, i: usize) -> Locked<'_, V, &mut Shard<V>> {
        let (digest, at) = self.keys[i];
        Locked {
            shard: &mut *self.guards[at].1,
            digest,
            _value: PhantomData,
        }
    }
}

impl<V, G: DerefMut<Target = Shard<V>>> Locked<'_, V, G> {
    /// Counts one operation, and drops the entries `live` rejects when a sweep is due.
    pub(crate) fn sweep_if_due(&mut self, live: impl FnMut(&V) -> bool) {
        let mut live = live;
        let shard = &mut *self.shard;
        shard.ops_since_sweep += 1;
        if shard.ops_since_sweep >= shard.next_sweep {
            shard.entries.retain(|(_, value)| live(value));
            shard.ops_since_sweep = 0;
            shard.next_sweep = shard.entries.len().max(MIN_SWEEP);
        }
    }

    /// Makes room for one new entry if the shard is full: it drops every entry expired at
    /// `now` and, if that frees less than an eighth of its capacity, the entries that expire
    /// soonest, until an eighth is free. Entries expiring at the cut are dropped in no
    /// particular order, only as many as needed.
    ///
    /// An entry thus goes before its expiry only while fewer than an eighth of its shard's
    /// entries expire before it. One pass over the shard frees an eighth of it, so each new
    /// key pays for about eight entries' worth of passing, amortised.
    pub(crate) fn make_room<At: Ord + Copy>(&mut self, now: At, expires_at: impl Fn(&V) -> At) {
        self.make_room_sparing(now, expires_at, |_| false);
    }

    /// [`make_room`](Self::make_room), sparing the live entries whose digest `spare` picks: a
    /// stack's other keys, just counted, which making room for one more of its keys must not
    /// take back (an expired one goes all the same: its state is over). Only a shard that its
    /// spared entries fill alone evicts them, as any other: the shard's bound holds whatever a
    /// stack holds.
    pub(crate) fn make_room_sparing<At: Ord + Copy>(
        &mut self,
        now: At,
        expires_at: impl Fn(&V) -> At,
        spare: impl Fn(&Digest) -> bool,
    ) {
        let shard = &mut *self.shard;
        if shard.entries.len() < shard.capacity {
            return;
        }
        let mut expiries: Vec<At> = shard
            .entries
            .iter()
            .map(|(digest, value)| (digest, expires_at(value)))
            // A spared entry counts only once expired: it goes then, as any other.
            .filter(|&(digest, at)| at <= now || !spare(digest))
            .map(|(_, at)| at)
            .collect();
        let spared = !expiries.is_empty();
        if !spared {
            expiries = shard
                .entries
                .iter()
                .map(|(_, value)| expires_at(value))
                .collect();
        }
        // At least 1 and at most the entries counted, which a full shard holds at least one of:
        // `batch - 1` indexes them.
        let batch = shard.capacity.div_ceil(EVICT_SHARE).min(expiries.len());
        let (sooner, &mut cut, _) = expiries.select_nth_unstable(batch - 1);
        // Everything expiring before the cut goes; entries at the cut go until `batch` have.
        let mut at_cut = batch - sooner.iter().filter(|&&at| at < cut).count();
        shard.entries.retain(|(digest, value)| {
            let at = expires_at(value);
            // An expired entry goes, spared or not: its state is over.
            if at <= now {
                return false;
            }
            if spared && spare(digest) {
                return true;
            }
            if at < cut {
                return false;
            }
            if at == cut && at_cut > 0 {
                at_cut -= 1;
                return false;
            }
            true
        });
        // That pass dropped every expired entry: it stands for a sweep.
        shard.ops_since_sweep = 0;
        shard.next_sweep = shard.entries.len().max(MIN_SWEEP);
    }

    /// The value stored under the key.
    pub(crate) fn get_mut(&mut self) -> Option<&mut V> {
        let digest = self.digest;
        self.shard
            .entries
            .find_mut(digest.0, |(stored, _)| *stored == digest)
            .map(|(_, value)| value)
    }

    /// Stores `value` under the key, replacing any value it had.
    pub(crate) fn insert(&mut self, value: V) {
        let digest = self.digest;
        let entry = self.shard.entries.entry(
            digest.0,
            |(stored, _)| *stored == digest,
            |(stored, _)| stored.0,
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(mut occupied) => occupied.get_mut().1 = value,
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                vacant.insert((digest, value));
            }
        }
    }

    /// Forgets the key.
    /// Removes the key's entry; whether there was one.
    pub(crate) fn remove(&mut self) -> bool {
        let digest = self.digest;
        match self
            .shard
            .entries
            .find_entry(digest.0, |(stored, _)| *stored == digest)
        {
            Ok(occupied) => {
                occupied.remove();
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_sweeps_once_it_served_as_many_operations_as_it_kept() {
        let map: Sharded<u32> = Sharded::new(1);
        for i in 0..100u32 {
            let key = i.to_string();
            let mut shard = map.lock(&key);
            shard.sweep_if_due(|&v| v >= 50);
            shard.insert(i);
        }
        // The 64th operation swept the first 50 away; 36 more were inserted since.
        assert_eq!(map.len(), 14 + 36);
        assert_eq!(map.lock("49").get_mut(), None);
        assert_eq!(map.lock("50").get_mut(), Some(&mut 50));
    }

    /// Stores each `(key, expiry)` as the memory backend stores a new key: room first.
    fn store(map: &Sharded<u32>, now: u32, entries: impl IntoIterator<Item = (String, u32)>) {
        for (key, expires_at) in entries {
            let mut shard = map.lock(&key);
            shard.make_room(now, |&at| at);
            shard.insert(expires_at);
        }
    }

    /// Every expiry the map holds, sorted.
    fn held(map: &Sharded<u32>) -> Vec<u32> {
        let mut all: Vec<u32> = map
            .shards
            .iter()
            .flat_map(|shard| {
                let shard = shard.lock().unwrap();
                shard.entries.iter().map(|(_, at)| *at).collect::<Vec<_>>()
            })
            .collect();
        all.sort_unstable();
        all
    }

    fn keyed(expiries: impl IntoIterator<Item = u32>) -> Vec<(String, u32)> {
        expiries
            .into_iter()
            .map(|at| (at.to_string(), at))
            .collect()
    }

    fn capacities(map: &Sharded<u32>) -> Vec<usize> {
        map.shards
            .iter()
            .map(|shard| shard.lock().unwrap().capacity)
            .collect()
    }

    #[test]
    fn a_bound_is_split_exactly_over_the_shards() {
        let split = capacities(&Sharded::bounded(64, NonZeroUsize::new(100).unwrap()));
        assert_eq!(split.len(), 64);
        assert_eq!(split.iter().sum::<usize>(), 100);
        assert_eq!(split.iter().filter(|&&share| share == 2).count(), 36);
        assert_eq!(split.iter().filter(|&&share| share == 1).count(), 28);
        // Fewer keys than shards: fewer shards, one key each, never an empty one.
        assert_eq!(
            capacities(&Sharded::bounded(64, NonZeroUsize::new(10).unwrap())),
            [1; 10]
        );
    }

    #[test]
    fn a_full_shard_drops_every_expired_entry_first() {
        let map = Sharded::bounded(1, NonZeroUsize::new(8).unwrap());
        store(&map, 0, keyed(1..=8));
        // At 4, the four entries expiring by then go, more than the one an eighth asks for.
        store(&map, 4, keyed([20]));
        assert_eq!(held(&map), [5, 6, 7, 8, 20]);
    }

    #[test]
    fn a_full_shard_evicts_the_soonest_expiring_eighth() {
        let map = Sharded::bounded(1, NonZeroUsize::new(16).unwrap());
        let scrambled = [9, 3, 14, 1, 12, 7, 16, 5, 10, 2, 15, 8, 13, 4, 11, 6];
        store(&map, 0, keyed(scrambled));
        assert_eq!(map.len(), 16);
        store(&map, 0, keyed([17]));
        assert_eq!(held(&map), (3..=17).collect::<Vec<_>>());
        // Two slots are free now: the next new key evicts nothing.
        store(&map, 0, keyed([18]));
        assert_eq!(held(&map), (3..=18).collect::<Vec<_>>());
    }

    #[test]
    fn entries_at_the_cut_go_only_as_far_as_the_eighth_needs() {
        let map = Sharded::bounded(1, NonZeroUsize::new(16).unwrap());
        let mut shared = keyed([1]);
        shared.extend((0..15).map(|i| (format!("tie{i}"), 5)));
        store(&map, 0, shared);
        store(&map, 0, keyed([9]));
        assert_eq!(held(&map), [[5; 14].as_slice(), &[9]].concat());
    }

    #[test]
    fn a_spray_expiring_sooner_never_evicts_a_later_entry() {
        let map = Sharded::bounded(1, NonZeroUsize::new(8).unwrap());
        store(&map, 0, [("victim".to_owned(), 1000)]);
        store(&map, 0, (1..=800).map(|at| (format!("spray{at}"), at)));
        // Each new key evicted the oldest spray; the victim and the last seven remain.
        assert_eq!(held(&map), [794, 795, 796, 797, 798, 799, 800, 1000]);
        assert_eq!(map.lock("victim").get_mut(), Some(&mut 1000));
    }

    #[test]
    fn evicting_an_entry_takes_a_shard_of_later_expiring_ones() {
        let map = Sharded::bounded(1, NonZeroUsize::new(8).unwrap());
        store(&map, 0, [("victim".to_owned(), 10)]);
        store(&map, 0, (0..7).map(|i| (format!("spray{i}"), 100 + i)));
        assert_eq!(map.lock("victim").get_mut(), Some(&mut 10));
        store(&map, 0, [("spray7".to_owned(), 107)]);
        assert_eq!(map.lock("victim").get_mut(), None);
        assert_eq!(held(&map), (100..=107).collect::<Vec<_>>());
    }

    #[test]
    fn making_room_spares_what_it_is_told_to_unless_that_fills_the_shard() {
        let map = Sharded::bounded(1, NonZeroUsize::new(8).unwrap());
        store(&map, 0, keyed(1..=8));
        let spared = map.digests().of_text(b"1");
        let mut shard = map.lock("9");
        shard.make_room_sparing(0, |&at| at, |digest| *digest == spared);
        shard.insert(9);
        drop(shard);
        // The soonest entry but the spared one went.
        assert_eq!(held(&map), [1, 3, 4, 5, 6, 7, 8, 9]);

        // Expired, a spared entry goes as any expired one, and frees the room asked for.
        let mut shard = map.lock("10");
        shard.make_room_sparing(1, |&at| at, |digest| *digest == spared);
        shard.insert(10);
        drop(shard);
        assert_eq!(held(&map), [3, 4, 5, 6, 7, 8, 9, 10]);

        let map = Sharded::bounded(1, NonZeroUsize::new(1).unwrap());
        store(&map, 0, keyed([1]));
        let mut shard = map.lock("2");
        shard.make_room_sparing(0, |&at| at, |_| true);
        shard.insert(2);
        drop(shard);
        // Spared, it was all the shard held: it went, and the bound holds.
        assert_eq!(held(&map), [2]);
    }

    #[test]
    fn locking_several_keys_locks_each_shard_once_in_order_and_finds_every_key() {
        let map: Sharded<u32> = Sharded::new(4);
        let keys: Vec<String> = (0..12).map(|i| format!("key{i}")).collect();
        let mut at: Vec<KeyAt> = keys
            .iter()
            .map(|key| (map.digests().of_text(key.as_bytes()), 0))
            .collect();
        let mut locked = map.lock_all(&mut at);
        let shards: Vec<usize> = locked.guards.iter().map(|(index, _)| *index).collect();
        assert!(
            shards.windows(2).all(|pair| pair[0] < pair[1]),
            "{shards:?}"
        );
        for i in 0..keys.len() {
            locked.key(i).insert(u32::try_from(i).unwrap());
        }
        drop(locked);
        // Each key went to its own shard: a plain lock finds it there.
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(
                map.lock(key).get_mut(),
                Some(&mut u32::try_from(i).unwrap())
            );
        }
        assert_eq!(map.len(), keys.len());
    }

    #[test]
    fn an_unbounded_map_never_evicts() {
        let map = Sharded::new(4);
        store(&map, 10, keyed(1..=1000));
        assert_eq!(map.len(), 1000);
    }

    #[test]
    fn debug_shows_no_hasher_key() {
        let map: Sharded<u32> = Sharded::new(4);
        assert_eq!(format!("{map:?}"), "Sharded { shards: 4, .. }");
    }

    #[test]
    fn insert_replaces_and_remove_forgets() {
        let map: Sharded<u32> = Sharded::new(4);
        map.lock("a").insert(1);
        map.lock("a").insert(2);
        map.lock("b").insert(3);
        assert_eq!(map.len(), 2);
        assert_eq!(map.lock("a").get_mut(), Some(&mut 2));
        map.lock("a").remove();
        map.lock("a").remove();
        assert_eq!(map.lock("a").get_mut(), None);
        assert_eq!(map.lock("b").get_mut(), Some(&mut 3));
        assert_eq!(map.len(), 1);
    }
}

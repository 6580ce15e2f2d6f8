//! What the in-process stores (the memory backend, the deny cache, local batches) key an entry
//! by: the [`Digest`] of its key past its `{prefix}:{TAG}:` head, made of two keyed hashes,
//! one of the key's route part and one of its client part. A route part is the same for every
//! client of one limit on one route: a thread hashes it once and keeps its value, so a check
//! hashes only its client's text.
//!
//! A digest cannot be read back: each map also remembers the route parts it has digested (a
//! few per limit, each once), by which `PlugLimit::reset_key` finds a client's keys under
//! every options and scope of a limiter.
//!
//! A key past its head reads `{limiter}:{options}:{scope length}:{scope}:{client}`
//! (`engine/keys.rs` composes it); its route part is everything before `{client}`, written by
//! [`Route::write_to`] and found in a composed key by [`split`].

use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use siphasher::sip128::SipHasher13;

/// What a key is stored as: two 64-bit halves.
pub(crate) type Digest = (u64, u64);

/// The hash keys of one map's digests, drawn at random when the map is made.
///
/// A key's digest is the XOR of two 128-bit SipHash-1-3 values, each under its own key: one of
/// the key's route part, one of its client part. Keys come from clients, and SipHash is a keyed
/// pseudorandom function: a client that knows neither key can neither choose where its keys
/// land nor find two keys that share a digest. Two keys that differ differ in a part: in one
/// only, and their digests differ by that part's two values, which differ but by chance; in
/// both, and they differ by an XOR of four values no one can predict. Either way two of ten
/// million keys share a digest with odds below 10^-24. The keys are never printed, and no
/// digest leaves the process.
///
/// One compression round a block and three to finish are the rounds Rust's `HashMap` runs
/// against the same adversary (a client choosing keys to collide, who sees neither key nor
/// digest); here they give 128 bits, where the `HashMap` keeps 64. The stake is higher here:
/// a collision there costs speed, here two keys would share a budget. No published analysis
/// finds collisions of SipHash-1-3 under a secret key, but its margin is thinner than
/// SipHash-2-4's, which read a typical key in about 110 more instructions, 3% of what a
/// check added to a bare route (`benches/HISTORY.md`, "A hit without what it did not need"): a trade made on purpose, and one to
/// revisit should that analysis change.
pub(crate) struct KeyDigests {
    /// This map's among every map's of the process: the route parts a thread keeps are told
    /// apart by it, as each map hashes them under its own key.
    id: u64,
    route: SipHasher13,
    client: SipHasher13,
    /// The route parts this map has digested, as [`Route::write_to`] writes them: a digest
    /// cannot be read back, so these are how a client's keys are found under every options
    /// and scope of a limiter ([`client_keys`](Self::client_keys)). Added to when a thread
    /// first keeps a route part (a long one, on each check), never on a check that finds it
    /// kept; at most [`MAX_SEEN`].
    seen: RwLock<HashSet<Box<str>>>,
}

/// The most route parts one map remembers: a limiter's options times the scopes it counts
/// under (routes, and the scopes of programmatic checks). Past it, a client's keys under
/// route parts first seen later are not found by [`KeyDigests::client_keys`].
pub(crate) const MAX_SEEN: usize = 65_536;

impl KeyDigests {
    pub(crate) fn new() -> Self {
        // Never 0, which marks an empty slot of the route parts a thread keeps.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            route: SipHasher13::new_with_keys(random_u64(), random_u64()),
            client: SipHasher13::new_with_keys(random_u64(), random_u64()),
            seen: RwLock::new(HashSet::new()),
        }
    }

    /// The digests of `client`'s keys (its client part as a key holds it) under every route
    /// part of `limiter` this map has digested.
    pub(crate) fn client_keys(&self, limiter: &str, client: &[u8]) -> Vec<Digest> {
        let seen = self.seen.read().unwrap_or_else(PoisonError::into_inner);
        seen.iter()
            .filter(|route| {
                route
                    .strip_prefix(limiter)
                    .is_some_and(|rest| rest.starts_with(':'))
            })
            .map(|route| self.with_client(self.route_text(route.as_bytes()), client))
            .collect()
    }

    /// Remembers the route part `text` (as [`Route::write_to`] writes it), once: allocated
    /// only when it is new.
    fn remember(&self, text: &[u8]) {
        // Written from `&str`s: never refused.
        let Ok(text) = std::str::from_utf8(text) else {
            return;
        };
        // Read first: a long route part comes here on every check, and is nearly always known.
        if self
            .seen
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(text)
        {
            return;
        }
        let mut seen = self.seen.write().unwrap_or_else(PoisonError::into_inner);
        if seen.len() < MAX_SEEN {
            seen.insert(text.into());
        }
    }

    /// The digest of a composed key past its head.
    pub(crate) fn of_text(&self, key: &[u8]) -> Digest {
        let (route, client) = split(key);
        self.with_client(self.route_text(route), client)
    }

    /// The digest of the key of route part `route` and client part `client` (the text a
    /// composed key ends with): [`of_text`](Self::of_text) of that key, without composing it,
    /// and with the route part's value kept by the thread. With a `memo`, the client part's
    /// value is that of the text hashed last when it is the same text (a stack's limits keyed
    /// alike).
    #[inline(always)]
    pub(crate) fn of_parts<'t>(
        &self,
        route: Route<'_>,
        client: &'t [u8],
        memo: Option<&mut ClientMemo<'t>>,
    ) -> Digest {
        let (high, low) = self.route(route);
        let (client_high, client_low) = match memo {
            None => self.client_value(client),
            Some(memo) => match memo.last {
                Some((text, value)) if text == client => value,
                _ => {
                    let value = self.client_value(client);
                    memo.last = Some((client, value));
                    value
                }
            },
        };
        (high ^ client_high, low ^ client_low)
    }

    fn with_client(&self, (high, low): Digest, client: &[u8]) -> Digest {
        let (client_high, client_low) = self.client_value(client);
        (high ^ client_high, low ^ client_low)
    }

    fn client_value(&self, client: &[u8]) -> Digest {
        let hash = self.client.hash(client);
        (hash.h1, hash.h2)
    }

    fn route_text(&self, route: &[u8]) -> Digest {
        let hash = self.route.hash(route);
        (hash.h1, hash.h2)
    }

    /// The value of `route`'s part, as this thread keeps it when it fits a slot.
    fn route(&self, route: Route<'_>) -> Digest {
        let pieces = [route.limiter, route.opts, route.scope].map(str::as_bytes);
        if pieces.iter().map(|piece| piece.len()).sum::<usize>() > ROOM {
            return self.route_written(route);
        }
        let slot = slot_of(self.id, route);
        let kept = ROUTES.try_with(|routes| {
            let mut routes = routes.try_borrow_mut().ok()?;
            let slot = &mut routes[slot];
            if slot.holds(self.id, pieces) {
                return Some(slot.route);
            }
            let value = self.route_written(route);
            *slot = Slot::new(self.id, pieces, value);
            Some(value)
        });
        kept.ok().flatten().unwrap_or_else(|| {
            // The thread's slots are gone (it is exiting) or in use: hashed here.
            self.route_written(route)
        })
    }

    /// The value of `route`'s part, written out and hashed.
    /// Never on a check that finds the part kept by its thread: the part is remembered from
    /// the text it is hashed from, written once.
    fn route_written(&self, route: Route<'_>) -> Digest {
        let mut text = StackText::default();
        if route.write(&mut text).is_ok() {
            self.remember(text.as_bytes());
            return self.route_text(text.as_bytes());
        }
        let mut text = String::new();
        route.write_to(&mut text);
        self.remember(text.as_bytes());
        self.route_text(text.as_bytes())
    }
}

/// The client part one map hashed last, and its value: the limits of a stack are most often
/// keyed alike (by one header, one address), so the client part of each after the first is
/// then hashed once. Compared by its bytes, so that only the same text reads the value; kept
/// for one operation on one map.
#[derive(Debug, Default)]
pub(crate) struct ClientMemo<'t> {
    last: Option<(&'t [u8], Digest)>,
}

/// A key's route part by its pieces: its limiter, its options as the key holds them (see
/// `limit::write_key_text`) and its scope.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route<'a> {
    pub(crate) limiter: &'a str,
    pub(crate) opts: &'a str,
    pub(crate) scope: &'a str,
}

impl Route<'_> {
    /// Writes `{limiter}:{options}:{scope length}:{scope}:`: the scope is written with its
    /// length, so `scope = "/v1/items"` with client `batch:x` can never meet
    /// `scope = "/v1/items:batch"` with client `x`.
    fn write(&self, out: &mut impl KeyOut) -> Result<(), Full> {
        // What `split` reads the route part back by.
        debug_assert!(
            !self.limiter.contains(':') && !self.opts.contains(':'),
            "a `:` in a limiter's name or a key's options: {self:?}",
        );
        out.put(self.limiter)?;
        out.put(":")?;
        out.put(self.opts)?;
        out.put(":")?;
        out.put(itoa::Buffer::new().format(self.scope.len()))?;
        out.put(":")?;
        out.put(self.scope)?;
        out.put(":")
    }

    /// [`write`](Self::write) to a `String`.
    pub(crate) fn write_to(&self, out: &mut String) {
        // Writing to a `String` cannot fail.
        let _ = self.write(out);
    }
}

/// A composed key past its head split where its client part begins: its route part (what
/// [`Route::write_to`] writes) and its client part. Neither a limiter (a registered name) nor
/// the options (see `limit::write_key_text`) hold a `:`, and the scope is read by its length,
/// so the split finds the route part the key was composed of. A text not of that form (none
/// the library composes) is all client part: any split works, as long as one text always
/// splits one way.
pub(crate) fn split(key: &[u8]) -> (&[u8], &[u8]) {
    let route_len = || {
        let colon = |from: usize| -> Option<usize> {
            let at = key.get(from..)?.iter().position(|&byte| byte == b':')?;
            Some(from + at)
        };
        let len_from = colon(colon(0)? + 1)? + 1;
        let len_end = colon(len_from)?;
        let digits = &key[len_from..len_end];
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let scope_len: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
        let scope_end = len_end.checked_add(1)?.checked_add(scope_len)?;
        (key.get(scope_end) == Some(&b':')).then_some(scope_end + 1)
    };
    key.split_at(route_len().unwrap_or(0))
}

/// Where a route part is written: a `String`, or [`StackText`]. Writing to a `String` never
/// fails; writing to the stack fails past its room.
trait KeyOut {
    fn put(&mut self, text: &str) -> Result<(), Full>;
}

/// A text too long for [`StackText`].
#[derive(Debug)]
struct Full;

impl KeyOut for String {
    #[inline]
    fn put(&mut self, text: &str) -> Result<(), Full> {
        self.push_str(text);
        Ok(())
    }
}

/// The longest route part written on the stack; a longer one (a long scope or options) is
/// written on the heap.
const ON_STACK: usize = 256;

/// A route part's text on the stack: [`ON_STACK`] bytes at most, a longer one refused.
struct StackText {
    bytes: [u8; ON_STACK],
    len: usize,
}

impl Default for StackText {
    fn default() -> Self {
        Self {
            bytes: [0; ON_STACK],
            len: 0,
        }
    }
}

impl StackText {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    #[inline]
    fn put_bytes(&mut self, bytes: &[u8]) -> Result<(), Full> {
        let end = self.len + bytes.len();
        self.bytes
            .get_mut(self.len..end)
            .ok_or(Full)?
            .copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }
}

impl KeyOut for StackText {
    #[inline]
    fn put(&mut self, text: &str) -> Result<(), Full> {
        self.put_bytes(text.as_bytes())
    }
}

/// How many route parts a thread keeps: a route's limits, on the routes a thread serves in
/// turn.
const SLOTS: usize = 16;
const _: () = assert!(SLOTS.is_power_of_two());

/// The most bytes of a route part's pieces (limiter, options, scope) a slot holds; a longer
/// route part is hashed on every check.
const ROOM: usize = 112;

/// The slot that keeps `route`'s part for map `map`: a mix of the map, the pieces' lengths, the
/// options' last byte and the scope's second and middle bytes (where route templates tend to
/// differ: `/users/{id}`, `/posts/{id}`). Only a hint: a slot is read once its pieces compare
/// equal, so two routes that share one are only hashed again. Not their address, which would
/// move the slots with every run's layout (and a count of instructions with it), nor a hash of
/// every byte, which cost about what hashing the route part does.
fn slot_of(map: u64, route: Route<'_>) -> usize {
    let at = |text: &str, index: usize| u64::from(text.as_bytes().get(index).copied().unwrap_or(0));
    let (limiter, opts, scope) = (route.limiter, route.opts, route.scope);
    let len = |text: &str| text.len() as u64;
    let mixed = (map
        ^ len(limiter)
        ^ len(opts) << 8
        ^ len(scope) << 16
        ^ at(opts, opts.len().wrapping_sub(1)) << 24
        ^ at(scope, 1) << 32
        ^ at(scope, scope.len() / 2) << 40)
        .wrapping_mul(MIX);
    // The top bits, which the multiplication mixed most: `SLOTS` is a power of two.
    usize::try_from(mixed >> (u64::BITS - SLOTS.trailing_zeros())).unwrap_or_default()
}

/// An odd constant of well-spread bits (the 64-bit golden ratio), for [`slot_of`].
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

thread_local! {
    /// The route parts this thread hashed last, and their values. Plain bytes, so the thread
    /// registers nothing to run at its exit.
    static ROUTES: RefCell<[Slot; SLOTS]> = const { RefCell::new([Slot::EMPTY; SLOTS]) };
}

/// One kept route part: the map it was hashed for, its pieces, and its value.
#[derive(Clone, Copy)]
struct Slot {
    /// The map's [`KeyDigests::id`]; 0 for none.
    map: u64,
    /// The lengths of the limiter, the options and the scope, which `text` holds in turn.
    lens: [u8; 3],
    text: [u8; ROOM],
    route: Digest,
}

impl Slot {
    const EMPTY: Self = Self {
        map: 0,
        lens: [0; 3],
        text: [0; ROOM],
        route: (0, 0),
    };

    /// The slot of `pieces` (at most [`ROOM`] bytes in all) hashed for `map` to `route`.
    fn new(map: u64, pieces: [&[u8]; 3], route: Digest) -> Self {
        let mut slot = Self {
            map,
            route,
            ..Self::EMPTY
        };
        let mut at = 0;
        for (len, piece) in slot.lens.iter_mut().zip(pieces) {
            slot.text[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
            // Each within `ROOM`, below 256.
            *len = u8::try_from(piece.len()).unwrap_or(u8::MAX);
        }
        slot
    }

    /// Whether it holds `pieces`, hashed for `map`.
    fn holds(&self, map: u64, pieces: [&[u8]; 3]) -> bool {
        if self.map != map {
            return false;
        }
        let mut at = 0;
        self.lens.iter().zip(pieces).all(|(&len, piece)| {
            let held = self.text.get(at..at + usize::from(len));
            at += usize::from(len);
            held == Some(piece)
        })
    }
}

/// A value no client can predict: SipHash of a fixed text under std's hasher keys, which the
/// OS's randomness seeds (once per thread; each new `RandomState` steps them), so each call
/// gives another value and none reveals the keys.
fn random_u64() -> u64 {
    RandomState::new().hash_one("plug_limit::digest")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route<'a>(limiter: &'a str, opts: &'a str, scope: &'a str) -> Route<'a> {
        Route {
            limiter,
            opts,
            scope,
        }
    }

    fn written(route: Route<'_>) -> String {
        let mut text = String::new();
        route.write_to(&mut text);
        text
    }

    #[test]
    fn a_composed_key_splits_where_its_client_part_begins() {
        for (scope, client) in [
            ("/v1/items", "alice"),
            ("/v1/items:batch", "x"),
            ("/v1/items", "batch:x"),
            ("", ""),
            (":", ":"),
            ("/users/{id}", "#0123"),
            ("12:34", "5:6"),
        ] {
            let route = written(route("fixed_window", "10,60", scope));
            let key = format!("{route}{client}");
            assert_eq!(
                split(key.as_bytes()),
                (route.as_bytes(), client.as_bytes()),
                "{key}"
            );
        }
    }

    #[test]
    fn a_text_of_no_route_part_is_all_client_part() {
        for text in [
            "",
            "49",
            "a:b",
            "a:b:c",
            "a:b:x:s:",
            "a:b:9:short:",
            "a:b:+1:s:",
        ] {
            assert_eq!(
                split(text.as_bytes()),
                (&b""[..], text.as_bytes()),
                "{text}"
            );
        }
    }

    #[test]
    fn a_key_by_its_parts_digests_as_its_text_does() {
        let digests = KeyDigests::new();
        // Past a slot's room, and past the stack's: hashed each time, written on the heap.
        let long_scope = "/s".repeat(150);
        for scope in ["/v1/items", "", "/users/{id}", long_scope.as_str()] {
            let route = route("fixed_window", "10,60", scope);
            for client in ["alice", "", "b:c"] {
                let key = format!("{}{client}", written(route));
                // Twice: hashed, then kept by the thread.
                for _ in 0..2 {
                    assert_eq!(
                        digests.of_parts(route, client.as_bytes(), None),
                        digests.of_text(key.as_bytes()),
                        "{key}"
                    );
                }
            }
        }
    }

    #[test]
    fn keys_differing_in_a_part_differ_in_their_digests() {
        let digests = KeyDigests::new();
        let keys = [
            (route("fixed_window", "10,60", "/a"), "x"),
            (route("fixed_window", "10,60", "/a"), "y"),
            (route("fixed_window", "10,60", "/b"), "x"),
            (route("fixed_window", "10,61", "/a"), "x"),
            (route("gcra", "10,60", "/a"), "x"),
            (route("fixed_window", "10,60", "/a:x"), ""),
        ];
        let all: Vec<Digest> = keys
            .iter()
            .map(|&(route, client)| digests.of_parts(route, client.as_bytes(), None))
            .collect();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn two_maps_digest_one_key_apart() {
        let (one, other) = (KeyDigests::new(), KeyDigests::new());
        let route = route("fixed_window", "10,60", "/a");
        // Each map's value of the route part, though one thread keeps both.
        let [a, b, a_again] = [&one, &other, &one].map(|map| map.of_parts(route, b"x", None));
        assert_ne!(a, b);
        assert_eq!(a, a_again);
        assert_eq!(b, other.of_text(format!("{}x", written(route)).as_bytes()));
    }

    #[test]
    fn a_memo_of_the_client_part_gives_each_key_its_own_digest() {
        let digests = KeyDigests::new();
        let (a, b) = (
            route("fixed_window", "10,60", "/a"),
            route("gcra", "5,1", "/a"),
        );
        // A stack's keys in turn: alike, then another client, then the first again, then
        // texts that share a prefix or a length.
        let keys = [
            (a, "alice"),
            (b, "alice"),
            (a, "bob"),
            (b, "alice"),
            (a, "alic"),
            (b, "alicf"),
            (a, ""),
            (b, ""),
        ];
        let mut memo = ClientMemo::default();
        for (route, client) in keys {
            let key = format!("{}{client}", written(route));
            assert_eq!(
                digests.of_parts(route, client.as_bytes(), Some(&mut memo)),
                digests.of_text(key.as_bytes()),
                "{key}"
            );
        }
    }

    #[test]
    fn routes_sharing_a_slot_each_digest_as_their_text() {
        let digests = KeyDigests::new();
        // More routes than slots: some share one, and each is hashed again when it comes back.
        let scopes: Vec<String> = (0..3 * SLOTS).map(|i| format!("/r{i}")).collect();
        for _ in 0..2 {
            for scope in &scopes {
                let route = route("fixed_window", "10,60", scope);
                assert_eq!(
                    digests.of_parts(route, b"c", None),
                    digests.of_text(format!("{}c", written(route)).as_bytes())
                );
            }
        }
    }
}

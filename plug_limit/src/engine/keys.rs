//! A request's Redis keys: what the client is counted under, composed so that no two
//! (limiter, options, scope, client) share a key and no brace in route, option or client text
//! picks a Cluster slot.
//!
//! A key reads `{prefix}:{TAG}:{limiter}:{options}:{scope length}:{scope}:{client}`:
//! - `{TAG}` is a Redis Cluster hash tag the library chooses: four hex digits of a fixed 16-bit
//!   hash of the client's (first) key part ([`tag_hash`]: the top of its XXH3). Redis hashes
//!   only the first `{...}` of a key, so braces in a route template (`/users/{id}`) or in a
//!   client's text never choose the slot, and keys spread over the cluster by client. Every
//!   part of one request's key shares the tag, so a custom script's `KEYS` are always in one
//!   slot. The tag only spreads keys: it takes no part in telling keys apart (the client part
//!   does), so it needs no collision resistance, and a client could search 16 bits for any
//!   tag whatever the hash.
//! - The options are the limit's, comma-separated (`10,60`), so two limits of one limiter and
//!   one scope with different options never share a counter. Options with a `,` or `:` in
//!   their text, an empty one, one starting with `#`, or more than 64 bytes of them in all are
//!   stored as `#` and the hex SHA-1 of each option's length and text: the part never holds a
//!   `:` and tells every list of options apart (`limit::write_key_text`). A limit writes it
//!   once: a typed one at compile time (`limit::OptsKey`), a `RuntimeLimit` when made.
//! - The scope is length-prefixed, so `scope = "/v1/items"` with client `batch:x` can never
//!   meet `scope = "/v1/items:batch"` with client `x`: the composition is injective.
//! - A client part longer than [`MAX_VERBATIM`] bytes, or one starting with `#`, is stored as
//!   `#` and the hex SHA-1 of its text: a 300 kB header costs 41 bytes of key, and a verbatim
//!   part never looks like a digest.
//!
//! A request's keys are composed when first read: the in-process stores (the memory backend,
//! the deny cache, local batches) read only the first key's digest, made of its pieces
//! (`first_digest`, see `backend/digest.rs`) with no key composed, no allocation and nothing
//! to free; Redis and what a request owes after its response read the composed text.

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::backend::digest::Route;
use crate::backend::{ClientMemo, Digest, KeyDigests, KeyText, head_len, past_head};
use crate::key::Extracted;
use crate::limit::{Opt, push_digest, write_key_text};

/// The longest client key part stored as it is.
const MAX_VERBATIM: usize = 64;

/// A request's namespaced keys, one per part of its client key, composed when first read.
#[derive(Debug)]
pub(crate) struct Keys<'a> {
    /// What the keys are made of, while they may not be composed yet.
    plan: Option<Plan<'a>>,
    composed: OnceLock<Composed>,
}

/// What a request's keys are composed of.
#[derive(Debug)]
struct Plan<'a> {
    prefix: &'a str,
    limit: Named<'a>,
    scope: Cow<'a, str>,
    key: Extracted<'a>,
}

/// Composed keys: built-in limiters and most custom ones take one, kept without a `Vec`
/// around it.
#[derive(Debug, PartialEq, Eq)]
enum Composed {
    One(String),
    Many(Vec<String>),
}

impl<'a> Keys<'a> {
    /// The key of a client of one part, `client`: what [`namespaced`](Keys::namespaced) makes
    /// of `Key::from(client)`, without copying `client` into a `Key`, composed when first read
    /// (never, for the memory backend).
    pub(crate) fn of_client(
        client: &'a str,
        prefix: &'a str,
        limit: Named<'a>,
        scope: &'a str,
    ) -> Self {
        Self {
            plan: Some(Plan {
                prefix,
                limit,
                scope: Cow::Borrowed(scope),
                key: Extracted::Borrowed(client),
            }),
            composed: OnceLock::new(),
        }
    }

    /// The keys of `key`'s parts, under `limit` and `scope`, composed when first read.
    pub(crate) fn namespaced(
        key: Extracted<'a>,
        prefix: &'a str,
        limit: Named<'a>,
        scope: Cow<'a, str>,
    ) -> Self {
        Self {
            plan: Some(Plan {
                prefix,
                limit,
                scope,
                key,
            }),
            composed: OnceLock::new(),
        }
    }

    fn composed(&self) -> &Composed {
        self.composed.get_or_init(|| match &self.plan {
            Some(plan) => plan.compose(),
            None => Composed::Many(Vec::new()),
        })
    }

    /// The first key: the client's, for every built-in.
    pub(crate) fn first(&self) -> &str {
        match self.composed() {
            Composed::One(key) => key,
            Composed::Many(keys) => keys.first().map_or("", String::as_str),
        }
    }

    pub(crate) fn as_slice(&self) -> &[String] {
        match self.composed() {
            Composed::One(key) => std::slice::from_ref(key),
            Composed::Many(keys) => keys,
        }
    }
}

impl KeyText for Keys<'_> {
    fn all(&self) -> &[String] {
        self.as_slice()
    }

    /// The first key's digest: by its pieces, the key never composed, when it was not composed
    /// yet (the head, a prefix and a tag, is no part of it).
    fn first_digest(&self, head: usize, digests: &KeyDigests) -> Digest {
        self.digest_of_first(head, digests, None)
    }

    fn first_digest_shared<'s>(
        &'s self,
        head: usize,
        digests: &KeyDigests,
        memo: &mut ClientMemo<'s>,
    ) -> Digest {
        self.digest_of_first(head, digests, Some(memo))
    }
}

impl Keys<'_> {
    /// [`KeyText::first_digest`], with a `memo` of the client part hashed last when given.
    #[inline(always)]
    fn digest_of_first<'m>(
        &'m self,
        head: usize,
        digests: &KeyDigests,
        memo: Option<&mut ClientMemo<'m>>,
    ) -> Digest {
        if self.composed.get().is_none()
            && let Some(plan) = &self.plan
        {
            debug_assert_eq!(head, head_len(plan.prefix), "a head of another prefix");
            let opts = plan.limit.opts_text();
            let route = Route {
                limiter: plan.limit.limiter,
                opts: &opts,
                scope: &plan.scope,
            };
            let client = plan.key.first();
            // A client part the key holds as it is, borrowed from the request: only such a
            // text, which outlives the memo, is kept in it.
            if is_verbatim(client) {
                return digests.of_parts(route, client.as_bytes(), memo);
            }
            return client_part(client, |client| {
                digests.of_parts(route, client.as_bytes(), None)
            });
        }
        digests.of_text(past_head(self.first(), head))
    }
}

impl Plan<'_> {
    fn compose(&self) -> Composed {
        let first = self.key.first();
        let mut parts = self.key.rest();
        let tag = tag(first);
        let one = |part: &str| {
            let mut key = String::with_capacity(self.len_of(part));
            write_tagged(&mut key, self.prefix, tag, self.limit, &self.scope, part);
            key
        };
        let first_key = one(first);
        match parts.next() {
            None => Composed::One(first_key),
            Some(second) => {
                let mut all = vec![first_key, one(second)];
                all.extend(parts.map(one));
                Composed::Many(all)
            }
        }
    }

    /// About the length of the key of `part`, to allocate it once.
    fn len_of(&self, part: &str) -> usize {
        key_len(self.prefix, self.limit, &self.scope, part)
    }
}

/// What a key names of its limit: the limiter and its options, with the options' part of the
/// key when the limit wrote it ahead (`limit::OptsKey`, a `RuntimeLimit` when made).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Named<'a> {
    pub(crate) limiter: &'a str,
    pub(crate) opts: &'a [Opt],
    pub(crate) opts_key: Option<&'a str>,
}

impl Named<'_> {
    /// The options as the key holds them: written ahead, or written now.
    fn opts_text(&self) -> Cow<'_, str> {
        if let Some(text) = self.opts_key {
            return Cow::Borrowed(text);
        }
        let mut text = String::new();
        write_key_text(&mut text, self.opts);
        Cow::Owned(text)
    }
}

fn sha1(text: &str) -> [u8; 20] {
    use sha1::Digest as _;
    sha1::Sha1::digest(text.as_bytes()).into()
}

/// The hash tag of a request's keys: [`tag_hash`] of the client's part in four hex digits, 16
/// bits, enough to reach every one of Redis Cluster's 16384 slots.
fn tag(part: &str) -> [u8; 4] {
    let hex = |nibble: u16| b"0123456789abcdef"[usize::from(nibble & 0xf)];
    let hash = tag_hash(part.as_bytes());
    [hex(hash >> 12), hex(hash >> 8), hex(hash >> 4), hex(hash)]
}

/// The 16 bits of the tag: the top of the client part's XXH3 (64-bit, no seed), which spreads
/// keys evenly over Redis Cluster's slots. Keys live in Redis across restarts and deployments:
/// XXH3's output is fixed by its specification, never by a hasher that may change between
/// Rust releases; and it reads a 64-byte client part in a few nanoseconds, where SHA-1 took a
/// quarter of a memory check.
fn tag_hash(bytes: &[u8]) -> u16 {
    // The top 16 bits: the truncation is the point.
    #[allow(clippy::cast_possible_truncation)]
    let top = (xxhash_rust::xxh3::xxh3_64(bytes) >> 48) as u16;
    top
}

/// What every key of `client` holds of it: their hash tag, and their client part (`client`
/// itself, or `#` and its digest), by which its keys are found under any limit.
pub(crate) fn client_parts(client: &str) -> ([u8; 4], String) {
    (tag(client), client_part(client, str::to_owned))
}

/// Whether a client part is stored as it is, rather than as its digest.
fn is_verbatim(part: &str) -> bool {
    part.len() <= MAX_VERBATIM && !part.starts_with('#')
}

/// About the length of one key (exact but for options written at run time), to allocate it
/// once.
fn key_len(prefix: &str, limit: Named<'_>, scope: &str, part: &str) -> usize {
    let client_len = if is_verbatim(part) { part.len() } else { 41 };
    let opts_len = limit.opts_key.map_or(12 * limit.opts.len(), str::len);
    prefix.len() + limit.limiter.len() + opts_len + scope.len() + client_len + 16 + 8
}

/// Writes one key under `tag` to `out`: its head (`prefix`, `tag`), then the rest.
fn write_tagged(
    out: &mut String,
    prefix: &str,
    tag: [u8; 4],
    limit: Named<'_>,
    scope: &str,
    part: &str,
) {
    out.push_str(prefix);
    out.push_str(":{");
    // The tag is ASCII hex digits.
    out.extend(tag.map(char::from));
    out.push_str("}:");
    write_counted(out, limit, scope, part);
}

/// Writes the part of a key after its head: limiter, options, scope and client, what tells
/// keys of one prefix apart.
fn write_counted(out: &mut String, limit: Named<'_>, scope: &str, part: &str) {
    let opts = limit.opts_text();
    Route {
        limiter: limit.limiter,
        opts: &opts,
        scope,
    }
    .write_to(out);
    client_part(part, |client| out.push_str(client));
}

/// `f` of a client part as a key holds it: as it is, or when long or `#`-led as its SHA-1
/// (collision resistant, since two clients whose parts shared a digest would share a budget).
fn client_part<T>(part: &str, f: impl FnOnce(&str) -> T) -> T {
    if is_verbatim(part) {
        f(part)
    } else {
        let mut digest = String::with_capacity(41);
        push_digest(&mut digest, sha1(part));
        f(&digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Key;

    const TEN_A_MINUTE: &[Opt] = &[Opt::Int(10), Opt::Int(60)];

    fn limit(limiter: &'static str, opts: &'static [Opt]) -> Named<'static> {
        Named {
            limiter,
            opts,
            opts_key: None,
        }
    }

    fn one(scope: &str, client: &str) -> String {
        one_of(limit("fixed_window", TEN_A_MINUTE), scope, client)
    }

    fn one_of(limit: Named<'_>, scope: &str, client: &str) -> String {
        let keys = Keys::namespaced(
            Extracted::Owned(Key::from(client)),
            "p",
            limit,
            Cow::Borrowed(scope),
        );
        let [key] = keys.as_slice() else {
            panic!("one key expected, got {keys:?}");
        };
        // What the in-process stores digest is the same key past its head, never composed.
        let head = head_len("p");
        let digests = KeyDigests::new();
        let fresh = Keys::namespaced(
            Extracted::Owned(Key::from(client)),
            "p",
            limit,
            Cow::Borrowed(scope),
        );
        let digest = fresh.first_digest(head, &digests);
        assert_eq!(digest, digests.of_text(&key.as_bytes()[head..]));
        // As a stack's limits keyed alike digest it: hashed, then read from the memo.
        let mut memo = ClientMemo::default();
        for _ in 0..2 {
            assert_eq!(fresh.first_digest_shared(head, &digests, &mut memo), digest);
        }
        assert!(
            key[..head].starts_with("p:{") && key[..head].ends_with("}:"),
            "{key}"
        );
        let composed = Keys::namespaced(
            Extracted::Owned(Key::from(client)),
            "p",
            limit,
            Cow::Borrowed(scope),
        );
        composed.first();
        assert_eq!(composed.first_digest(head, &digests), digest);
        key.clone()
    }

    /// The slot Redis Cluster computes: CRC16 of the first non-empty `{...}`, else the key.
    fn hash_tag(key: &str) -> &str {
        let open = key.find('{').unwrap();
        let close = key[open + 1..].find('}').unwrap() + open + 1;
        &key[open + 1..close]
    }

    #[test]
    fn keys_read_prefix_tag_limiter_options_scope_and_client() {
        let key = one("/v1/items", "alice");
        let tag = hash_tag(&key);
        assert_eq!(tag.len(), 4);
        assert_eq!(
            key,
            format!("p:{{{tag}}}:fixed_window:10,60:9:/v1/items:alice")
        );
        // The tag depends on the client only.
        assert_eq!(hash_tag(&one("/other", "alice")), tag);
        assert_eq!(tag, "4da1");
    }

    #[test]
    fn a_client_of_one_part_keys_as_its_key_does() {
        for client in ["alice", "", "#x", &"y".repeat(100)] {
            let named = || limit("gcra", TEN_A_MINUTE);
            assert_eq!(
                Keys::of_client(client, "p", named(), "/v1").as_slice(),
                Keys::namespaced(
                    Extracted::Owned(Key::from(client)),
                    "p",
                    named(),
                    Cow::Borrowed("/v1")
                )
                .as_slice(),
            );
        }
    }

    #[test]
    fn colons_in_scope_or_client_cannot_meet() {
        let attacker = one("/v1/items", "batch:VICTIM");
        let victim = one("/v1/items:batch", "VICTIM");
        assert_ne!(attacker, victim);
        assert!(victim.ends_with(":15:/v1/items:batch:VICTIM"), "{victim}");
    }

    #[test]
    fn braces_never_choose_the_slot() {
        let key = one("/users/{id}", "{victim}");
        assert_eq!(hash_tag(&key), "8a0f");
        assert!(key.contains(":11:/users/{id}:{victim}"), "{key}");
    }

    #[test]
    fn long_and_hash_like_parts_are_stored_as_their_digest() {
        let long = "x".repeat(300_000);
        let key = one("/", &long);
        let tag = hash_tag(&key).to_owned();
        assert_eq!(
            key.len(),
            format!("p:{{{tag}}}:fixed_window:10,60:1:/:").len() + 41
        );
        let client = key.rsplit(':').next().unwrap();
        assert_eq!((client.len(), &client[..1]), (41, "#"));
        let sixty_four = "y".repeat(64);
        assert!(one("/", &sixty_four).ends_with(&sixty_four));
        // A client cannot pose as another's digest: `#...` text is digested too.
        let digest_text = key.rsplit(':').next().unwrap().to_owned();
        assert_ne!(one("/", &digest_text), key);
    }

    #[test]
    fn all_parts_of_a_request_share_the_first_parts_tag() {
        let key = Key::many(["a".to_owned(), "b".to_owned(), "c".to_owned()]).unwrap();
        let keys = Keys::namespaced(
            Extracted::Owned(key),
            "p",
            limit("custom", &[]),
            Cow::Borrowed("s"),
        );
        let keys = keys.as_slice();
        assert_eq!(keys.len(), 3);
        let tags: Vec<&str> = keys.iter().map(|k| hash_tag(k)).collect();
        assert_eq!(tags, [tags[0]; 3]);
        assert!(keys[2].ends_with(":custom::1:s:c"), "{}", keys[2]);
    }

    #[test]
    fn limits_of_other_options_never_share_a_key() {
        let key = |opts| one_of(limit("fixed_window", opts), "/", "alice");
        let lists: [&'static [Opt]; 9] = [
            &[],
            &[Opt::Str("")],
            &[Opt::Str(""), Opt::Str("")],
            &[Opt::Str(",")],
            &[Opt::Int(1), Opt::Int(0)],
            &[Opt::Str("1,0")],
            &[Opt::Int(10)],
            &[Opt::Str("1:0")],
            &[Opt::Int(10), Opt::Int(60)],
        ];
        let keys: Vec<String> = lists.iter().map(|opts| key(opts)).collect();
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
            // The options part never holds a separator of the key's own.
            assert_eq!(a.matches(':').count(), 6, "{a}");
        }
        // The same text is the same list: what a script reads in ARGV.
        assert_eq!(key(&[Opt::Str("10"), Opt::Str("60")]), keys[8]);
        let digest = &keys[1];
        assert!(digest.contains(":fixed_window:#"), "{digest}");
        let long: &'static [Opt] = &[Opt::Str(
            "a-string-option-of-more-than-sixty-four-bytes-which-goes-as-its-digest",
        )];
        let long_key = key(long);
        assert_eq!(long_key.split(':').nth(3).map(str::len), Some(41));
    }

    /// Keys already in Redis keep their names across versions only if the tag never changes.
    /// XXH3's reference value for the empty input is 0x2d06800538d394c2.
    #[test]
    fn the_tag_hash_is_pinned() {
        let tags = ["", "bob", "carol", "12345678", "123456789"].map(tag);
        assert_eq!(
            tags.map(|tag| String::from_utf8(tag.to_vec()).unwrap()),
            ["2d06", "1403", "e2fd", "62e2", "72dc"]
        );
        let long = "z".repeat(100);
        assert_eq!(tag_hash(long.as_bytes()), 0xfc83);
    }

    #[test]
    fn tags_spread_evenly() {
        // 16 000 clients over the tag's top four bits: 1 000 each if even.
        let mut buckets = [0_u32; 16];
        for i in 0..16_000 {
            buckets[usize::from(tag_hash(format!("client-{i}").as_bytes()) >> 12)] += 1;
        }
        assert!(
            buckets.iter().all(|&n| (900..=1100).contains(&n)),
            "{buckets:?}"
        );
    }

    /// The options' part a limit writes ahead (`limit::OptsKey`, a `RuntimeLimit` when made)
    /// makes the key a key makes without it.
    #[test]
    fn options_written_ahead_make_the_same_key() {
        use crate::limit::{FixedWindow, LimitRef};

        let opts_key = LimitRef::of::<FixedWindow<10, 60>>().opts_key;
        assert_eq!(opts_key, Some("10,60"));
        // Written ahead or not, one key.
        let ahead = Named {
            opts_key,
            ..limit("fixed_window", TEN_A_MINUTE)
        };
        assert_eq!(one_of(ahead, "/", "ann"), one("/", "ann"));
    }
}

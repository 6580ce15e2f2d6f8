//! A request's Redis keys: what the client is counted under, composed so that no two
//! (limiter, scope, client) triples share a key and no brace in route or client text picks a
//! Cluster slot.
//!
//! A key reads `{prefix}:{TAG}:{limiter}:{scope length}:{scope}:{client}`:
//! - `{TAG}` is a Redis Cluster hash tag the library chooses: four hex digits of the SHA-1 of
//!   the client's (first) key part. Redis hashes only the first `{...}` of a key, so braces in
//!   a route template (`/users/{id}`) or in a client's text never choose the slot, and keys
//!   spread over the cluster by client. Every part of one request's key shares the tag, so a
//!   custom script's `KEYS` are always in one slot.
//! - The scope is length-prefixed, so `scope = "/v1/items"` with client `batch:x` can never
//!   meet `scope = "/v1/items:batch"` with client `x`: the composition is injective.
//! - A client part longer than [`MAX_VERBATIM`] bytes, or one starting with `#`, is stored as
//!   `#` and the hex SHA-1 of its text: a 300 kB header costs 41 bytes of key, and a verbatim
//!   part never looks like a digest.

use std::fmt::Write;

use crate::key::Key;

/// The longest client key part stored as it is.
const MAX_VERBATIM: usize = 64;

/// A request's namespaced keys: built-in limiters and most custom ones take one, kept without
/// a `Vec` around it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    One(String),
    Many(Vec<String>),
}

impl Keys {
    /// The keys of `key`'s parts, under `limiter` and `scope`.
    pub(crate) fn namespaced(key: &Key, prefix: &str, limiter: &str, scope: &str) -> Self {
        let mut parts = key.iter();
        let first = parts.next().unwrap_or_default();
        let digest = sha1(first);
        let tag = tag(&digest);
        let first_key = compose(prefix, tag, limiter, scope, first, &digest);
        match parts.next() {
            None => Self::One(first_key),
            Some(second) => {
                let one = |part: &str| compose(prefix, tag, limiter, scope, part, &sha1(part));
                let mut all = vec![first_key, one(second)];
                all.extend(parts.map(one));
                Self::Many(all)
            }
        }
    }

    /// The first key: the client's, for every built-in.
    pub(crate) fn first(&self) -> &str {
        match self {
            Self::One(key) => key,
            Self::Many(keys) => keys.first().map_or("", String::as_str),
        }
    }

    pub(crate) fn as_slice(&self) -> &[String] {
        match self {
            Self::One(key) => std::slice::from_ref(key),
            Self::Many(keys) => keys,
        }
    }
}

type Digest = [u8; 20];

fn sha1(text: &str) -> Digest {
    use sha1::Digest as _;
    sha1::Sha1::digest(text.as_bytes()).into()
}

/// The hash tag of a request's keys: 16 bits of the client's digest, enough to reach every one
/// of Redis Cluster's 16384 slots.
fn tag(digest: &Digest) -> [u8; 4] {
    let hex = |nibble: u8| b"0123456789abcdef"[usize::from(nibble & 0xf)];
    [
        hex(digest[0] >> 4),
        hex(digest[0]),
        hex(digest[1] >> 4),
        hex(digest[1]),
    ]
}

/// One key; `digest` is `part`'s SHA-1.
fn compose(
    prefix: &str,
    tag: [u8; 4],
    limiter: &str,
    scope: &str,
    part: &str,
    digest: &Digest,
) -> String {
    let verbatim = part.len() <= MAX_VERBATIM && !part.starts_with('#');
    let client_len = if verbatim { part.len() } else { 41 };
    let mut key =
        String::with_capacity(prefix.len() + limiter.len() + scope.len() + client_len + 16 + 8);
    key.push_str(prefix);
    key.push_str(":{");
    // The tag is ASCII hex digits.
    key.extend(tag.iter().map(|&b| char::from(b)));
    key.push_str("}:");
    key.push_str(limiter);
    key.push(':');
    key.push_str(itoa::Buffer::new().format(scope.len()));
    key.push(':');
    key.push_str(scope);
    key.push(':');
    if verbatim {
        key.push_str(part);
    } else {
        key.push('#');
        for byte in digest {
            // Writing to a String cannot fail.
            let _ = write!(key, "{byte:02x}");
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(scope: &str, client: &str) -> String {
        match Keys::namespaced(&Key::from(client), "p", "fixed_window", scope) {
            Keys::One(key) => key,
            Keys::Many(keys) => panic!("one key expected, got {keys:?}"),
        }
    }

    /// The slot Redis Cluster computes: CRC16 of the first non-empty `{...}`, else the key.
    fn hash_tag(key: &str) -> &str {
        let open = key.find('{').unwrap();
        let close = key[open + 1..].find('}').unwrap() + open + 1;
        &key[open + 1..close]
    }

    #[test]
    fn keys_read_prefix_tag_limiter_scope_and_client() {
        let key = one("/v1/items", "alice");
        let tag = hash_tag(&key);
        assert_eq!(tag.len(), 4);
        assert_eq!(key, format!("p:{{{tag}}}:fixed_window:9:/v1/items:alice"));
        // The tag depends on the client only, and is the digest's first two bytes.
        assert_eq!(hash_tag(&one("/other", "alice")), tag);
        assert_eq!(tag, "522b");
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
        assert_eq!(
            hash_tag(&key),
            tag(&sha1("{victim}"))
                .map(char::from)
                .iter()
                .collect::<String>()
        );
        assert!(key.contains(":11:/users/{id}:{victim}"), "{key}");
    }

    #[test]
    fn long_and_hash_like_parts_are_stored_as_their_digest() {
        let long = "x".repeat(300_000);
        let key = one("/", &long);
        let tag = hash_tag(&key).to_owned();
        assert_eq!(
            key.len(),
            format!("p:{{{tag}}}:fixed_window:1:/:").len() + 41
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
        let Keys::Many(keys) = Keys::namespaced(&key, "p", "custom", "s") else {
            panic!("three keys expected");
        };
        let tags: Vec<&str> = keys.iter().map(|k| hash_tag(k)).collect();
        assert_eq!(tags, [tags[0]; 3]);
        assert!(keys[2].ends_with(":1:s:c"));
    }
}

//! The Redis key a request is counted under, written from the documented format so that tests
//! can find it in Redis: an oracle independent of the library's code.

/// `{prefix}:{TAG}:{limiter}:{scope length}:{scope}:{client}`, where `TAG` is the documented
/// 16-bit hash of `client` in four hex digits, and a client over 64 bytes or starting with `#`
/// is written as `#` and its SHA-1 in hex.
#[must_use]
pub fn stored_key(prefix: &str, limiter: &str, scope: &str, client: &str) -> String {
    let tag = tag(client.as_bytes());
    let client = if client.len() <= 64 && !client.starts_with('#') {
        client.to_owned()
    } else {
        format!("#{}", sha1_smol::Sha1::from(client).digest())
    };
    format!(
        "{prefix}:{{{tag:04x}}}:{limiter}:{}:{scope}:{client}",
        scope.len()
    )
}

/// The documented hash tag: the length, then each 8-byte little-endian word (the last one
/// zero-padded) folded in as `FxHasher` folds (`(h <<< 5 ^ word) * K`), the `splitmix64`
/// finaliser, and its top 16 bits.
fn tag(bytes: &[u8]) -> u16 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let words = std::iter::once(bytes.len() as u64).chain(bytes.chunks(8).map(|chunk| {
        chunk
            .iter()
            .rev()
            .fold(0_u64, |word, &byte| (word << 8) | u64::from(byte))
    }));
    let mut h = words.fold(0_u64, |h, word| (h.rotate_left(5) ^ word).wrapping_mul(K));
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 48) as u16
}

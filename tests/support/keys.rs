//! The Redis key a request is counted under, written from the documented format so that tests
//! can find it in Redis: an oracle independent of the library's code.

/// `{prefix}:{TAG}:{limiter}:{scope length}:{scope}:{client}`, where `TAG` is the first four hex
/// digits of the SHA-1 of `client`, and a client over 64 bytes or starting with `#` is written
/// as `#` and its SHA-1 in hex.
#[must_use]
pub fn stored_key(prefix: &str, limiter: &str, scope: &str, client: &str) -> String {
    let digest = sha1_smol::Sha1::from(client).digest().to_string();
    let tag = &digest[..4];
    let client = if client.len() <= 64 && !client.starts_with('#') {
        client.to_owned()
    } else {
        format!("#{digest}")
    };
    format!(
        "{prefix}:{{{tag}}}:{limiter}:{}:{scope}:{client}",
        scope.len()
    )
}

//! The Redis key a request is counted under, written from the documented format so that tests
//! can find it in Redis: an oracle independent of the library's code.

/// `{prefix}:{TAG}:{limiter}:{options}:{scope length}:{scope}:{client}`, where `TAG` is the
/// documented 16-bit hash of `client` in four hex digits, `options` the limit's options
/// comma-separated (`10,60`, as the caller writes them), and a client over 64 bytes or starting
/// with `#` is written as `#` and its SHA-1 in hex.
#[must_use]
pub fn stored_key(prefix: &str, limiter: &str, opts: &str, scope: &str, client: &str) -> String {
    let tag = tag(client.as_bytes());
    let client = if client.len() <= 64 && !client.starts_with('#') {
        client.to_owned()
    } else {
        format!("#{}", sha1_smol::Sha1::from(client).digest())
    };
    format!(
        "{prefix}:{{{tag:04x}}}:{limiter}:{opts}:{}:{scope}:{client}",
        scope.len()
    )
}

/// The documented hash tag: the top 16 bits of the client's XXH3 (64-bit, no seed).
fn tag(bytes: &[u8]) -> u16 {
    (xxhash_rust::xxh3::xxh3_64(bytes) >> 48) as u16
}

/// The options' part of a stored key: `opts` comma-separated, as a key writes options with no
/// `,` or `:` in their text.
#[must_use]
pub fn opts_text(opts: &[plug_limit::Opt]) -> String {
    let texts: Vec<String> = opts.iter().map(ToString::to_string).collect();
    texts.join(",")
}

/// What the Redis at `url` counted for a programmatic check of `limiter` with `opts` (as
/// [`stored_key`] writes them) by `client`, without a scope: the counter, read directly.
pub async fn counted_at(url: &str, limiter: &str, opts: &str, client: &str) -> i64 {
    let mut conn = deadpool_redis::redis::Client::open(url)
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the test redis-server");
    deadpool_redis::redis::cmd("GET")
        .arg(stored_key("plug_limit", limiter, opts, "", client))
        .query_async::<Option<i64>>(&mut conn)
        .await
        .expect("GET of a counter")
        .unwrap_or(0)
}

//! The client key the HTTP benchmarks send (`http_load`, `route_micro`), and
//! `tower_governor`'s extractor of it: both sides of a comparison read it alike.

/// The header every benchmark request names its client in.
pub(crate) const CLIENT_HEADER: &str = "x-client";

/// `x-client`, parsed once, as a limiter keeps `key::header("x-client")`.
static CLIENT_HEADER_NAME: http::HeaderName = http::HeaderName::from_static(CLIENT_HEADER);

/// `tower_governor`'s key: the `x-client` header, as the library's `key::header` reads it (by
/// a name parsed once).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientHeader;

impl tower_governor::key_extractor::KeyExtractor for ClientHeader {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, tower_governor::GovernorError> {
        req.headers()
            .get(&CLIENT_HEADER_NAME)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or(tower_governor::GovernorError::UnableToExtractKey)
    }
}

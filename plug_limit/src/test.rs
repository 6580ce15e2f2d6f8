//! Testing an application's limits: the rate-limit headers of a response as numbers
//! ([`RateLimitHeaders`]), and how to send a request without a socket. A memory backend whose time
//! moves only when the test says so is `PlugLimit::builder(Store::memory()).clock(manual_clock)`, a
//! [`ManualClock`](crate::ManualClock). Between tests sharing one Redis,
//! [`PlugLimit::reset_all`](crate::PlugLimit::reset_all) forgets every key of a handle's prefix.
//!
//! The idiom axum's own examples teach, `Router::oneshot(request)`, sends no connection, so
//! axum has no `ConnectInfo` and the default key ([`key::peer_ip`](crate::key::peer_ip)) has
//! nothing to read: such a request is refused with `400` (see
//! [`KeyFailure`](crate::KeyFailure)). Give it the address a real client would have, as
//! `into_make_service_with_connect_info` would: insert axum's `ConnectInfo` in its extensions.
//!
//! # Example
//!
//! ```
//! use std::net::SocketAddr;
//!
//! use axum::{body::Body, extract::ConnectInfo, http::Request, routing::get, Router};
//! use plug_limit::test::RateLimitHeaders;
//! use plug_limit::{FixedWindow, ManualClock, PlugLimit, RateLimited, Store};
//! use tower::ServiceExt;
//!
//! type Limited = RateLimited<FixedWindow<2, 60>>;
//!
//! async fn hello(limited: Limited) -> (Limited, &'static str) {
//!     (limited, "hello")
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = ManualClock::new(1_700_000_000_000);
//! let limits = PlugLimit::builder(Store::memory()).clock(clock.clone()).build()?;
//! let app = Router::new().route("/", get(hello)).with_state(limits);
//! let send = |app: Router| async move {
//!     let peer = ConnectInfo(SocketAddr::from(([192, 0, 2, 1], 4000)));
//!     let request = Request::get("/").extension(peer).body(Body::empty())?;
//!     Ok::<_, Box<dyn std::error::Error>>(app.oneshot(request).await?)
//! };
//! assert_eq!(RateLimitHeaders::of(send(app.clone()).await?.headers()).remaining, Some(1));
//! assert_eq!(RateLimitHeaders::of(send(app.clone()).await?.headers()).remaining, Some(0));
//! let denied = send(app.clone()).await?;
//! assert_eq!(denied.status(), 429);
//! assert_eq!(RateLimitHeaders::of(denied.headers()).reset, Some(60));
//! clock.advance(std::time::Duration::from_secs(60));
//! assert_eq!(send(app).await?.status(), 200);
//! # Ok(())
//! # }
//! ```

use http::HeaderMap;

use crate::outcome::ietf;

/// The rate-limit headers of a response as numbers: what a client reads, in either
/// [`HeaderStyle`](crate::HeaderStyle).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimitHeaders {
    /// `x-ratelimit-limit`, as text: `token_bucket` writes a policy (`20 20;w=600;...`). In
    /// the draft-10 style, the `q` of the policy `RateLimit` names.
    pub limit: Option<String>,
    /// `x-ratelimit-remaining`, or `RateLimit`'s `r`.
    pub remaining: Option<u64>,
    /// `x-ratelimit-reset`, or `RateLimit`'s `t`, in seconds.
    pub reset: Option<u64>,
    /// `retry-after`, in seconds.
    pub retry_after: Option<u64>,
}

impl RateLimitHeaders {
    /// Reads the headers: the draft-10 fields when the response has a `RateLimit` field,
    /// else the `x-ratelimit-*` ones. An absent header, or one that is not a number where one
    /// is expected, is `None`.
    #[must_use]
    pub fn of(headers: &HeaderMap) -> Self {
        let text = |name: &str| Some(headers.get(name)?.to_str().ok()?.to_owned());
        let number = |name: &str| text(name)?.parse().ok();
        let retry_after = number("retry-after");
        if let Some(read) = ietf::read(headers) {
            return Self {
                limit: read.quota.map(|quota| quota.to_string()),
                remaining: read.remaining.and_then(|n| u64::try_from(n).ok()),
                reset: read.reset.and_then(|n| u64::try_from(n).ok()),
                retry_after,
            };
        }
        Self {
            limit: text("x-ratelimit-limit"),
            remaining: number("x-ratelimit-remaining"),
            reset: number("x-ratelimit-reset"),
            retry_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_as_numbers_and_absence_is_none() {
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-limit", "20 20;w=600".parse().unwrap());
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        headers.insert("retry-after", "not a number".parse().unwrap());
        assert_eq!(
            RateLimitHeaders::of(&headers),
            RateLimitHeaders {
                limit: Some("20 20;w=600".to_owned()),
                remaining: Some(0),
                reset: None,
                retry_after: None,
            }
        );
    }

    #[test]
    fn draft10_fields_read_as_the_same_numbers() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "ratelimit-policy",
            r#""gcra";q=10;w=60;pk=:AAECAwQFBgcICQoL:"#.parse().unwrap(),
        );
        headers.insert(
            "ratelimit",
            r#""gcra";r=0;t=6;pk=:AAECAwQFBgcICQoL:"#.parse().unwrap(),
        );
        headers.insert("retry-after", "6".parse().unwrap());
        headers.insert("x-ratelimit-remaining", "9".parse().unwrap());
        assert_eq!(
            RateLimitHeaders::of(&headers),
            RateLimitHeaders {
                limit: Some("10".to_owned()),
                remaining: Some(0),
                reset: Some(6),
                retry_after: Some(6),
            }
        );
    }
}

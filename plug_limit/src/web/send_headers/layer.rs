//! [`SendHeadersLayer`]: the rate-limit headers of every allowed request, added to its response
//! even when the handler does not return its [`RateLimited`](crate::RateLimited) value.

use tower_layer::Layer;

use super::service::SendHeaders;

/// Adds the rate-limit headers of the requests it wraps to their responses.
///
/// A [`RateLimited`](crate::RateLimited) extractor sends its headers only if the handler
/// returns it (`(limited, body)`); a handler that forgets it sends none. Under this layer the
/// extractor hands its outcome to the layer as well, and the layer adds its headers to the
/// response, leaving any header the response already has as it is. `#[rate_limit]` handlers and
/// [`RateLimitLayer`](crate::RateLimitLayer) add theirs by themselves and need no help.
///
/// Add it once, around the whole router. When several limits check one request, the headers
/// are the last one's. A [`Concurrency`](crate::Concurrency) limit's lease is held until the
/// response body ends.
///
/// # Example
///
/// ```
/// use std::net::SocketAddr;
///
/// use axum::{body::Body, extract::ConnectInfo, http::Request, routing::get, Router};
/// use plug_limit::{FixedWindow, PlugLimit, RateLimited, SendHeadersLayer};
/// use tower::ServiceExt;
///
/// // Checks the limit, and returns only the body: the layer sends the headers.
/// async fn hello(_limited: RateLimited<FixedWindow<10, 60>>) -> &'static str {
///     "hello"
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = Router::new()
///     .route("/", get(hello))
///     .with_state(PlugLimit::memory())
///     .layer(SendHeadersLayer::new());
/// let peer = ConnectInfo(SocketAddr::from(([192, 0, 2, 1], 4000)));
/// let request = Request::get("/").extension(peer).body(Body::empty())?;
/// let response = app.oneshot(request).await?;
/// assert_eq!(response.headers()["x-ratelimit-remaining"], "9");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SendHeadersLayer;

impl SendHeadersLayer {
    /// The layer.
    #[must_use]
    pub fn new() -> Self {
        Self
    }
}

impl<S> Layer<S> for SendHeadersLayer {
    type Service = SendHeaders<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SendHeaders::new(inner)
    }
}

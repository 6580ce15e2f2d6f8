//! Responders: the response a denied request gets.

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

use crate::outcome::Outcome;

/// Renders the response for a request its limiter denied.
///
/// The default, [`TooManyRequests`], answers `429 Too Many Requests` with the rate-limit
/// headers. A custom responder sees the whole [`Outcome`], including the extra values a custom
/// script returned. Any `Fn(&Outcome) -> Response` is a responder.
///
/// # Example
///
/// ```
/// use axum::response::{IntoResponse, Response};
/// use http::StatusCode;
/// use plug_limit::Outcome;
///
/// fn slow_down(outcome: &Outcome) -> Response {
///     let retry = outcome
///         .header("retry-after")
///         .and_then(|v| v.to_str().ok())
///         .unwrap_or("a few");
///     let body = format!("slow down: try again in {retry} seconds");
///     (StatusCode::TOO_MANY_REQUESTS, outcome.clone(), body).into_response()
/// }
/// # let _: &dyn plug_limit::Responder = &slow_down;
/// ```
pub trait Responder: Send + Sync + 'static {
    /// The response for a denied request.
    fn respond(&self, outcome: &Outcome) -> Response;
}

impl<F> Responder for F
where
    F: Fn(&Outcome) -> Response + Send + Sync + 'static,
{
    fn respond(&self, outcome: &Outcome) -> Response {
        self(outcome)
    }
}

/// The default responder: `429 Too Many Requests`, `text/plain` body `Too Many Requests`, and
/// the rate-limit headers.
#[derive(Debug, Clone, Copy, Default)]
pub struct TooManyRequests;

impl Responder for TooManyRequests {
    fn respond(&self, outcome: &Outcome) -> Response {
        (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            outcome.clone(),
            "Too Many Requests",
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Decision;
    use http::{HeaderName, HeaderValue};

    #[tokio::test]
    async fn default_is_429_plain_text_with_headers() {
        let outcome = Outcome::new(
            Decision::Deny,
            vec![
                (
                    HeaderName::from_static("x-ratelimit-remaining"),
                    HeaderValue::from_static("0"),
                ),
                (
                    HeaderName::from_static("retry-after"),
                    HeaderValue::from_static("7"),
                ),
            ],
        );
        let response = TooManyRequests.respond(&outcome);
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            response.headers()["content-type"],
            "text/plain; charset=utf-8"
        );
        assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
        assert_eq!(response.headers()["retry-after"], "7");
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"Too Many Requests");
    }
}

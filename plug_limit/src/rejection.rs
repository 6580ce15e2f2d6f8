//! The rejection of [`RateLimited`](crate::RateLimited): a denied request, or a check that
//! failed closed.

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

use crate::error::Error;
use crate::key::KeyError;
use crate::outcome::Outcome;

/// Why [`RateLimited`](crate::RateLimited) refused a request.
///
/// Its response is `429 Too Many Requests` with the rate-limit headers (`text/plain`, body
/// `Too Many Requests`) for a denied request, `400 Bad Request` for a request
/// without a usable key under [`KeyFailure`](crate::KeyFailure) `PeerIp` (with no peer address)
/// or `Reject`, `503 Service Unavailable` for a limiter that could not decide under
/// [`FailurePolicy::Closed`](crate::FailurePolicy::Closed), and `403 Forbidden` for a client
/// on the deny-list of the limiter's [`Rules`](crate::Rules); or what the limiter's
/// [`Hook`](crate::Hook) answered instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitRejection {
    /// The request is over its limit: the limiter's outcome, its decision and headers.
    #[error("too many requests")]
    TooManyRequests(Box<Outcome>),
    /// The request carries no usable key and its limiter's
    /// [`KeyFailure`](crate::KeyFailure) policy refuses it (`400 Bad Request`).
    #[error("no rate limit key: {0}")]
    KeyRejected(#[source] KeyError),
    /// The limiter could not decide and its failure policy is closed.
    #[error("rate limiter unavailable: {0}")]
    Unavailable(#[source] Error),
    /// The client is on the limiter's deny-list, or has no address while a deny-list is set
    /// (`403 Forbidden`, `text/plain`, no rate-limit headers): see [`Rules`](crate::Rules).
    /// Answered locally, without a backend call, and refused even in shadow mode.
    #[error("client refused by the deny-list")]
    Forbidden,
    /// A [`Hook`](crate::Hook) answered the request with a response of its own
    /// ([`Action::Respond`](crate::Action::Respond)).
    // Boxed: a response is large, and every check's result carries this enum.
    #[error("answered by the limiter's hook")]
    Answered(Box<Response>),
}

impl RateLimitRejection {
    pub(crate) fn denied(outcome: Outcome) -> Self {
        Self::TooManyRequests(Box::new(outcome))
    }

    pub(crate) fn answered(response: Response) -> Self {
        Self::Answered(Box::new(response))
    }

    /// The default status: `429` for a denied request, `400` for a request without a key,
    /// `503` for an unavailable limiter, `403` for a client on the deny-list.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Self::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::KeyRejected(_) => StatusCode::BAD_REQUEST,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::Answered(response) => response.status(),
        }
    }

    /// The default body text (empty for a hook's answer, which has its own body).
    #[must_use]
    pub fn body_text(&self) -> &'static str {
        match self {
            Self::TooManyRequests(_) => "Too Many Requests",
            Self::KeyRejected(_) => "Bad Request",
            Self::Unavailable(_) => "Rate limiter unavailable",
            Self::Forbidden => "Forbidden",
            Self::Answered(_) => "",
        }
    }

    /// The limiter's outcome, for a denied request.
    #[must_use]
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            Self::TooManyRequests(outcome) => Some(outcome),
            Self::KeyRejected(_) | Self::Unavailable(_) | Self::Forbidden | Self::Answered(_) => {
                None
            }
        }
    }
}

impl IntoResponse for RateLimitRejection {
    fn into_response(self) -> Response {
        match self {
            Self::TooManyRequests(outcome) => (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                *outcome,
                "Too Many Requests",
            )
                .into_response(),
            Self::Answered(response) => *response,
            other @ (Self::KeyRejected(_) | Self::Unavailable(_) | Self::Forbidden) => {
                (other.status(), other.body_text()).into_response()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Decision;
    use http::{HeaderName, HeaderValue};

    #[tokio::test]
    async fn unavailable_is_503() {
        let rejection =
            RateLimitRejection::Unavailable(Error::Timeout(std::time::Duration::from_millis(5)));
        assert_eq!(
            rejection.to_string(),
            "rate limiter unavailable: rate limit check timed out after 5ms"
        );
        let response = rejection.into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(response.into_body(), 64)
            .await
            .unwrap();
        assert_eq!(&body[..], b"Rate limiter unavailable");
    }

    #[tokio::test]
    async fn denied_is_429_plain_text_with_the_headers() {
        let outcome = Outcome::new(
            Decision::Deny,
            vec![(
                HeaderName::from_static("x-ratelimit-remaining"),
                HeaderValue::from_static("0"),
            )],
        );
        let rejection = RateLimitRejection::denied(outcome);
        assert_eq!(rejection.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            rejection
                .outcome()
                .unwrap()
                .header("x-ratelimit-remaining")
                .unwrap(),
            "0"
        );
        let response = rejection.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["x-ratelimit-remaining"], "0");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        let body = axum::body::to_bytes(response.into_body(), 64)
            .await
            .unwrap();
        assert_eq!(&body[..], b"Too Many Requests");
    }
}

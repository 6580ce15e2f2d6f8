//! gRPC answers: what [`RateLimitLayer`](crate::RateLimitLayer) refuses a gRPC call with, a
//! gRPC status rather than an HTTP error a gRPC client could only read as a broken call.
//!
//! Only the shape of a refusal hangs on the request's `content-type`, which the client writes:
//! the key, the scope and the decision were settled before it is read, so a client that calls
//! itself gRPC (or stops doing so) is counted exactly as before.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};

use crate::rejection::RateLimitRejection;

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC: &[u8] = b"application/grpc";

/// `rejection` as the request that met it expects it: a gRPC status for a gRPC call (see
/// [`to_grpc`]), the rejection's own HTTP response otherwise.
pub(crate) fn refuse(request: &HeaderMap, rejection: RateLimitRejection) -> Response {
    if !is_grpc(request) {
        return rejection.into_response();
    }
    let message = rejection.body_text();
    let response = rejection.into_response();
    if response.headers().contains_key(GRPC_STATUS) {
        // A hook's answer that is already a gRPC status: the hook said what it meant.
        return response;
    }
    let message = match message {
        // A hook's answer has no text of ours: its status's reason stands for it.
        "" => response.status().canonical_reason().unwrap_or("Unknown"),
        text => text,
    };
    to_grpc(response, message)
}

/// Whether a request is a gRPC call: its `content-type` starts with `application/grpc`
/// (`application/grpc`, `application/grpc+proto`, gRPC-Web's `application/grpc-web`), in any
/// case, as media types are compared.
pub(crate) fn is_grpc(request: &HeaderMap) -> bool {
    request.get(header::CONTENT_TYPE).is_some_and(|value| {
        value
            .as_bytes()
            .get(..GRPC.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(GRPC))
    })
}

/// A refusal made for HTTP as a "trailers-only" gRPC response: `200 OK`, no body, and in the
/// headers `content-type: application/grpc`, the `grpc-status` its HTTP status stands for
/// ([`code`]), `message` as `grpc-message`, and every header it had but its content's (the
/// rate-limit headers, a hook's own) as metadata.
fn to_grpc(response: Response, message: &str) -> Response {
    let (mut parts, _body) = response.into_parts();
    let code = code(parts.status);
    let headers = &mut parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(GRPC_STATUS, HeaderValue::from(code));
    if let Ok(message) = HeaderValue::from_str(&percent_encoded(message)) {
        headers.insert(GRPC_MESSAGE, message);
    }
    parts.status = StatusCode::OK;
    Response::from_parts(parts, Body::empty())
}

/// The gRPC status code an HTTP refusal stands for: `RESOURCE_EXHAUSTED` (8) for `429`,
/// `UNAVAILABLE` (14) for `503`, `PERMISSION_DENIED` (7) for `403`, `INVALID_ARGUMENT` (3) for
/// `400`, `UNAUTHENTICATED` (16) for `401`, and `UNKNOWN` (2) for any other (a hook's own).
/// Never `OK`: the service did not run.
fn code(status: StatusCode) -> u16 {
    match status {
        StatusCode::TOO_MANY_REQUESTS => 8,
        StatusCode::SERVICE_UNAVAILABLE => 14,
        StatusCode::FORBIDDEN => 7,
        StatusCode::BAD_REQUEST => 3,
        StatusCode::UNAUTHORIZED => 16,
        _ => 2,
    }
}

/// `message` as `grpc-message` carries it: every byte outside `0x20..=0x7E`, and `%`, as
/// `%XX` (the gRPC over HTTP/2 specification's percent-encoding).
fn percent_encoded(message: &str) -> String {
    use std::fmt::Write;
    let mut encoded = String::with_capacity(message.len());
    for &byte in message.as_bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            encoded.push(char::from(byte));
        } else {
            // Writing to a `String` cannot fail.
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_type: &'static str) -> HeaderMap {
        HeaderMap::from_iter([(header::CONTENT_TYPE, HeaderValue::from_static(content_type))])
    }

    #[test]
    fn grpc_calls_are_told_by_their_content_type() {
        assert!(is_grpc(&headers("application/grpc")));
        assert!(is_grpc(&headers("application/grpc+proto")));
        assert!(is_grpc(&headers("Application/GRPC")));
        assert!(is_grpc(&headers("application/grpc-web")));
        assert!(!is_grpc(&headers("application/json")));
        assert!(!is_grpc(&headers("application/grp")));
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(percent_encoded("Too Many Requests"), "Too Many Requests");
        assert_eq!(percent_encoded("100% spent\n"), "100%25 spent%0A");
        assert_eq!(percent_encoded("épuisé"), "%C3%A9puis%C3%A9");
    }

    #[test]
    fn every_refusal_has_a_code_and_never_ok() {
        assert_eq!(code(StatusCode::TOO_MANY_REQUESTS), 8);
        assert_eq!(code(StatusCode::SERVICE_UNAVAILABLE), 14);
        assert_eq!(code(StatusCode::FORBIDDEN), 7);
        assert_eq!(code(StatusCode::BAD_REQUEST), 3);
        assert_eq!(code(StatusCode::UNAUTHORIZED), 16);
        assert_eq!(code(StatusCode::OK), 2);
        assert_eq!(code(StatusCode::PAYMENT_REQUIRED), 2);
    }
}

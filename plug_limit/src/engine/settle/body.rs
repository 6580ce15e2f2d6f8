//! The response body that holds what its request owes until its last byte is sent.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Frame, SizeHint};

use crate::outcome::HeldDebt;

/// `response`, holding what its request owes until its body ends (or is dropped unfinished),
/// and telling it the response's status.
pub(crate) fn hold(response: Response, debt: Option<HeldDebt>) -> Response {
    match debt {
        Some(debt) => {
            debt.responded(response.status());
            response.map(|body| {
                Body::new(Held {
                    body,
                    debt: Some(debt),
                })
            })
        }
        None => response,
    }
}

/// A response body that holds what its request owes while it streams.
struct Held {
    body: Body,
    debt: Option<HeldDebt>,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            // The body ended: its request is no longer in flight, and what it used is known.
            self.debt = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

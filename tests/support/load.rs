//! An open-loop load generator: requests sent on a clock, not one after another.
//!
//! A closed-loop client (send, wait for the answer, send the next) slows down as the service
//! does, so it never builds the queue a real flood does: its requests wait in its own loop,
//! unseen, and a stall looks like fewer requests rather than slow ones. Here request `i` leaves
//! at `i / per_second` whatever became of the earlier ones, each in a task of its own, and its
//! latency counts from when it was due, so time spent queued behind a slow backend shows.

use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::requests::send;

/// One request of an open-loop run.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Which app of the slice sent it.
    pub instance: usize,
    /// The client it was sent as (its `x-client`).
    pub client: String,
    /// Its scheduled send time, from the run's start.
    pub at: Duration,
    /// From its scheduled send time to its full reply, body included.
    pub latency: Duration,
    /// The reply's status.
    pub status: http::StatusCode,
    /// Whether the reply carried an `x-ratelimit-limit` or `ratelimit-policy` header: a
    /// request the limit decided. A 200 without either was let through by a failure policy.
    pub limited: bool,
}

/// Sends `GET uri` with `x-client: client` through `apps` (no socket), `per_second` requests a
/// second for `for_how_long`, and returns every request's result, sorted by [`Sent::at`].
///
/// Request `i` is due at `i / per_second` from the start, goes to `apps[i % apps.len()]`, and is
/// sent at its due time in a task of its own: a slow reply never delays later requests. The
/// run sends every request due before `for_how_long`, then waits for all their replies.
///
/// Needs a Tokio runtime with time enabled. Dropping the returned future aborts the requests
/// still running.
///
/// # Panics
///
/// When `apps` is empty, `per_second` is 0, or a request panics (its panic is resumed here).
pub async fn open_loop(
    apps: &[axum::Router],
    uri: &str,
    client: &str,
    per_second: u32,
    for_how_long: Duration,
) -> Vec<Sent> {
    open_loop_as(apps, uri, |_| client.to_owned(), per_second, for_how_long).await
}

/// [`open_loop`], request `i` sent as client `client(i)`.
///
/// # Panics
///
/// As [`open_loop`].
pub async fn open_loop_as(
    apps: &[axum::Router],
    uri: &str,
    client: impl Fn(u32) -> String,
    per_second: u32,
    for_how_long: Duration,
) -> Vec<Sent> {
    assert!(!apps.is_empty(), "an open-loop run needs an app");
    assert!(per_second > 0, "an open-loop run needs a positive rate");
    let start = Instant::now();
    let mut requests = JoinSet::new();
    for i in 0_u32.. {
        let at = Duration::from_secs(1) * i / per_second;
        if at >= for_how_long {
            break;
        }
        let instance = i as usize % apps.len();
        let app = apps[instance].clone();
        let client = client(i);
        let request = http::Request::get(uri)
            .header("x-client", &client)
            .body(axum::body::Body::empty())
            .expect("request");
        requests.spawn(async move {
            let due = start + at;
            tokio::time::sleep_until(due).await;
            let reply = send(&app, request).await;
            Sent {
                instance,
                client,
                at,
                latency: due.elapsed(),
                status: reply.status,
                limited: reply.headers.contains_key("x-ratelimit-limit")
                    || reply.headers.contains_key("ratelimit-policy"),
            }
        });
    }
    let mut sent = Vec::with_capacity(requests.len());
    while let Some(done) = requests.join_next().await {
        match done {
            Ok(one) => sent.push(one),
            Err(err) => match err.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(err) => panic!("an open-loop request did not finish: {err}"),
            },
        }
    }
    sent.sort_by_key(|one| one.at);
    sent
}

//! Responses whose bodies stream until the test lets them end, and waits for what happens after
//! a response: what a request holds or owes until its body ends is seen while it streams, and
//! what it gives back once it ended is awaited.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http;
use axum::response::Response;
use plug_limit::{ManualClock, key};
use plug_limit_tests::unique_prefix;
use tokio::sync::oneshot;
use tower::ServiceExt;

/// The gates of the bodies a test holds open: the next response's body sends one chunk,
/// `done`, when its gate opens, then ends.
#[derive(Clone, Default)]
pub(crate) struct Gates(Arc<Mutex<VecDeque<oneshot::Receiver<()>>>>);

impl Gates {
    /// The gate of the next response's body.
    pub(crate) fn next(&self) -> oneshot::Sender<()> {
        let (open, gate) = oneshot::channel();
        self.0.lock().unwrap().push_back(gate);
        open
    }

    /// Forgets the gates no response took.
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap().clear();
    }

    /// A body that waits for the next gate; an empty body when the test set none.
    pub(crate) fn body(&self) -> Body {
        let Some(gate) = self.0.lock().unwrap().pop_front() else {
            return Body::empty();
        };
        let stream = futures_util::stream::unfold(Some(gate), |gate| async move {
            gate?.await.ok()?;
            Some((Ok::<_, std::io::Error>(Bytes::from_static(b"done")), None))
        });
        Body::from_stream(stream)
    }
}

/// Starts `GET path` from `x-client: client` with `headers`: the response, its body unread.
pub(crate) async fn start(
    app: &Router,
    path: &str,
    client: &str,
    headers: &[(&str, &str)],
) -> Response {
    let mut request = http::Request::get(path).header("x-client", client);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    app.clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

/// Opens `gate`, if the body has one, and reads `response`'s body to its end.
pub(crate) async fn finish(response: Response, gate: Option<oneshot::Sender<()>>) {
    if let Some(gate) = gate {
        gate.send(()).unwrap();
    }
    axum::body::to_bytes(response.into_body(), 1024)
        .await
        .unwrap();
}

/// Limits keyed by the `x-client` header and timed by `clock`, under a prefix of `test`'s own.
pub(crate) fn configured(
    clock: &ManualClock,
    test: &'static str,
) -> impl Fn(plug_limit::Builder) -> plug_limit::Builder {
    let clock = clock.clone();
    move |builder| {
        builder
            .prefix(unique_prefix(test))
            .key(key::header("x-client"))
            .clock(clock.clone())
    }
}

/// How long a test waits for what a response sends after it ends; only a broken release or
/// settlement makes it wait that long.
const PATIENCE: Duration = Duration::from_secs(5);

/// Waits until `check` holds; fails the test after [`PATIENCE`].
pub(crate) async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

//! Requests sent through an app without a socket, and what a test reads of the response.

/// What a test reads of a response.
#[derive(Debug)]
pub struct Reply {
    /// The status.
    pub status: http::StatusCode,
    /// The headers.
    pub headers: http::HeaderMap,
    /// The body, as text.
    pub body: String,
}

impl Reply {
    /// A header's value as text, `None` when absent.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("visible ASCII header"))
    }

    /// The `x-ratelimit-limit`, `x-ratelimit-reset`, `x-ratelimit-remaining` and
    /// `retry-after` values, `None` where absent.
    #[must_use]
    pub fn rate_headers(&self) -> [Option<&str>; 4] {
        [
            self.header("x-ratelimit-limit"),
            self.header("x-ratelimit-reset"),
            self.header("x-ratelimit-remaining"),
            self.header("retry-after"),
        ]
    }
}

/// `request` from a client at `peer`, as `into_make_service_with_connect_info` would give it.
#[must_use]
pub fn with_peer<B>(
    mut request: http::Request<B>,
    peer: impl Into<std::net::SocketAddr>,
) -> http::Request<B> {
    request
        .extensions_mut()
        .insert(axum::extract::ConnectInfo(peer.into()));
    request
}

/// Sends `GET uri` with `x-client: client` through `app` (no socket) and reads the reply.
pub async fn get(app: &axum::Router, uri: &str, client: &str) -> Reply {
    let request = http::Request::get(uri)
        .header("x-client", client)
        .body(axum::body::Body::empty())
        .expect("request");
    send(app, request).await
}

/// Sends `request` through `app` (no socket) and reads the reply.
pub async fn send(app: &axum::Router, request: http::Request<axum::body::Body>) -> Reply {
    use tower::ServiceExt;
    let response = app
        .clone()
        .oneshot(request)
        .await
        .expect("infallible router");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("read body");
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).expect("utf-8 body"),
    }
}

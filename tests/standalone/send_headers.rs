//! `SendHeadersLayer`: an allowed request's headers reach its response even when the handler
//! does not return its `RateLimited`.

use axum::{Router, routing::get};
use plug_limit::{FixedWindow, PlugLimit, RateLimited, SendHeadersLayer, Store, key};
use plug_limit_tests::{Reply, get as send_get};

type Two = RateLimited<FixedWindow<2, 60>>;

/// Checks the limit and forgets to return it.
async fn forgetful(_limited: Two) -> &'static str {
    "forgot"
}

async fn returns_it(limited: Two) -> (Two, &'static str) {
    (limited, "returned")
}

fn app(with_layer: bool) -> Router {
    let limits = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/forgetful", get(forgetful))
        .route("/returns", get(returns_it))
        .with_state(limits);
    if with_layer {
        app.layer(SendHeadersLayer::new())
    } else {
        app
    }
}

fn seen(reply: &Reply) -> (u16, [Option<&str>; 4], usize) {
    let count = reply
        .headers
        .get_all("x-ratelimit-remaining")
        .iter()
        .count();
    (reply.status.as_u16(), reply.rate_headers(), count)
}

#[tokio::test]
async fn the_layer_sends_what_a_handler_forgets_and_nothing_twice() {
    let app = app(true);
    let first = send_get(&app, "/forgetful", "c").await;
    assert_eq!(
        seen(&first),
        (200, [Some("2"), Some("60"), Some("1"), None], 1)
    );
    let returned = send_get(&app, "/returns", "c").await;
    assert_eq!(
        seen(&returned),
        (200, [Some("2"), Some("60"), Some("1"), None], 1)
    );
    let second = send_get(&app, "/forgetful", "c").await;
    assert_eq!(
        seen(&second),
        (200, [Some("2"), Some("60"), Some("0"), None], 1)
    );
    let denied = send_get(&app, "/forgetful", "c").await;
    assert_eq!(
        seen(&denied),
        (429, [Some("2"), Some("60"), Some("0"), Some("60")], 1)
    );
}

#[tokio::test]
async fn without_the_layer_a_forgetful_handler_sends_none() {
    let app = app(false);
    let reply = send_get(&app, "/forgetful", "c").await;
    assert_eq!(seen(&reply), (200, [None, None, None, None], 0));
}

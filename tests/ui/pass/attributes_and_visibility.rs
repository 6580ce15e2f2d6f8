#![deny(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unsafe_code
)]
//! A crate whose lints the expansion must satisfy.

use axum::Router;
use axum::extract::FromRef;
use axum::routing::get;
use plug_limit::PlugLimit;

/// The state.
#[derive(Clone, Debug, FromRef)]
pub struct AppState {
    limits: PlugLimit,
}

/// Handlers in their own module, named from outside it.
pub mod api {
    use plug_limit::rate_limit;

    /// A documented public handler.
    #[rate_limit(opts = [10, 60])]
    #[allow(clippy::unused_async)]
    pub async fn public() -> &'static str {
        #![allow(unused_variables)]
        let unused = 1;
        "public"
    }

    #[rate_limit(opts = [10, 60])]
    pub(crate) async fn crate_visible() -> &'static str {
        "crate"
    }

    #[rate_limit(limiter = "custom", opts = [1])]
    pub(super) async fn custom() -> &'static str {
        "custom"
    }

    /// Compiled out after expansion: the limit and its key expression go with it.
    #[rate_limit(opts = [10, 60], key = does_not_exist)]
    #[cfg(any())]
    pub async fn compiled_out() {}

    /// A raw identifier.
    #[rate_limit(opts = [10, 60])]
    pub async fn r#type() -> &'static str {
        "raw identifier"
    }
}

fn app(limits: PlugLimit) -> Router {
    // A handler declared inside a function.
    #[plug_limit::rate_limit(opts = [1, 1])]
    async fn local() {}

    Router::new()
        .route("/public", get(api::public))
        .route("/crate", get(api::crate_visible))
        .route("/custom", get(api::custom))
        .route("/type", get(api::r#type))
        .route("/local", get(local))
        .with_state(AppState { limits })
}

fn main() {
    let _: fn(PlugLimit) -> Router = app;
}

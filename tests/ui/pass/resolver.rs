use axum::Router;
use axum::extract::FromRef;
use axum::http::request::Parts;
use axum::routing::get;
use plug_limit::{PlugLimit, ResolveLimit, RuntimeLimit, rate_limit};

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
    plan: RuntimeLimit,
}

mod plans {
    pub struct PlanLimits;
}

impl ResolveLimit<AppState> for plans::PlanLimits {
    async fn resolve(_parts: &mut Parts, state: &AppState) -> Option<RuntimeLimit> {
        Some(state.plan.clone())
    }
}

#[rate_limit(resolver = plans::PlanLimits)]
async fn search(axum::extract::State(_plan): axum::extract::State<RuntimeLimit>) -> &'static str {
    "results"
}

fn app(limits: PlugLimit, plan: RuntimeLimit) -> Router {
    Router::new()
        .route("/search", get(search))
        .with_state(AppState { limits, plan })
}

fn main() {
    let _: fn(PlugLimit, RuntimeLimit) -> Router = app;
}

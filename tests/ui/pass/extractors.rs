use axum::extract::{FromRef, Path, Query, State};
use axum::routing::post;
use axum::{Json, Router};
use plug_limit::{PlugLimit, rate_limit};
use serde::Deserialize;

#[derive(Clone, FromRef)]
struct AppState {
    limits: PlugLimit,
    db: Db,
}

#[derive(Clone)]
struct Db;

#[derive(Deserialize)]
struct Page {
    page: u32,
}

#[derive(Deserialize)]
struct Comment {
    text: String,
}

// `State`, `Path` and `Query` read the parts and `Json` the body, which is why it comes last;
// the inserted rate limit reads the parts, so first place is always legal.
#[rate_limit(limiter = "token_bucket", opts = [20, 600, 5])]
async fn comment(
    State(Db): State<Db>,
    Path((post, id)): Path<(u32, u32)>,
    Query(Page { page }): Query<Page>,
    mut other: State<AppState>,
    Json(comment): Json<Comment>,
) -> String {
    other.0.db = Db;
    format!("{post}/{id}/{page}: {}", comment.text)
}

fn app(state: AppState) -> Router {
    Router::new()
        .route("/posts/{post}/comments/{id}", post(comment))
        .with_state(state)
}

fn main() {
    let _: fn(AppState) -> Router = app;
}

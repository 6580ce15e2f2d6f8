//! The hand-written checks: a built-in script called by hand with `EVALSHA`, on a shared
//! connection or after a pool checkout per request, to frame what the library adds.
//!
//! The keys are the harness's own (`bench:evalsha:{client}`): a check needs one key per client,
//! and the library's key format is its internal detail, free to change under the benchmark.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use deadpool_redis::redis::aio::{ConnectionLike, MultiplexedConnection};
use deadpool_redis::redis::{self, Script};
use deadpool_redis::{Connection, Pool};
use http::{HeaderName, HeaderValue, StatusCode};

use crate::client_header::CLIENT_HEADER;
use crate::{BoxError, LIMIT, WINDOW};

/// A built-in script called by hand, with what the library sends for the same limiter: one
/// per script a Redis limiter variant runs, so each is measured against its own script.
#[derive(Debug)]
pub(crate) struct Check {
    script: Script,
    /// `ARGV`: the limiter's options, as its `Limit::OPTS` lists them. Cost 1 and Redis' own
    /// clock are the scripts' defaults, so the library sends nothing more.
    opts: &'static [u32],
}

pub(crate) static FIXED_WINDOW_CHECK: LazyLock<Check> = LazyLock::new(|| Check {
    script: Script::new(include_str!("../../lua/fixed_window.lua")),
    opts: &[LIMIT, WINDOW],
});

pub(crate) static TOKEN_BUCKET_CHECK: LazyLock<Check> = LazyLock::new(|| Check {
    script: Script::new(include_str!("../../lua/token_bucket.lua")),
    opts: &[LIMIT, WINDOW, LIMIT],
});

pub(crate) static GCRA_CHECK: LazyLock<Check> = LazyLock::new(|| Check {
    script: Script::new(include_str!("../../lua/gcra.lua")),
    opts: &[LIMIT, WINDOW, LIMIT],
});

/// The state of a hand-written check: one connection shared by every request, and the script
/// it runs.
#[derive(Clone)]
struct Handwritten {
    conn: MultiplexedConnection,
    check: &'static Check,
}

async fn evalsha_shared(
    State(Handwritten { mut conn, check }): State<Handwritten>,
    request: Request,
) -> Response {
    match key_of(&request) {
        Some(key) => evalsha(&mut conn, check, key).await,
        None => StatusCode::BAD_REQUEST.into_response(),
    }
}

pub(crate) async fn evalsha_pool_get(State(pool): State<Pool>, request: Request) -> Response {
    let check = &*FIXED_WINDOW_CHECK;
    let Some(key) = key_of(&request) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match pool.get().await {
        Ok(mut conn) => evalsha(&mut conn, check, key).await,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// The check's key for this request: one per client, as the library keeps one per client. Each
/// variant starts from an empty Redis, so the three scripts never meet on a key.
fn key_of(request: &Request) -> Option<String> {
    let client = request.headers().get(CLIENT_HEADER)?.to_str().ok()?;
    Some(format!("bench:evalsha:{client}"))
}

/// The built-ins' headers, in the order of their reply's values.
const REPLY_HEADERS: [&str; 4] = [
    "x-ratelimit-limit",
    "x-ratelimit-reset",
    "x-ratelimit-remaining",
    "retry-after",
];

/// A decision written by hand: the same script, options and headers as the library's, with
/// nothing around them. The values are read as a list, since `fixed_window.lua` answers
/// three and the others a fourth (`retry-after`) when it applies.
async fn evalsha(conn: &mut impl ConnectionLike, check: &Check, key: String) -> Response {
    let mut invocation = check.script.key(key);
    for &opt in check.opts {
        invocation.arg(opt);
    }
    let reply: redis::RedisResult<(String, Vec<String>)> = invocation.invoke_async(conn).await;
    let Ok((decision, values)) = reply else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    // More values than headers is a script this handler does not know: not an answer to count.
    if values.len() > REPLY_HEADERS.len() {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let mut response = if decision == "allow" {
        "ok".into_response()
    } else {
        StatusCode::TOO_MANY_REQUESTS.into_response()
    };
    for (name, value) in REPLY_HEADERS.into_iter().zip(values) {
        let Ok(value) = HeaderValue::try_from(value) else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        response
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
    response
}

/// A hand-written check of `check`'s script on one connection taken out of a pool, as the
/// library's own shared connection is.
pub(crate) async fn handwritten(
    redis_url: &str,
    check: &'static Check,
) -> Result<Router, BoxError> {
    let pool = plug_limit_tests::pool(redis_url);
    let conn = Connection::take(pool.get().await?);
    Ok(Router::new()
        .route("/", get(evalsha_shared))
        .with_state(Handwritten { conn, check }))
}

//! The app each variant serves on `GET /`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use http::HeaderValue;
use plug_limit::key::KeyExtractor;
use plug_limit::{
    FailurePolicy, FixedWindow, Gcra, Limit, Limiter, LocalBatches, Opt, PlugLimit, RateLimited,
    Store, TokenBucket,
};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

use crate::client_header::{CLIENT_HEADER, ClientHeader};
use crate::evalsha::{
    FIXED_WINDOW_CHECK, GCRA_CHECK, TOKEN_BUCKET_CHECK, evalsha_pool_get, handwritten,
};
use crate::variants::Variant;
use crate::{BoxError, LIMIT, WINDOW};

type FixedWindowLimited = RateLimited<FixedWindow<LIMIT, WINDOW>>;
type TokenBucketLimited = RateLimited<TokenBucket<LIMIT, WINDOW, LIMIT>>;
type GcraLimited = RateLimited<Gcra<LIMIT, WINDOW, LIMIT>>;
/// Every client together, never reached.
struct Everyone;

impl Limit for Everyone {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(LIMIT as i64), Opt::Int(WINDOW as i64)];
    const SCOPE: Option<&'static str> = Some("everyone");
    const KEY: Option<&'static dyn KeyExtractor> = Some(&plug_limit::key::global());
}

/// [`Everyone`] alone: one hot key for every request.
type GlobalLimited = RateLimited<Everyone>;

/// [`Everyone`]'s fixed window with local batches: registered as `global_batched`.
struct EveryoneBatched;

impl Limit for EveryoneBatched {
    const LIMITER: &'static str = "global_batched";
    const OPTS: &'static [Opt] = Everyone::OPTS;
    const SCOPE: Option<&'static str> = Everyone::SCOPE;
    const KEY: Option<&'static dyn KeyExtractor> = Everyone::KEY;
}

type GlobalBatchedLimited = RateLimited<EveryoneBatched>;

/// The largest batch of `global_batched`: at its rate, a reservation every few milliseconds.
const BATCH_MAX: u32 = 1_000;

/// Three stacked limits, decided in one `EVALSHA`: the fixed window of `fixed_window`, a token
/// bucket per client, and one fixed window for everyone.
type Stacked3Limited = RateLimited<(
    FixedWindow<LIMIT, WINDOW>,
    TokenBucket<LIMIT, WINDOW, LIMIT>,
    Everyone,
)>;

/// One request an hour: after the first, the window's remaining hour is spent denied.
type FloodLimited = RateLimited<FixedWindow<1, WINDOW>>;

async fn bare() -> &'static str {
    "ok"
}

/// `bare` plus the three rate-limit headers, made per request as cheaply as honestly possible:
/// the floor of any limiter that sends them, where `bare` is the floor of one that does not.
async fn bare_headers(State(served): State<Arc<AtomicU64>>) -> impl IntoResponse {
    let n = served.fetch_add(1, Ordering::Relaxed) + 1;
    let limit = u64::from(LIMIT);
    (
        [
            ("x-ratelimit-limit", HeaderValue::from(limit)),
            ("x-ratelimit-reset", HeaderValue::from(u64::from(WINDOW))),
            (
                "x-ratelimit-remaining",
                HeaderValue::from(limit.saturating_sub(n)),
            ),
        ],
        "ok",
    )
}

async fn fixed_window(limited: FixedWindowLimited) -> (FixedWindowLimited, &'static str) {
    (limited, "ok")
}

async fn global(limited: GlobalLimited) -> (GlobalLimited, &'static str) {
    (limited, "ok")
}

async fn global_batched(limited: GlobalBatchedLimited) -> (GlobalBatchedLimited, &'static str) {
    (limited, "ok")
}

async fn stacked_3(limited: Stacked3Limited) -> (Stacked3Limited, &'static str) {
    (limited, "ok")
}

/// `FixedWindow<LIMIT, WINDOW>` (the same limiter, options and key) under a type of its own:
/// `apart_3`'s first extractor is compiled apart from `memory`'s, which sharing it would
/// compile differently (its extraction no longer inlined into `memory`'s handler: 30 more
/// instructions a request there, with nothing changed in the library).
struct FixedWindowApart;

impl Limit for FixedWindowApart {
    const LIMITER: &'static str = <FixedWindow<LIMIT, WINDOW> as Limit>::LIMITER;
    const OPTS: &'static [Opt] = <FixedWindow<LIMIT, WINDOW> as Limit>::OPTS;
}

type FixedWindowApartLimited = RateLimited<FixedWindowApart>;

/// `stacked_3`'s three limits checked one after another, each by an extractor of its own:
/// what a stack of them is measured against. The first sends its headers, as a stack sends
/// one limit's.
async fn apart_3(
    first: FixedWindowApartLimited,
    _second: TokenBucketLimited,
    _third: GlobalLimited,
) -> (FixedWindowApartLimited, &'static str) {
    (first, "ok")
}

async fn token_bucket(limited: TokenBucketLimited) -> (TokenBucketLimited, &'static str) {
    (limited, "ok")
}

async fn gcra(limited: GcraLimited) -> (GcraLimited, &'static str) {
    (limited, "ok")
}

/// Checked, its headers made and left out of the response: the side of the pair without
/// headers that `tower_governor_no_headers` is compared with.
async fn fixed_window_no_headers(_limited: FixedWindowLimited) -> &'static str {
    "ok"
}

async fn deny_flood(limited: FloodLimited) -> (FloodLimited, &'static str) {
    (limited, "ok")
}
/// The `tower_governor` layer keyed by `x-client` around `bare`, with its headers or without
/// (the two are layers of different types).
fn governor(headers: bool) -> Result<Router, BoxError> {
    // One cell a nanosecond with a burst of LIMIT: never reached, like the others.
    let mut config = GovernorConfigBuilder::default();
    let mut config = config
        .per_nanosecond(1)
        .burst_size(LIMIT)
        .key_extractor(ClientHeader);
    let route = Router::new().route("/", get(bare));
    let invalid = "tower_governor: invalid quota";
    Ok(if headers {
        route.layer(GovernorLayer::new(
            config.use_headers().finish().ok_or(invalid)?,
        ))
    } else {
        route.layer(GovernorLayer::new(config.finish().ok_or(invalid)?))
    })
}

/// The memory backend keyed by `x-client`; a failed check answers 503, which is not counted.
fn memory() -> Result<PlugLimit, BoxError> {
    Ok(PlugLimit::builder(Store::memory())
        .key(plug_limit::key::header(CLIENT_HEADER))
        .on_failure(FailurePolicy::Closed)
        .build()?)
}

pub(crate) async fn app(variant: Variant, redis_url: &str) -> Result<Router, BoxError> {
    let limits = || {
        PlugLimit::builder(plug_limit_tests::pool(redis_url))
            .key(plug_limit::key::header(CLIENT_HEADER))
            // A failed check answers 503, which is not counted, instead of a fast 200.
            .on_failure(FailurePolicy::Closed)
    };
    Ok(match variant {
        Variant::Bare => Router::new().route("/", get(bare)),
        Variant::BareHeaders => Router::new()
            .route("/", get(bare_headers))
            .with_state(Arc::new(AtomicU64::new(0))),
        Variant::FixedWindow => Router::new()
            .route("/", get(fixed_window))
            .with_state(limits().build()?),
        Variant::Stacked3 => Router::new()
            .route("/", get(stacked_3))
            .with_state(limits().build()?),
        Variant::GlobalFixedWindow => Router::new()
            .route("/", get(global))
            .with_state(limits().build()?),
        Variant::GlobalBatched => {
            let batched = Limiter::fixed_window().local_batches(LocalBatches::new(BATCH_MAX));
            Router::new()
                .route("/", get(global_batched))
                .with_state(limits().limiter("global_batched", batched).build()?)
        }
        Variant::TokenBucket => Router::new()
            .route("/", get(token_bucket))
            .with_state(limits().build()?),
        Variant::Gcra => Router::new()
            .route("/", get(gcra))
            .with_state(limits().build()?),
        Variant::EvalshaMultiplexed => handwritten(redis_url, &FIXED_WINDOW_CHECK).await?,
        Variant::EvalshaTokenBucket => handwritten(redis_url, &TOKEN_BUCKET_CHECK).await?,
        Variant::EvalshaGcra => handwritten(redis_url, &GCRA_CHECK).await?,
        Variant::EvalshaPoolGet => Router::new()
            .route("/", get(evalsha_pool_get))
            .with_state(plug_limit_tests::pool(redis_url)),
        Variant::TowerGovernor => governor(true)?,
        Variant::TowerGovernorNoHeaders => governor(false)?,
        Variant::Memory => Router::new()
            .route("/", get(fixed_window))
            .with_state(memory()?),
        Variant::MemoryStacked3 => Router::new()
            .route("/", get(stacked_3))
            .with_state(memory()?),
        Variant::MemoryApart3 => Router::new().route("/", get(apart_3)).with_state(memory()?),
        Variant::MemoryNoHeaders => Router::new()
            .route("/", get(fixed_window_no_headers))
            .with_state(memory()?),
        Variant::DenyFlood => Router::new()
            .route("/", get(deny_flood))
            .with_state(limits().deny_cache(true).build()?),
    })
}

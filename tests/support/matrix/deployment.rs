//! The apps of a run: `instances` handles on one store, each its own pool, breaker and memory,
//! serving one limited route as the plan's mode asks; and what the store holds once it is over.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use plug_limit::{
    CircuitBreaker, FailurePolicy, Limit, Limiter, LocalBatches, Opt, PlugLimit, RateLimitLayer,
    RuntimeLimit, Store, Usage, key,
};

use super::plan::{FAILURES, LEASE_SECS, Mode, OPEN_FOR, Plan, TIMEOUT};

/// The client every other request is sent as, past its limit. Its key's hash tag puts it in
/// slot 4729, which `redis-cli --cluster create` gives the first of three masters: the one
/// the cluster incidents kill, and the one with a replica.
pub const CLIENT: &str = "everybody";
/// The one route.
pub const URI: &str = "/limited";
/// What a [`Mode::Settle`] request is admitted on, and what it reports it used.
pub(super) const ESTIMATE: u32 = 3;
/// See [`ESTIMATE`].
pub(super) const USED: u32 = 1;
/// How long a `concurrency` request holds its unit.
const HOLD: Duration = Duration::from_millis(30);
/// The local batches' largest batch.
pub(super) const BATCH: u32 = 5;
/// The limit of [`Mode::Stack`]: the first of its two limits is the tighter.
pub(super) const STACK_LIMIT: u32 = 60;

/// The first limit of the stack: 60 an hour.
struct Hourly;

impl Limit for Hourly {
    const LIMITER: &'static str = "fixed_window";
    const OPTS: &'static [Opt] = &[Opt::Int(STACK_LIMIT as i64), Opt::Int(3_600)];
    const SCOPE: Option<&'static str> = Some("matrix");
}

/// The second: 90 an hour, sliding.
struct Sliding;

impl Limit for Sliding {
    const LIMITER: &'static str = "sliding_window";
    const OPTS: &'static [Opt] = &[Opt::Int(90), Opt::Int(3_600)];
    const SCOPE: Option<&'static str> = Some("matrix");
}

/// When one admitted request was in its handler: from its start to its response leaving the
/// limit's layer, within the time its unit was held.
type Span = (Instant, Instant);

/// The instances of a run.
#[derive(Debug)]
pub struct Deployment {
    /// One app per instance.
    pub apps: Vec<Router>,
    /// Their handles, in the same order: the first reads the store afterwards.
    pub handles: Vec<PlugLimit>,
    /// The spans of the requests admitted with the limit's headers, over every instance.
    spans: Arc<Mutex<Vec<Span>>>,
    /// The limits a request is charged, in the order [`Deployment::held`] reads them.
    limits: Vec<RuntimeLimit>,
}

impl Deployment {
    /// `plan.instances` apps on the stores `store` makes (one call per instance).
    ///
    /// # Panics
    ///
    /// When the plan's limit is refused: a defect of the matrix.
    pub fn new(plan: &Plan, prefix: &str, mut store: impl FnMut() -> Store) -> Self {
        let limits = limits(plan);
        let spans = Arc::new(Mutex::new(Vec::new()));
        let mut apps = Vec::new();
        let mut handles = Vec::new();
        for _ in 0..plan.instances {
            let handle = handle(plan, prefix, store());
            apps.push(app(plan, &handle, &limits, Arc::clone(&spans)));
            handles.push(handle);
        }
        Self {
            apps,
            handles,
            spans,
            limits,
        }
    }

    /// What the store holds of each limit for `client` now, in units, read without counting;
    /// `None` when it cannot be read, three times, each within the timeout.
    pub async fn held(&self, client: &str) -> Option<Vec<u64>> {
        let mut held = Vec::new();
        for limit in &self.limits {
            let mut outcome = None;
            // A peek counts nothing: asking again is safe.
            for _ in 0..3 {
                outcome = self.handles[0].peek(limit, client).await.ok();
                if outcome.is_some() {
                    break;
                }
            }
            let outcome = outcome?;
            let (limit, remaining) = (outcome.limit()?, outcome.remaining()?);
            // A peek answers as a request of cost 1 would be: its remaining leaves that unit
            // out; a denial says only that none is left.
            held.push(if outcome.is_allowed() {
                limit.saturating_sub(remaining + 1)
            } else {
                limit
            });
        }
        Some(held)
    }

    /// The most admitted requests in their handlers at once.
    #[must_use]
    pub fn most_at_once(&self) -> usize {
        let spans = self.spans.lock().expect("the spans");
        let mut edges: Vec<(Instant, i32)> = spans
            .iter()
            .flat_map(|&(start, end)| [(start, 1), (end, -1)])
            .collect();
        // An end before a start at the same instant: touching spans do not overlap.
        edges.sort();
        let (mut now, mut most) = (0_i32, 0_i32);
        for (_, step) in edges {
            now += step;
            most = most.max(now);
        }
        most as usize
    }
}

/// The limits a request of `plan` is charged.
fn limits(plan: &Plan) -> Vec<RuntimeLimit> {
    let scoped = |limiter: &str, opts: Vec<Opt>| {
        RuntimeLimit::new(limiter, opts)
            .expect("a valid limit")
            .scope("matrix")
    };
    let n = i64::from(plan.limit);
    match plan.mode {
        Mode::Builtin(name) => vec![scoped(name, builtin_opts(name, n))],
        Mode::Stack => vec![RuntimeLimit::from(Hourly), RuntimeLimit::from(Sliding)],
        Mode::Settle | Mode::Batches => {
            let limiter = if plan.mode == Mode::Batches {
                "batched"
            } else {
                "fixed_window"
            };
            vec![scoped(limiter, vec![Opt::Int(n), Opt::Int(3_600)])]
        }
        Mode::Waiting => vec![scoped("gcra", vec![Opt::Int(n), Opt::Int(1), Opt::Int(n)])],
    }
}

/// The options of built-in `name` for a limit of `n` over an hour (a `concurrency` limit of
/// `n` at once), so that a run never sees a window end.
fn builtin_opts(name: &str, n: i64) -> Vec<Opt> {
    match name {
        "token_bucket" | "gcra" => vec![Opt::Int(n), Opt::Int(3_600), Opt::Int(n)],
        "multi_window" => vec![Opt::Text(format!("{n}/3600").into())],
        "calendar_quota" => vec![Opt::Int(n), Opt::Str("month"), Opt::Int(0)],
        "concurrency" => vec![Opt::Int(n), Opt::Int(LEASE_SECS as i64)],
        _ => vec![Opt::Int(n), Opt::Int(3_600)],
    }
}

/// One instance's handle.
fn handle(plan: &Plan, prefix: &str, store: Store) -> PlugLimit {
    // `LocalShare` is a limiter's own policy; the handle's stays `Closed` under it.
    let (handle_policy, batch_policy) = match plan.policy {
        FailurePolicy::LocalShare => (FailurePolicy::Closed, FailurePolicy::LocalShare),
        other => (other, other),
    };
    PlugLimit::builder(store)
        .prefix(prefix)
        .key(key::header("x-client"))
        .timeout(TIMEOUT)
        .circuit_breaker(CircuitBreaker::new(FAILURES, OPEN_FOR))
        .on_failure(handle_policy)
        .limiter(
            "batched",
            Limiter::fixed_window()
                .local_batches(LocalBatches::new(BATCH))
                .on_failure(batch_policy),
        )
        .build()
        .expect("a valid matrix configuration")
}

/// When a request entered its handler, carried out on its response.
#[derive(Debug, Clone, Copy)]
struct Started(Instant);

/// One instance's app: the limited route, its handler holding a `concurrency` unit for a
/// while and reporting what a settled request used; outside the limit, the spans of the
/// admitted requests.
fn app(
    plan: &Plan,
    limits: &PlugLimit,
    charged: &[RuntimeLimit],
    spans: Arc<Mutex<Vec<Span>>>,
) -> Router {
    let hold = if plan.mode == Mode::Builtin("concurrency") {
        HOLD
    } else {
        Duration::ZERO
    };
    let handler = move |usage: Option<Extension<Usage>>| async move {
        let started = Started(Instant::now());
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        if let Some(Extension(usage)) = usage {
            usage.set(USED);
        }
        (Extension(started), "ok")
    };
    let router = Router::new().route(URI, get(handler));
    let limited = match plan.mode {
        Mode::Stack => router.route_layer(RateLimitLayer::<(Hourly, Sliding)>::new(limits.clone())),
        Mode::Settle => {
            let limit = charged[0]
                .clone()
                .cost(ESTIMATE)
                .and_then(RuntimeLimit::settle)
                .expect("a settled limit");
            router.route_layer(
                RateLimitLayer::runtime(limits.clone(), limit).expect("a known limiter"),
            )
        }
        Mode::Waiting => router.route_layer(
            RateLimitLayer::runtime(limits.clone(), charged[0].clone())
                .expect("a known limiter")
                .wait_up_to(plan.wait),
        ),
        _ => router.route_layer(
            RateLimitLayer::runtime(limits.clone(), charged[0].clone()).expect("a known limiter"),
        ),
    };
    limited.layer(axum::middleware::from_fn_with_state(spans, spanned))
}

/// Keeps the span of each of the shared client's requests that was admitted with the limit's
/// headers: its own clients' units are their own.
async fn spanned(
    State(spans): State<Arc<Mutex<Vec<Span>>>>,
    request: Request,
    next: Next,
) -> Response {
    let shared = request
        .headers()
        .get("x-client")
        .is_some_and(|client| client == CLIENT);
    let response = next.run(request).await;
    let admitted =
        response.status() == StatusCode::OK && response.headers().contains_key("x-ratelimit-limit");
    if let (true, true, Some(Started(start))) = (
        shared,
        admitted,
        response.extensions().get::<Started>().copied(),
    ) {
        spans
            .lock()
            .expect("the spans")
            .push((start, Instant::now()));
    }
    response
}

//! One request through an Axum router, in process, in nanoseconds, with criterion: the pair of
//! `http_load` without headers (`tower_governor_no_headers` and `memory_no_headers`) and the
//! bare route under them, without sockets, the kernel or a load generator.
//!
//! ```text
//! cargo bench -p plug_limit_bench --bench route_micro
//! ```
//!
//! Over TCP on a 2-core machine, a pass of `http_load` moves by up to 10% from one round to the
//! next, more than the two limiters differ by. Here each request is built outside the timing
//! and handed to the router's `Service::call`; one poll answers it (neither side waits), and
//! the time is what the router, the limiter and the response cost, as a server would pay them
//! between its reads and writes. Three functions of one criterion group, run one after the
//! other:
//!
//! - `bare`: `GET /` answering `"ok"`;
//! - `tower_governor_no_headers`: `bare` behind `tower_governor`'s layer keyed by `x-client`
//!   (its default `DashMap` store and `quanta` clock, no headers);
//! - `memory_no_headers`: a handler taking `RateLimited<FixedWindow<1_000_000_000, 3600>>` on
//!   the memory backend keyed by `x-client`, failing closed, dropping its headers.
//!
//! Requests carry `x-client` over [`CLIENTS`] values in turn, as `http_load`'s do; no limit is
//! reached, so every request is a full allow, and each response's status is checked to be
//! `200`. After criterion's report, a table prints each function's median time per request,
//! what each limiter adds to `bare`, and the two ratios the targets read: the requests a second
//! of `memory_no_headers` over `tower_governor_no_headers`' (`>= 1.0x` is the target), and the
//! time each adds over `bare`. Criterion's arguments work as usual
//! (`cargo bench -p plug_limit_bench --bench route_micro -- --measurement-time 10`).

#[path = "client_header.rs"]
mod client_header;
#[path = "criterion_results.rs"]
mod criterion_results;

use std::future::Future as _;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use criterion::{BatchSize, Criterion};
use http::{Request, StatusCode};
use plug_limit::{FailurePolicy, FixedWindow, PlugLimit, RateLimited, Store};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_service::Service;

use crate::client_header::{CLIENT_HEADER, ClientHeader};

/// Never reached: every request is allowed.
const LIMIT: u32 = 1_000_000_000;
/// Distinct `x-client` values, sent in turn (`http_load`'s default).
const CLIENTS: usize = 10_000;
const GROUP: &str = "route";
/// The functions, in the order they run and print.
const FUNCTIONS: [&str; 3] = ["bare", "tower_governor_no_headers", "memory_no_headers"];

async fn bare() -> &'static str {
    "ok"
}

/// Checked, its headers left out of the response, as `http_load`'s `memory_no_headers`.
async fn memory_no_headers(_limited: RateLimited<FixedWindow<LIMIT, 3600>>) -> &'static str {
    "ok"
}

fn router(function: &str) -> Router {
    match function {
        "tower_governor_no_headers" => {
            // One cell a nanosecond with a burst of LIMIT: never reached, as `http_load`'s.
            let mut config = GovernorConfigBuilder::default();
            let config = config
                .per_nanosecond(1)
                .burst_size(LIMIT)
                .key_extractor(ClientHeader)
                .finish()
                .expect("a valid quota");
            Router::new()
                .route("/", get(bare))
                .layer(GovernorLayer::new(config))
        }
        "memory_no_headers" => {
            let limits = PlugLimit::builder(Store::memory())
                .key(plug_limit::key::header(CLIENT_HEADER))
                .on_failure(FailurePolicy::Closed)
                .build()
                .expect("a memory limiter");
            Router::new()
                .route("/", get(memory_no_headers))
                .with_state(limits)
        }
        _ => Router::new().route("/", get(bare)),
    }
}

fn request(client: &str) -> Request<Body> {
    Request::get("/")
        .header(CLIENT_HEADER, client)
        .body(Body::empty())
        .expect("a valid request")
}

/// One request through `router`, answered in one poll with `200`.
#[inline]
fn serve(router: &mut Router, request: Request<Body>) {
    let future = pin!(router.call(request));
    let Poll::Ready(response) = future.poll(&mut Context::from_waker(Waker::noop())) else {
        panic!("a route waited");
    };
    let response = response.expect("a router never fails");
    assert_eq!(black_box(&response).status(), StatusCode::OK);
}

fn benches(c: &mut Criterion) {
    let clients: Vec<String> = (0..CLIENTS).map(|i| format!("client-{i}")).collect();
    let mut group = c.benchmark_group(GROUP);
    for function in FUNCTIONS {
        let mut router = router(function);
        // Every client counted once before the timing: each timed request finds its key.
        for client in &clients {
            serve(&mut router, request(client));
        }
        let mut next = 0;
        group.bench_function(function, |b| {
            b.iter_batched(
                || {
                    next = (next + 1) % CLIENTS;
                    request(&clients[next])
                },
                |request| serve(&mut router, request),
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

/// `--count <function> <requests>`: serves that many requests of one function outside
/// criterion, in [`measured`], for `route_instructions.sh` to count their instructions under
/// callgrind.
fn count(function: &str, requests: usize) {
    assert!(FUNCTIONS.contains(&function), "unknown function {function}");
    let clients: Vec<String> = (0..CLIENTS).map(|i| format!("client-{i}")).collect();
    let mut router = router(function);
    // What happens once (every key's first count, `governor`'s clock calibrating itself) falls
    // outside the count.
    for client in &clients {
        serve(&mut router, request(client));
    }
    measured(&mut router, &clients, requests);
}

/// The requests `route_instructions.sh` counts the instructions of: nothing else runs inside.
#[inline(never)]
fn measured(router: &mut Router, clients: &[String], requests: usize) {
    for i in 0..requests {
        serve(router, request(&clients[i % CLIENTS]));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, function, requests] = args.as_slice()
        && flag == "--count"
    {
        count(function, requests.parse().expect("a number of requests"));
        return;
    }
    let Some(run) = criterion_results::run(benches) else {
        return;
    };
    let [bare, governor, memory] = FUNCTIONS.map(|function| run.median_ns(GROUP, function));
    println!();
    println!("| function | ns/request | over bare |");
    println!("|---|---:|---:|");
    for (function, ns) in FUNCTIONS.into_iter().zip([bare, governor, memory]) {
        let ns_text = ns.map_or_else(|| "n/a".to_owned(), |ns| format!("{ns:.0}"));
        let over = match (ns, bare) {
            (Some(ns), Some(bare)) => format!("{:+.0}", ns - bare),
            _ => "n/a".to_owned(),
        };
        println!("| {function} | {ns_text} | {over} |");
    }
    if let (Some(bare), Some(governor), Some(memory)) = (bare, governor, memory) {
        println!(
            "memory_no_headers req/s over tower_governor_no_headers': {:.3}x (target >= 1.0x)",
            governor / memory
        );
        println!(
            "time added over bare, memory_no_headers over tower_governor_no_headers: {:.2}x",
            (memory - bare) / (governor - bare)
        );
    }
    criterion_results::print_conditions();
}

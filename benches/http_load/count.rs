//! `--count <variant> <requests>`: one variant's requests served in process, for
//! `route_instructions.sh` to count their instructions under callgrind.
//!
//! The router is called as a server calls it, on a current-thread Tokio runtime, without
//! sockets on the HTTP side; a variant on Redis talks to a private `redis-server` over loopback,
//! whose own instructions (another process) are not counted: what is counted is the
//! application's side of each check. Every client is counted once before the measured
//! requests (the flood's one client a few times), so each measured request finds its key.

use axum::Router;
use axum::body::Body;
use http::Request;
use plug_limit_tests::RedisServer;
use tower_service::Service;

use crate::client_header::CLIENT_HEADER;
use crate::variants::Variant;
use crate::{BoxError, FLOOD_CLIENT};

/// Distinct `x-client` values, sent in turn (`route_micro`'s and `http_load`'s default).
const CLIENTS: usize = 10_000;

pub(crate) fn count(name: &str, requests: usize) -> Result<(), BoxError> {
    let variant = Variant::ALL
        .into_iter()
        .find(|variant| variant.name() == name)
        .ok_or_else(|| format!("unknown variant `{name}`"))?;
    let redis_server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut router = runtime.block_on(crate::routes::app(variant, &redis_server.url()))?;
    let clients: Vec<String> = if variant == Variant::DenyFlood {
        vec![FLOOD_CLIENT.to_owned(); 3]
    } else {
        (0..CLIENTS).map(|i| format!("client-{i}")).collect()
    };
    for client in &clients {
        serve(&runtime, &mut router, variant, client, true)?;
    }
    measured(&runtime, &mut router, variant, &clients, requests)
}

/// The requests `route_instructions.sh` counts the instructions of: nothing else runs inside.
#[inline(never)]
fn measured(
    runtime: &tokio::runtime::Runtime,
    router: &mut Router,
    variant: Variant,
    clients: &[String],
    requests: usize,
) -> Result<(), BoxError> {
    for i in 0..requests {
        serve(runtime, router, variant, &clients[i % clients.len()], false)?;
    }
    Ok(())
}

/// One request of `client`, answered as `variant` should answer it (a warm-up's first
/// requests of the flood are allowed).
fn serve(
    runtime: &tokio::runtime::Runtime,
    router: &mut Router,
    variant: Variant,
    client: &str,
    warming: bool,
) -> Result<(), BoxError> {
    let request = Request::get("/")
        .header(CLIENT_HEADER, client)
        .body(Body::empty())?;
    let response = runtime.block_on(router.call(request))?;
    let status = response.status().as_u16();
    if !variant.counts(status) && !warming {
        return Err(format!("{}: answered {status}", variant.name()).into());
    }
    drop(std::hint::black_box(response));
    Ok(())
}

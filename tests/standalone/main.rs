//! Every integration test that runs on a standalone Redis, or on none, in one test binary: one
//! module per topic. One binary links once where a file per topic linked a dozen times, and its
//! tests run in parallel across topics. Each test still starts its own `redis-server` on a free
//! loopback port (`plug_limit_tests::RedisServer`), so no two tests share a server or a port.
//!
//! Four binaries stay apart: `tests/cluster/` (a Redis Cluster), `tests/ui.rs` (trybuild's
//! compile-time cases), `tests/decision_span.rs` (a global `tracing` subscriber) and
//! `tests/macro_runtime.rs`, because every `PlugLimit` a binary builds
//! checks the limiters named by every `#[rate_limit]` handler linked into it, so the handlers
//! there, with their custom limiters, would fail every build here that does not register them.

mod architecture;
mod builder;
mod calendar_quota;
mod client_ip;
mod custom_limiters;
mod denied_stacks;
mod deny_cache;
mod differential;
mod docs_catalogue;
mod failures;
mod fault_matrix;
mod fault_proxy;
mod fixed_window;
mod grpc;
mod hooks;
mod ietf_headers;
mod in_flight;
mod keys_and_replies;
mod layer;
mod local_batches;
mod local_batches_edges;
mod local_batches_flood;
mod local_batches_partition;
mod memory;
mod memory_capacity;
#[path = "../support/metric_values.rs"]
mod metric_values;
mod metrics;
mod outages;
mod own_connection;
mod programmatic;
mod quoted_inputs;
mod races;
mod redis_settings;
mod refunds;
mod reserve_then_settle;
mod reserve_then_settle_edges;
mod reset_all;
mod resolvers;
mod rules;
mod runtime_limits;
mod scripts;
mod send_headers;
mod sentinel;
mod shadow;
mod stacked;
mod streaming_bodies;
mod token_bucket;
mod waiting;

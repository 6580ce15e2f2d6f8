//! How the cost of a decision grows with the work it is given: keys held, `sliding_log`
//! entries per key, concurrent connections and limits per request, each as a curve of
//! measured points, a table and an SVG chart that states the growth observed and the growth
//! the algorithm guide (`plug_limit/docs/algorithms.md`, the `Cost` and `Memory` lines of
//! `lua/*.lua`) leads to expect.
//!
//! ```text
//! cargo bench -p plug_limit_bench --bench cost_curves
//! ```
//!
//! | curve | file | what grows | measured |
//! |---|---|---|---|
//! | keys held | `keys_held.svg` | distinct keys with live state: 1k to 10M in memory, 1k to 1M on Redis | time per check of a held key, time per new key, bytes per key |
//! | `sliding_log` entries | `sliding_log.svg` | entries in one key's window, 1 to 10k | time per decision, Redis CPU per call, Redis bytes per entry |
//! | connections | `connections.svg` | concurrent keep-alive connections to a limited Axum route, 1 to 256 | p50 and p99 latency, throughput |
//! | limits per request | `stacked_limits.svg` | limits a request is checked against, 1 to 5 | time per request, Redis round trips |
//!
//! Every curve of a backend is measured in this one process, against a private `redis-server`
//! on a free loopback port. A checked decision that is not the expected allow fails the run,
//! so a fast error cannot pass for a fast decision. A timed loop is cut into five slices and
//! the median slice's time per operation kept, so a burst of load from elsewhere on a shared
//! machine moves one slice rather than the point. The machine's load average is printed and
//! drawn on every chart.
//!
//! Environment (all optional):
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `COST_CURVES_QUICK` | unset | `1`: a run of about a minute over smaller ranges (memory up to 100k keys, Redis up to 10k keys, 1k entries, 64 connections), written to the system's temporary directory unless `COST_CURVES_OUT` says otherwise |
//! | `COST_CURVES_ONLY` | all | comma-separated subset of `keys`, `sliding_log`, `connections`, `stacked` |
//! | `COST_CURVES_OUT` | `benches/curves` | where the SVGs go |
//! | `REDIS_SERVER` | `redis-server` | the Redis binary |

#[path = "../http_load/client.rs"]
mod client;

mod chart;
mod connections;
mod curve;
mod keys_held;
mod redis_stats;
mod settings;
mod sliding_log;
mod stacked;

use std::error::Error;
use std::time::Duration;

use plug_limit_tests::RedisServer;

use crate::curve::Curve;
use crate::settings::{Only, Settings};

type BoxError = Box<dyn Error + Send + Sync>;

/// Every check's timeout: on a busy machine a slow check is a slow point of the curve, not a
/// failed run (the library's default is 500 ms).
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

fn main() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let redis = RedisServer::start();
    assert_ne!(redis.port(), 6379, "the shared Redis on 6379 is off limits");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let version = runtime.block_on(redis_stats::version(&redis.url()))?;
    let machine = format!(
        "{} cores, Redis {version}, load average {} at start",
        std::thread::available_parallelism().map_or(0, usize::from),
        load_average(),
    );
    eprintln!("cost_curves: {machine}; SVGs to {}", settings.out.display());
    std::fs::create_dir_all(&settings.out)?;

    let mut curves: Vec<Curve> = Vec::new();
    if settings.runs(Only::Keys) {
        curves.push(keys_held::curve(&settings, &runtime, &redis)?);
    }
    if settings.runs(Only::SlidingLog) {
        curves.push(sliding_log::curve(&settings, &runtime, &redis)?);
    }
    if settings.runs(Only::Connections) {
        curves.push(connections::curve(&settings, &runtime, &redis)?);
    }
    if settings.runs(Only::Stacked) {
        curves.push(stacked::curve(&settings, &runtime, &redis)?);
    }

    let machine = format!("{machine}, {} at end", load_average());
    println!("# How cost grows\n\n{machine}\n");
    for curve in &curves {
        println!("{}", curve.table());
        let path = settings.out.join(format!("{}.svg", curve.file));
        chart::draw(curve, &machine, &path)?;
        println!("wrote {}\n", path.display());
    }
    Ok(())
}

/// The 1-minute load average: whether something else was running.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

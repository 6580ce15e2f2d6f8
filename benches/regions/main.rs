//! One global limit across three regions, as users will judge it: six instances (two a
//! region) on one Redis, each region's link through a relay adding a one-way delay (20, 75 and
//! 150 ms), one `token_bucket` of 1,000 a second with local batches, an open-loop load of
//! 3,000 requests a second (sent on a clock, not one after another) split 60/30/10 between
//! the regions, moving to 10/30/60 halfway; then the far region's link cut for 10 s under
//! `FailurePolicy::LocalShare`, then restored. Beside it, the same instances in exact mode
//! (no batches, every request a call) for the store's cost per decision.
//!
//! Run: `cargo bench -p plug_limit_bench --bench regions` (about 80 seconds;
//! `REGIONS_QUICK=1`: phases a quarter as long). It prints the goals table and a per-second
//! table, and writes the chart `plug_limit/docs/regions.svg` the guide's chapter shows.
//!
//! The relays are the test support's userspace TCP proxy on loopback (`Fault::Latency`); the
//! requests go through each instance's router in process, so a request's latency is what
//! the limiter adds to it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::{Router, routing::get};
use deadpool_redis::redis;
use plotters::prelude::*;
use plug_limit::{FailurePolicy, Limit, Limiter, LocalBatches, Opt, PlugLimit, RateLimited, key};
use plug_limit_tests::{Fault, FaultProxy, RedisServer, pool, unique_prefix};
use tokio::time::Instant;
use tower_service::Service;

/// 1,000 a second: 600,000 refilled evenly over a window of 10 minutes (longer than the run,
/// so no window resets within it), on a burst of 1,000.
struct Global;

impl Limit for Global {
    const LIMITER: &'static str = "global";
    const OPTS: &'static [Opt] = &[Opt::Int(601_000), Opt::Int(600), Opt::Int(1_000)];
}

const LIMIT: f64 = 1_000.0;
const BURST: usize = 1_000;

async fn handler(limited: RateLimited<Global>) -> (RateLimited<Global>, &'static str) {
    (limited, "ok")
}

/// The regions: a name and the one-way delay of its link to the store.
const REGIONS: [(&str, u64); 3] = [("near", 20), ("mid", 75), ("far", 150)];
const PER_REGION: usize = 2;
const PER_SECOND: u32 = 3_000;
/// Above two round trips of the far region (300 ms each): a connection idle for a second is
/// checked with a `PING` before a decision goes out on it, so a breaker's probe after a cut
/// takes two.
const TIMEOUT: Duration = Duration::from_secs(1);

/// The batches' aim between two reservations of the key at an instance.
const EVERY: Duration = Duration::from_millis(250);

/// One request: where it went, when it was due, what it got and how long it took.
#[derive(Debug, Clone, Copy)]
struct Record {
    region: usize,
    at: Duration,
    /// From when the request was sent to its response: what the limiter adds to it.
    latency: Duration,
    admitted: bool,
    /// A 200 without rate-limit headers: let through by a failure policy.
    passed: bool,
}

/// The timeline, in seconds from the start.
#[derive(Debug, Clone, Copy)]
struct Timeline {
    shift: u64,
    cut: u64,
    restore: u64,
    end: u64,
}

impl Timeline {
    fn new(quick: bool) -> Self {
        let scale = if quick { 1 } else { 4 };
        Self {
            shift: 5 * scale,
            cut: 10 * scale,
            restore: 10 * scale + 10,
            end: 10 * scale + 15,
        }
    }

    /// The share of the load each region gets at second `at`, in tenths.
    fn split(&self, at: Duration) -> [u32; 3] {
        if at < Duration::from_secs(self.shift) {
            [6, 3, 1]
        } else {
            [1, 3, 6]
        }
    }
}

fn instance(proxy: &FaultProxy, prefix: &str, batched: bool) -> Router {
    let limiter = if batched {
        Limiter::token_bucket()
            .local_batches(LocalBatches::new(1_000).every(EVERY))
            .on_failure(FailurePolicy::LocalShare)
    } else {
        Limiter::token_bucket()
    };
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .prefix(prefix)
        .key(key::global())
        .timeout(TIMEOUT)
        .limiter("global", limiter)
        .build()
        .expect("the benchmark's limits");
    Router::new().route("/", get(handler)).with_state(limits)
}

/// What Redis has spent and run so far.
async fn redis_counters(conn: &mut redis::aio::MultiplexedConnection) -> (f64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let calls = info
        .lines()
        .filter(|line| line.starts_with("cmdstat_evalsha:") || line.starts_with("cmdstat_eval:"))
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    (field("used_cpu_user") + field("used_cpu_sys"), calls)
}

/// Sends the load on a clock: request `i` is due at `i / PER_SECOND`, to a region by the
/// timeline's split and to its instances in turn, in a task of its own.
async fn run_load(
    apps: Arc<Vec<Vec<Router>>>,
    timeline: Timeline,
    until: Duration,
    proxies: &[FaultProxy],
) -> Vec<Record> {
    let records = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut turn = [0_usize; 3];
    let (mut cut, mut restored) = (false, false);
    for i in 0_u64.. {
        let at = Duration::from_secs(1) * u32::try_from(i).expect("few requests") / PER_SECOND;
        if at >= until {
            break;
        }
        if !cut && at >= Duration::from_secs(timeline.cut) {
            proxies[2].set(Fault::Blackhole);
            cut = true;
        }
        if !restored && at >= Duration::from_secs(timeline.restore) {
            proxies[2].set(Fault::Latency(Duration::from_millis(REGIONS[2].1)));
            restored = true;
        }
        let split = timeline.split(at);
        let slot = u32::try_from(i % 10).expect("a tenth");
        let region = if slot < split[0] {
            0
        } else if slot < split[0] + split[1] {
            1
        } else {
            2
        };
        let instance = turn[region] % PER_REGION;
        turn[region] += 1;
        let due = start + at;
        tokio::time::sleep_until(due).await;
        let mut app = apps[region][instance].clone();
        let records = Arc::clone(&records);
        tasks.spawn(async move {
            let request = http::Request::get("/")
                .body(axum::body::Body::empty())
                .expect("a request");
            // Timed from here: the clock's own lateness in sending it is not the limiter's.
            let sent = Instant::now();
            let response = app.call(request).await.expect("an infallible router");
            let latency = sent.elapsed();
            let limited = response.headers().contains_key("x-ratelimit-limit");
            let status = response.status();
            records.lock().expect("records").push(Record {
                region,
                at,
                latency,
                admitted: status == 200 && limited,
                passed: status == 200 && !limited,
            });
        });
        // Keep the set small: finished requests leave it as new ones join.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let mut records = std::mem::take(&mut *records.lock().expect("records"));
    records.sort_by_key(|record| record.at);
    records
}

/// Admitted per second per region (by when each request was due).
fn per_second(records: &[Record], seconds: u64) -> Vec<[usize; 3]> {
    let mut table = vec![[0; 3]; usize::try_from(seconds).expect("seconds")];
    for record in records.iter().filter(|record| record.admitted) {
        if let Some(row) = table.get_mut(usize::try_from(record.at.as_secs()).expect("a second")) {
            row[record.region] += 1;
        }
    }
    table
}

fn percentile(mut values: Vec<Duration>, p: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let index = ((values.len() as f64 - 1.0) * p).round() as usize;
    values[index]
}

/// Steady seconds of a phase: from `from` + 1 (the second the phase begins in is a
/// transition) to `to`.
fn steady(table: &[[usize; 3]], from: u64, to: u64) -> Vec<usize> {
    (from + 1..to)
        .map(|second| {
            table[usize::try_from(second).expect("a second")]
                .iter()
                .sum()
        })
        .collect()
}

/// The most admitted in any window of one second, sliding by 10 ms, by when each request was
/// answered, within `from..to`.
fn most_in_any_second(records: &[Record], from: Duration, to: Duration) -> usize {
    let mut answered: Vec<Duration> = records
        .iter()
        .filter(|record| record.admitted)
        .map(|record| record.at + record.latency)
        .filter(|at| *at >= from && *at < to)
        .collect();
    answered.sort();
    let (mut most, mut start) = (0, 0);
    for end in 0..answered.len() {
        while answered[end] - answered[start] >= Duration::from_secs(1) {
            start += 1;
        }
        most = most.max(end - start + 1);
    }
    most
}

fn chart(table: &[[usize; 3]], timeline: Timeline, path: &Path) {
    let root = SVGBackend::new(path, (760, 300)).into_drawing_area();
    root.fill(&WHITE).expect("draw");
    let seconds = u32::try_from(table.len()).expect("seconds");
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "admitted per second: one limit of 1,000/s, three regions",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(45)
        .build_cartesian_2d(0..seconds, 0_usize..2_400)
        .expect("draw");
    chart
        .configure_mesh()
        .x_desc("seconds (load shifts at the first mark; the far region is cut between the others)")
        .y_desc("admitted/s")
        .light_line_style(WHITE)
        .draw()
        .expect("draw");
    for mark in [timeline.shift, timeline.cut, timeline.restore] {
        let mark = u32::try_from(mark).expect("seconds");
        chart
            .draw_series(LineSeries::new([(mark, 0), (mark, 2_400)], BLACK.mix(0.3)))
            .expect("draw");
    }
    let colors = [BLUE, GREEN, RED];
    for (region, (name, delay)) in REGIONS.iter().enumerate() {
        let color = colors[region];
        chart
            .draw_series(LineSeries::new(
                (0..seconds).map(|s| (s, table[s as usize][region])),
                color,
            ))
            .expect("draw")
            .label(format!("{name} ({delay} ms one way)"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    chart
        .draw_series(LineSeries::new(
            (0..seconds).map(|s| (s, table[s as usize].iter().sum::<usize>())),
            BLACK,
        ))
        .expect("draw")
        .label("all regions")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperMiddle)
        .draw()
        .expect("draw");
    root.present().expect("write the chart");
}

struct Run {
    records: Vec<Record>,
    redis_cpu: f64,
    calls: u64,
}

/// One run of six instances on `redis` through three relays, for `until`.
async fn run(redis: &RedisServer, batched: bool, timeline: Timeline, until: Duration) -> Run {
    let proxies: Vec<FaultProxy> = REGIONS
        .iter()
        .map(|(_, delay)| {
            let proxy = FaultProxy::start(redis.addr());
            proxy.set(Fault::Latency(Duration::from_millis(*delay)));
            proxy
        })
        .collect();
    let prefix = unique_prefix("regions");
    let apps: Vec<Vec<Router>> = proxies
        .iter()
        .map(|proxy| {
            (0..PER_REGION)
                .map(|_| instance(proxy, &prefix, batched))
                .collect()
        })
        .collect();
    let mut conn = redis.connection().await;
    let (cpu_before, calls_before) = redis_counters(&mut conn).await;
    let records = run_load(Arc::new(apps), timeline, until, &proxies).await;
    let (cpu_after, calls_after) = redis_counters(&mut conn).await;
    Run {
        records,
        redis_cpu: cpu_after - cpu_before,
        calls: calls_after - calls_before,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var_os("REGIONS_QUICK").is_some();
    let timeline = Timeline::new(quick);
    let redis = RedisServer::start();

    // Exact mode first, for the store's cost of a decision: the first phase's split, no cut.
    let exact_for = Duration::from_secs(if quick { 5 } else { 10 });
    let exact = run(
        &redis,
        false,
        Timeline {
            cut: u64::MAX,
            restore: u64::MAX,
            ..timeline
        },
        exact_for,
    )
    .await;

    let batched = run(&redis, true, timeline, Duration::from_secs(timeline.end)).await;
    let records = &batched.records;
    let table = per_second(records, timeline.end);

    // Never over, and capacity used, per phase.
    let phases = [
        ("60/30/10", 0, timeline.shift),
        ("10/30/60", timeline.shift, timeline.cut),
        ("far region cut", timeline.cut, timeline.restore),
        ("restored", timeline.restore, timeline.end),
    ];
    println!(
        "| phase | seconds | admitted/s (min, mean, max of its steady seconds) | most in any 1 s | passed by the policy | p50 | p99 | p99.9 |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for (name, from, to) in phases {
        let seconds = steady(&table, from, to);
        let (min, max) = (
            seconds.iter().min().copied().unwrap_or(0),
            seconds.iter().max().copied().unwrap_or(0),
        );
        #[allow(clippy::cast_precision_loss)]
        let mean = seconds.iter().sum::<usize>() as f64 / seconds.len().max(1) as f64;
        let in_phase = |record: &&Record| {
            record.at >= Duration::from_secs(from + 1) && record.at < Duration::from_secs(to)
        };
        let latencies: Vec<Duration> = records.iter().filter(in_phase).map(|r| r.latency).collect();
        let passed = records.iter().filter(in_phase).filter(|r| r.passed).count();
        let most = most_in_any_second(
            records,
            Duration::from_secs(from + 1),
            Duration::from_secs(to),
        );
        println!(
            "| {name} | {}-{} | {min}, {mean:.0}, {max} | {most} | {passed} | {:.2} ms | {:.2} ms | {:.2} ms |",
            from + 1,
            to,
            percentile(latencies.clone(), 0.5).as_secs_f64() * 1e3,
            percentile(latencies.clone(), 0.99).as_secs_f64() * 1e3,
            percentile(latencies, 0.999).as_secs_f64() * 1e3,
        );
    }
    // The first second after the shift, and the far region's share before the cut.
    let shift = usize::try_from(timeline.shift).expect("seconds");
    let after_shift: Vec<usize> = (shift..shift + 3).map(|s| table[s].iter().sum()).collect();
    let cut = usize::try_from(timeline.cut).expect("seconds");
    #[allow(clippy::cast_precision_loss)]
    let far_share = (cut - 3..cut).map(|s| table[s][2]).sum::<usize>() as f64 / 3.0;
    let restore = usize::try_from(timeline.restore).expect("seconds");
    #[allow(clippy::cast_precision_loss)]
    let during_cut: Vec<f64> = (cut + 2..restore)
        .map(|s| table[s].iter().sum::<usize>() as f64)
        .collect();
    let worst_cut = during_cut.iter().copied().fold(0.0, f64::max);
    #[allow(clippy::cast_precision_loss)]
    let mean_cut = during_cut.iter().sum::<f64>() / during_cut.len().max(1) as f64;
    println!();
    println!("admitted in the three seconds from the shift: {after_shift:?} (limit {LIMIT})");
    println!(
        "far region's share before the cut: {far_share:.0}/s; during the cut (past its first 2 s) {mean_cut:.0}/s in all on average ({:.0} over the limit, the bound being the share), {worst_cut:.0} in its busiest second",
        mean_cut - LIMIT
    );
    let requests = records.len();
    #[allow(clippy::cast_precision_loss)]
    let per_100 = batched.calls as f64 * 100.0 / requests as f64;
    println!(
        "calls to the store: {} for {requests} requests, {per_100:.2} per 100 (the cut's failed calls included)",
        batched.calls
    );
    #[allow(clippy::cast_precision_loss)]
    let exact_rate = exact.records.len() as f64 / exact.redis_cpu;
    #[allow(clippy::cast_precision_loss)]
    let batched_rate = requests as f64 / batched.redis_cpu;
    println!(
        "decisions per Redis CPU-second: exact {exact_rate:.0} ({} requests, {:.2} s of Redis CPU, {} calls), batched {batched_rate:.0} ({requests} requests, {:.2} s, {} calls): {:.1}x",
        exact.records.len(),
        exact.redis_cpu,
        exact.calls,
        batched.redis_cpu,
        batched.calls,
        batched_rate / exact_rate
    );
    let exact_latencies: Vec<Duration> = exact.records.iter().map(|r| r.latency).collect();
    println!(
        "exact mode's latency: p50 {:.2} ms, p99 {:.2} ms; admitted/s {:.0}",
        percentile(exact_latencies.clone(), 0.5).as_secs_f64() * 1e3,
        percentile(exact_latencies, 0.99).as_secs_f64() * 1e3,
        exact.records.iter().filter(|r| r.admitted).count() as f64 / exact_for.as_secs_f64()
    );
    println!();
    println!("| second | near | mid | far | all |");
    println!("|---:|---:|---:|---:|---:|");
    for (second, row) in table.iter().enumerate() {
        println!(
            "| {second} | {} | {} | {} | {} |",
            row[0],
            row[1],
            row[2],
            row.iter().sum::<usize>()
        );
    }
    let _ = BURST;
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plug_limit/docs/regions.svg");
    chart(&table, timeline, &out);
    println!("\nchart: {}", out.display());
}

//! The fault matrix: seeded runs of every incident against real `redis-server` processes, each
//! checked against the invariants the failures guide states, printed as the guide's tables.
//!
//! ```text
//! cargo run -p plug_limit_tests --release --example fault_matrix -- --single --runs 10000
//! cargo run -p plug_limit_tests --release --example fault_matrix -- --cluster --runs 20
//! cargo run -p plug_limit_tests --release --example fault_matrix -- --single --seed 1234
//! ```
//!
//! `--single` (the default), `--cluster` or `--sentinel` picks the incidents; `--runs N` runs
//! seeds `--from` (default 0) to `--from + N`, `--jobs K` of them at once (default 2, single
//! server only); `--seed S` runs one seed and prints everything it saw. The tables go to
//! stdout, progress and each violation with its replay command to stderr; the exit status
//! is 1 when any run broke an invariant.

use std::process::ExitCode;
use std::time::Instant;

use plug_limit_tests::matrix::{CLUSTER, Incident, Plan, SENTINEL, SINGLE, Table, run};
use tokio::task::JoinSet;

struct Args {
    incidents: &'static [Incident],
    from: u64,
    runs: u64,
    jobs: usize,
    one: Option<u64>,
}

fn args() -> Result<Args, String> {
    let mut parsed = Args {
        incidents: &SINGLE,
        from: 0,
        runs: 100,
        jobs: 2,
        one: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|value| value.parse().ok())
                .ok_or_else(|| format!("{name} takes a number"))
        };
        match arg.as_str() {
            "--single" => parsed.incidents = &SINGLE,
            "--cluster" => parsed.incidents = &CLUSTER,
            "--sentinel" => parsed.incidents = &SENTINEL,
            "--from" => parsed.from = number("--from")?,
            "--runs" => parsed.runs = number("--runs")?,
            "--jobs" => parsed.jobs = number("--jobs")?.max(1) as usize,
            "--seed" => parsed.one = Some(number("--seed")?),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if parsed.incidents != SINGLE.as_slice() {
        // Each run starts a cluster or a Sentinel set of its own: one at a time.
        parsed.jobs = 1;
    }
    Ok(parsed)
}

fn main() -> ExitCode {
    let args = match args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("fault_matrix: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    runtime.block_on(matrix(args))
}

async fn matrix(args: Args) -> ExitCode {
    if let Some(seed) = args.one {
        let plan = Plan::new(seed, args.incidents);
        eprintln!("{plan:#?}");
        let report = run(&plan).await;
        eprintln!(
            "{} requests, {} past the limit, worst latency {:?}, recovery {:?}",
            report.requests, report.past_limit, report.worst_latency, report.recovery
        );
        for violation in &report.violations {
            eprintln!("violation: {violation}");
        }
        return if report.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let started = Instant::now();
    let mut table = Table::new();
    let mut running = JoinSet::new();
    let mut seeds = args.from..args.from + args.runs;
    loop {
        while running.len() < args.jobs {
            let Some(seed) = seeds.next() else { break };
            let plan = Plan::new(seed, args.incidents);
            running.spawn(async move { run(&plan).await });
        }
        let Some(done) = running.join_next().await else {
            break;
        };
        let report = done.expect("a run panicked");
        if !report.violations.is_empty() {
            eprintln!(
                "seed {} ({}, {}, {:?}), {} violations; replay: {}",
                report.plan.seed,
                report.plan.incident,
                report.plan.mode,
                report.plan.policy,
                report.violations.len(),
                report.plan.replay()
            );
            for violation in report.violations.iter().take(3) {
                eprintln!("  {violation}");
            }
        }
        table.add(report);
        if table.runs().is_multiple_of(100) {
            eprintln!("{} runs, {:?}", table.runs(), started.elapsed());
        }
    }
    let violations = table.violations().count();
    println!(
        "{} runs (seeds {} to {}), {} with a violation, in {:.0} s\n",
        table.runs(),
        args.from,
        args.from + args.runs - 1,
        violations,
        started.elapsed().as_secs_f64()
    );
    println!("{}", table.render());
    if violations == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

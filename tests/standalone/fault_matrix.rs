//! Fixed seeds of the fault matrix (`plug_limit_tests::matrix`, run at length by the
//! `fault_matrix` example): each incident on a single server, under two modes and policies,
//! and a Sentinel failover, each run checked against the invariants the failures guide states.

use plug_limit_tests::matrix::{Plan, Report, SENTINEL, SINGLE, modes, run};
use tokio::task::JoinSet;

/// Fails naming every run that broke an invariant, with the command that replays it.
fn none_broken(reports: &[Report]) {
    let broken: Vec<String> = reports
        .iter()
        .filter(|report| !report.violations.is_empty())
        .map(|report| {
            format!(
                "seed {} ({}, {}, {:?}): {:?}\n  replay: {}",
                report.plan.seed,
                report.plan.incident,
                report.plan.mode,
                report.plan.policy,
                &report.violations[..report.violations.len().min(3)],
                report.plan.replay()
            )
        })
        .collect();
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_seeds_of_every_single_server_incident_break_nothing() {
    let incidents = SINGLE.len() as u64;
    let modes = modes().len() as u64;
    // Seeds 0 to 11 walk the incidents with the first mode (fixed_window) under `Open`; the
    // second seed of incident `i` picks another mode under `Closed` or `Memory`.
    let seeds: Vec<u64> = (0..incidents)
        .chain((0..incidents).map(|i| i + incidents * ((i * 5 + 1) % modes + modes * (1 + i % 2))))
        .collect();
    let mut reports = Vec::new();
    // Two runs at a time: each starts its own servers.
    for pair in seeds.chunks(2) {
        let mut running = JoinSet::new();
        for &seed in pair {
            running.spawn(async move { run(&Plan::new(seed, &SINGLE)).await });
        }
        while let Some(done) = running.join_next().await {
            reports.push(done.expect("a run"));
        }
    }
    assert_eq!(reports.len(), 24);
    none_broken(&reports);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_seed_of_a_sentinel_failover_breaks_nothing() {
    none_broken(&[run(&Plan::new(0, &SENTINEL)).await]);
}

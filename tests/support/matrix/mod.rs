//! The fault matrix: seeded runs of an incident against real `redis-server` processes, under
//! open-loop load past the limit from several instances, each checked against the invariants
//! the failures guide states.
//!
//! A seed draws its whole run ([`Plan::new`]): which incident, mode and failure policy, the
//! limit, the instances, the load and the schedule. [`run`] starts fresh servers, sends the
//! load while [`Lab::stage`] does the incident, reads what the store holds once it is over,
//! and [`judge`]s it. The `fault_matrix` example runs many seeds and prints the [`Table`];
//! `tests/standalone/fault_matrix.rs` runs a few fixed ones.

mod deployment;
mod judge;
mod lab;
mod plan;
mod table;

use std::time::Duration;

pub use deployment::{CLIENT, Deployment, URI};
pub use judge::{Observed, Report, fails_calls, judge, latency_bound};
pub use lab::{Lab, Timeline};
pub use plan::{
    CLUSTER, Incident, Mode, OPEN_FOR, Plan, SENTINEL, SINGLE, TIMEOUT, Topology, modes, policies,
    recovery_bound, topology,
};
pub use table::Table;

use crate::{open_loop_as, unique_prefix};

/// Runs `plan` on fresh servers and judges it.
///
/// Needs a multi-threaded Tokio runtime: starting and killing servers blocks its thread.
pub async fn run(plan: &Plan) -> Report {
    let prefix = unique_prefix("matrix");
    let mut lab = Lab::start(plan).await;
    let deployment = Deployment::new(plan, &prefix, || lab.store());
    let start = tokio::time::Instant::now();
    let (sent, timeline) = {
        // Every other request as the one client past its limit, the rest each as a client of
        // its own: one request's key, which shows whether it was counted once.
        let load = open_loop_as(
            &deployment.apps,
            URI,
            |i| {
                if i % 2 == 0 {
                    CLIENT.to_owned()
                } else {
                    format!("r{i}")
                }
            },
            plan.per_second,
            plan.load_for,
        );
        tokio::join!(load, lab.stage(plan, start))
    };
    // Settles, give-backs and releases land; a `concurrency` unit whose release was lost
    // comes back with its lease.
    let quiet = match plan.mode {
        Mode::Builtin("concurrency") if fails_calls(plan.incident) => {
            Duration::from_secs(plan::LEASE_SECS) + Duration::from_millis(300)
        }
        Mode::Batches => Duration::from_millis(700),
        _ => Duration::from_millis(100),
    };
    tokio::time::sleep(quiet).await;
    let held = deployment.held(CLIENT).await;
    let mut own_keys = Vec::new();
    for one in sent.iter().filter(|one| one.client != CLIENT) {
        own_keys.push(deployment.held(&one.client).await);
    }
    let seen = Observed {
        sent,
        began: timeline.began,
        ended: timeline.ended,
        held,
        own_keys,
        most_at_once: deployment.most_at_once(),
        evicted: timeline.evicted,
    };
    let mut report = judge(plan, &seen);
    if timeline.ended + recovery_bound(plan.incident) > plan.load_for {
        report.violations.push(format!(
            "the store served again at {:?}, too late for the load to show its recovery \
             (the load ran for {:?})",
            timeline.ended, plan.load_for
        ));
    }
    report
}

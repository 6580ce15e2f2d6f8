//! Fixed seeds of the fault matrix's cluster incidents (`plug_limit_tests::matrix`): the
//! master of the key's slot killed and started again, and killed and replaced by its replica,
//! each run checked against the invariants the failures guide states.

use plug_limit_tests::matrix::{CLUSTER, Incident, Plan, run};

async fn breaks_nothing(seed: u64, incident: Incident) {
    let plan = Plan::new(seed, &CLUSTER);
    assert_eq!(plan.incident, incident);
    let report = run(&plan).await;
    assert!(
        report.violations.is_empty(),
        "{:?}\n  replay: {}",
        &report.violations[..report.violations.len().min(3)],
        plan.replay()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_seed_of_a_killed_master_breaks_nothing() {
    breaks_nothing(0, Incident::ClusterMasterKilled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_seed_of_a_promoted_replica_breaks_nothing() {
    breaks_nothing(1, Incident::ReplicaPromoted).await;
}

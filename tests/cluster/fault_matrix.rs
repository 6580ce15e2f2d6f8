//! A fixed seed of the fault matrix's cluster incident (`plug_limit_tests::matrix`): the
//! master of the key's slot killed and started again, checked against the invariants the
//! failures guide states.

use plug_limit_tests::matrix::{CLUSTER, Incident, Plan, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_seed_of_a_killed_master_breaks_nothing() {
    let plan = Plan::new(0, &CLUSTER);
    assert_eq!(plan.incident, Incident::ClusterMasterKilled);
    let report = run(&plan).await;
    assert!(
        report.violations.is_empty(),
        "{:?}\n  replay: {}",
        &report.violations[..report.violations.len().min(3)],
        plan.replay()
    );
}

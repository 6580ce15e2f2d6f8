//! Redis Sentinel: one primary with a replica. A primary killed under load, or demoted by a
//! failover asked of Sentinel, is replaced by the promoted replica; every check during the failover fails, as a store that cannot answer,
//! within its timeout; checks are decided again within one of the breaker's probe intervals
//! of the promotion Sentinel announces (and a check's timeout); and each request is counted
//! once or not at all.

use std::time::{Duration, Instant};

use plug_limit::{CircuitBreaker, Error, Opt, PlugLimit};
use plug_limit_tests::{SentinelSet, counted_at, limit};

const OPTS: [Opt; 2] = [Opt::Int(100_000), Opt::Int(600)];
const TIMEOUT: Duration = Duration::from_millis(250);
const OPEN_FOR: Duration = Duration::from_millis(500);

/// Limits on `set`'s Sentinel pool, with `client` checked `times` (each admitted) and copied to
/// the replica before anything fails.
async fn checked_and_copied(set: &SentinelSet, client: &str, times: usize) -> PlugLimit {
    let limits = PlugLimit::builder(set.pool())
        .timeout(TIMEOUT)
        .circuit_breaker(CircuitBreaker::new(3, OPEN_FOR))
        .build()
        .unwrap();
    for _ in 0..times {
        limits
            .check(limit("fixed_window", &OPTS), client)
            .await
            .unwrap();
    }
    let mut primary = set.primary.connection().await;
    let synced: i64 = plug_limit::redis::cmd("WAIT")
        .arg(1)
        .arg(2000)
        .query_async(&mut primary)
        .await
        .unwrap();
    assert_eq!(synced, 1);
    limits
}

/// What the server on `port` counted for the programmatic key `client`.
async fn counted(port: u16, client: &str) -> i64 {
    let url = format!("redis://127.0.0.1:{port}/");
    counted_at(&url, "fixed_window", "100000,600", client).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_replaced_and_checks_are_decided_again() {
    let mut set = SentinelSet::start();
    // The replica holds the five before the primary goes.
    let limits = checked_and_copied(&set, "k", 5).await;
    let promoted_port = set.replica.port();

    set.primary.stop();
    let killed = Instant::now();
    // Requests on a clock, every 20 ms, each on its own task: a slow answer delays none.
    let mut sent = Vec::new();
    let mut promoted_at = None;
    while killed.elapsed() < Duration::from_secs(30) {
        let limits = limits.clone();
        sent.push(tokio::spawn(async move {
            let started = Instant::now();
            let result = limits.check(limit("fixed_window", &OPTS), "k").await;
            (started, started.elapsed(), result)
        }));
        if promoted_at.is_none() && set.serves_as_primary(promoted_port) {
            promoted_at = Some(Instant::now());
        }
        // Enough once the promoted replica has answered for two seconds.
        if promoted_at.is_some_and(|at| at.elapsed() > OPEN_FOR * 4 + Duration::from_secs(1)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let promoted_at = promoted_at.expect("Sentinel promoted the replica within 30 s");
    eprintln!(
        "the replica served as primary {:?} after the kill",
        promoted_at.saturating_duration_since(killed)
    );

    let (mut admitted, mut may_have_counted, mut first_decided) = (0, 0, None);
    for task in sent {
        let (started, took, result) = task.await.unwrap();
        // Within the timeout, a little scheduling aside; an open breaker answers at once.
        assert!(
            took < TIMEOUT + Duration::from_millis(250),
            "{took:?}: {result:?}"
        );
        match result {
            Ok(outcome) => {
                assert!(outcome.is_allowed());
                admitted += 1;
                first_decided.get_or_insert(started);
            }
            // A timed-out call may have reached the new primary and counted there.
            Err(Error::Timeout(_)) => may_have_counted += 1,
            Err(Error::Redis(_) | Error::Pool(_) | Error::CircuitOpen(_)) => {}
            Err(other) => panic!("a check failed otherwise than by the store: {other:?}"),
        }
    }
    let first_decided = first_decided.expect("checks were decided again");
    // Decided again within a probe interval of the promotion: a probe that failed just
    // before it opened the breaker for one more interval at most (and a check's timeout, the
    // 20 ms the promotion was looked for at, and a loaded machine's delays).
    assert!(
        first_decided <= promoted_at + OPEN_FOR + TIMEOUT + Duration::from_millis(200),
        "first decided {:?} after the promotion",
        first_decided.saturating_duration_since(promoted_at)
    );
    // Counted once or not at all: the promoted replica holds the five, every admitted check,
    // and at most the timed-out ones.
    let counted = counted(promoted_port, "k").await;
    assert!(
        (5 + admitted..=5 + admitted + may_have_counted).contains(&counted),
        "counted {counted}, admitted {admitted}, timed out {may_have_counted}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_demoted_to_replica_is_left_for_the_promoted_one() {
    let set = SentinelSet::start();
    let limits = checked_and_copied(&set, "d", 3).await;
    let promoted_port = set.replica.port();

    // The old primary keeps serving, as a replica; Sentinel closes its clients as it demotes
    // it, and the next connection must go to the promoted one.
    set.fail_over();
    let (demoted_port, started) = (set.primary.port(), Instant::now());
    let (mut demoted_at, mut decided_at) = (None, None);
    while started.elapsed() < Duration::from_secs(30) && decided_at.is_none() {
        if demoted_at.is_none() && SentinelSet::is_replica(demoted_port) {
            demoted_at = Some(Instant::now());
        }
        let sent = Instant::now();
        let result = limits.check(limit("fixed_window", &OPTS), "d").await;
        assert!(
            sent.elapsed() < TIMEOUT + Duration::from_millis(250),
            "{result:?}"
        );
        match result {
            // Once the old primary is a replica, only the promoted one can admit.
            Ok(_) if demoted_at.is_some() => decided_at = Some(sent),
            Ok(_)
            | Err(Error::Timeout(_) | Error::Redis(_) | Error::Pool(_) | Error::CircuitOpen(_)) => {
            }
            Err(other) => panic!("a check failed otherwise than by the store: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let demoted_at = demoted_at.expect("Sentinel demoted the old primary within 30 s");
    let decided_at = decided_at.expect("checks were decided again on the promoted replica");
    assert!(
        decided_at <= demoted_at + OPEN_FOR * 2 + TIMEOUT + Duration::from_millis(400),
        "decided again {:?} after the old primary became a replica",
        decided_at.saturating_duration_since(demoted_at)
    );
    // Every check from now on is counted once, on the promoted replica.
    let before = counted(promoted_port, "d").await;
    for _ in 0..5 {
        limits
            .check(limit("fixed_window", &OPTS), "d")
            .await
            .unwrap();
    }
    assert_eq!(counted(promoted_port, "d").await, before + 5);
}

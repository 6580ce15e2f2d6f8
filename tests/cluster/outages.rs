//! A master down: the keys of the live masters go on being decided, the dead master's keys follow
//! the failure policy (at once, once its breaker is open), and come back with the master.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::{Router, routing::get};
use metrics_util::debugging::DebuggingRecorder;
use plug_limit::{CircuitBreaker, FailurePolicy, FixedWindow, Opt, PlugLimit, RateLimited, key};
use plug_limit_tests::{Logs, RedisCluster, get as send_get, stored_key, unique_prefix};

use crate::metric_values::metric_values;
use crate::slots::Slots;
use plug_limit_tests::limit;

type Wide = RateLimited<FixedWindow<1_000_000, 600>>;

async fn wide(limited: Wide) -> (Wide, &'static str) {
    (limited, "ok")
}

/// One request as the outage test reads it.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// When it was sent, from the start of the load.
    at: Duration,
    took: Duration,
    /// Whether the master owning its key is the one killed.
    dead: bool,
    /// Decided (200 with its headers), or the failure policy's answer (`Closed`: 503).
    decided: bool,
}

/// `per` clients of each master, named so their keys spread over its slots.
async fn clients_by_owner(
    cluster: &RedisCluster,
    prefix: &str,
    per: usize,
) -> BTreeMap<u16, Vec<String>> {
    let mut slots = Slots::read(cluster).await;
    let mut by_owner: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    let mut i = 0;
    while by_owner.len() < cluster.ports().len() || by_owner.values().any(|c| c.len() < per) {
        let client = format!("client-{i}");
        i += 1;
        let owner = slots
            .owner(&stored_key(
                prefix,
                "fixed_window",
                "1000000,600",
                "/",
                &client,
            ))
            .await;
        let clients = by_owner.entry(owner).or_default();
        if clients.len() < per {
            clients.push(client);
        }
    }
    by_owner
}

/// Runs `f` on the cluster off the runtime's thread (killing and starting a node blocks), and
/// gives the cluster back.
async fn blocking(
    cluster: RedisCluster,
    f: impl FnOnce(&mut RedisCluster) + Send + 'static,
) -> RedisCluster {
    tokio::task::spawn_blocking(move || {
        let mut cluster = cluster;
        f(&mut cluster);
        cluster
    })
    .await
    .unwrap()
}

/// The samples of `of` sent from `from` (inclusive) to `to` (exclusive).
fn between(of: &[Sample], from: Duration, to: Duration) -> Vec<Sample> {
    of.iter()
        .filter(|s| s.at >= from && s.at < to)
        .copied()
        .collect()
}

/// How soon a master's keys are decided again once it serves: a probe sent just before may
/// still fail (its timeout), then the breaker waits `open_for`, and the next probe answers.
fn back_within(breaker: CircuitBreaker, timeout: Duration) -> Duration {
    breaker.open_for() + 2 * timeout
}

fn decided(of: &[Sample]) -> usize {
    of.iter().filter(|s| s.decided).count()
}

// One thread: the captured log and the metrics recorder are the thread's own.
#[tokio::test]
async fn a_dead_master_stops_only_its_own_keys_and_is_back_within_a_probe() {
    const WORKERS: usize = 20;
    let timeout = TIMEOUT;
    let breaker = CircuitBreaker::default();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let (logs, _guard) = Logs::capture();
    let cluster = RedisCluster::start();
    let (limits, prefix) = warmed_up(&cluster, "outage").await;
    let app = Router::new().route("/", get(wide)).with_state(limits);
    let ports = cluster.ports().to_vec();
    let dead = ports[1];
    let clients: Vec<(bool, String)> = clients_by_owner(&cluster, &prefix, 20)
        .await
        .into_iter()
        .flat_map(|(owner, names)| names.into_iter().map(move |name| (owner == dead, name)))
        .collect();

    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let start = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let app = app.clone();
            let clients = clients.clone();
            let samples = Arc::clone(&samples);
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let mut i = w;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (dead, client) = &clients[i % clients.len()];
                    i += WORKERS;
                    let at = start.elapsed();
                    let reply = send_get(&app, "/", client).await;
                    let took = start.elapsed() - at;
                    let decided = match reply.status.as_u16() {
                        200 => true,
                        503 => false,
                        status => panic!("{status} for {client}"),
                    };
                    assert_eq!(reply.header("x-ratelimit-limit").is_some(), decided);
                    samples.lock().unwrap().push(Sample {
                        at,
                        took,
                        dead: *dead,
                        decided,
                    });
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let cluster = blocking(cluster, move |c| c.stop(dead)).await;
    // Once it has exited: a check sent while it was being killed may have been decided.
    let killed = start.elapsed();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let outage = metric_values(&snapshotter);
    let restarted = start.elapsed();
    let cluster = blocking(cluster, move |c| c.restart(dead)).await;
    // A restarted master answers CLUSTERDOWN for a moment (Redis's rejoin delay): it is back
    // when it serves its slots again.
    let cluster = blocking(cluster, move |c| c.wait_serving(dead)).await;
    let serving = start.elapsed();
    tokio::time::sleep(breaker.open_for() + Duration::from_secs(1)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    let end = start.elapsed();
    let after = metric_values(&snapshotter);
    drop(cluster);

    let samples = samples.lock().unwrap().clone();
    let (dead_keys, live_keys): (Vec<Sample>, Vec<Sample>) = samples.iter().partition(|s| s.dead);
    let before_kill = between(&samples, Duration::ZERO, killed);
    let live = between(&live_keys, killed, end);
    // The first checks of the dead master wait out the timeout; once `failures` of them have,
    // its breaker is open.
    let open = between(&dead_keys, killed + 2 * timeout, restarted);
    let at_once = open
        .iter()
        .filter(|s| s.took < Duration::from_millis(20))
        .count();
    let first_decided = dead_keys
        .iter()
        .filter(|s| s.at > killed && s.decided)
        .map(|s| s.at)
        .min()
        .unwrap();
    let recovery = first_decided.saturating_sub(serving);
    let back_within = back_within(breaker, timeout);
    let late = between(&dead_keys, serving + back_within, end);
    eprintln!(
        "killed at {killed:?}, restarted at {restarted:?}, serving at {serving:?}: \
         live keys decided {} of {}; the dead master's {} of {} at once while open; \
         its keys decided again {recovery:?} after it served",
        decided(&live),
        live.len(),
        at_once,
        open.len(),
    );

    // Every check is decided before the kill, and the live masters' keys after it, as if
    // nothing happened (a busy machine may let a check here and there time out).
    assert!(
        decided(&before_kill) * 100 >= before_kill.len() * 99,
        "{} of {}",
        decided(&before_kill),
        before_kill.len()
    );
    assert!(
        decided(&live) * 100 >= live.len() * 99,
        "{} of {}",
        decided(&live),
        live.len()
    );
    assert!(live.len() > 1_000, "{}", live.len());
    // The dead master's keys follow the policy (`Closed`: 503) within the timeout...
    let down = between(&dead_keys, killed, restarted);
    assert_eq!(decided(&down), 0);
    let slowest = down.iter().map(|s| s.took).max().unwrap();
    assert!(
        slowest < timeout + Duration::from_millis(100),
        "{slowest:?}"
    );
    // ...and at once while its breaker is open: one probe a second waits.
    assert!(open.len() > 500, "{}", open.len());
    assert!(
        at_once * 100 >= open.len() * 99,
        "{at_once} of {}",
        open.len()
    );
    // Back within the probe interval of serving again, and decided from then on.
    assert!(
        recovery <= back_within,
        "decided again {recovery:?} after it served"
    );
    assert!(!late.is_empty());
    assert_eq!(decided(&late), late.len());

    // The log and the metrics name the dead master, and only it.
    let node = format!("127.0.0.1:{dead}");
    let text = logs.text();
    let opened =
        format!("circuit breaker open for 1s after 5 consecutive redis failures on node {node}");
    assert!(text.contains(&opened), "{text}");
    assert_eq!(
        text.matches(&format!(
            "redis answers again: circuit breaker closed on node {node}"
        ))
        .count(),
        1,
        "{text}"
    );
    let transitions_logged: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("circuit breaker open for") || line.contains("breaker closed"))
        .collect();
    assert!(
        transitions_logged.iter().all(|line| line.ends_with(&node)),
        "{text}"
    );

    let gauge =
        |port: u16| format!("gauge plug_limit_breaker_open{{node=127.0.0.1:{port},pool=default}}");
    let transitions = |state: &str| {
        format!(
            "counter plug_limit_breaker_transitions_total{{node={node},pool=default,state={state}}}"
        )
    };
    for &port in &ports {
        let want = if port == dead { "1" } else { "0" };
        assert_eq!(
            outage.get(&gauge(port)).map(String::as_str),
            Some(want),
            "{outage:#?}"
        );
    }
    assert_eq!(
        outage.get(&transitions("open")).map(String::as_str),
        Some("1")
    );
    assert_eq!(
        after.get(&gauge(dead)).map(String::as_str),
        Some("0"),
        "{after:#?}"
    );
    assert_eq!(
        after.get(&transitions("closed")).map(String::as_str),
        Some("1")
    );
    let transitions_seen = outage
        .keys()
        .chain(after.keys())
        .filter(|name| name.contains("breaker_transitions"))
        .all(|name| name.contains(&node));
    assert!(transitions_seen, "{outage:#?} {after:#?}");
}

/// The timeout of every check in these tests.
const TIMEOUT: Duration = Duration::from_millis(300);

/// A cluster's limits as these tests use them: [`TIMEOUT`], the default breaker, and `Closed`,
/// so a failed check is a 503.
fn closed_limits(cluster: &RedisCluster, prefix: &str) -> PlugLimit {
    PlugLimit::builder(cluster.pool())
        .prefix(prefix)
        .timeout(TIMEOUT)
        .on_failure(FailurePolicy::Closed)
        .key(key::header("x-client"))
        .build()
        .unwrap()
}

/// [`closed_limits`] under a prefix of `test`'s own, connected ([`warm_up`]).
async fn warmed_up(cluster: &RedisCluster, test: &str) -> (PlugLimit, String) {
    let prefix = unique_prefix(test);
    let limits = closed_limits(cluster, &prefix);
    warm_up(&limits).await;
    (limits, prefix)
}

/// Checks until one is decided: on a busy machine the first connection to a new cluster may
/// take longer than the timeout. It also reads the cluster's slot map.
async fn warm_up(limits: &PlugLimit) {
    let started = Instant::now();
    while limits
        .check(
            limit("fixed_window", &[Opt::Int(1_000), Opt::Int(60)]),
            "warm-up",
        )
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never connected"
        );
    }
    // The slot map is read in a task of its own.
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Whether `client`'s check was decided (a 503 is the failure policy's answer).
async fn is_decided(app: &Router, client: &str) -> bool {
    match send_get(app, "/", client).await.status.as_u16() {
        200 => true,
        503 => false,
        status => panic!("{status} for {client}"),
    }
}

#[tokio::test]
async fn a_replica_that_takes_over_a_dead_master_is_used_within_a_probe() {
    let breaker = CircuitBreaker::default();
    let timeout = TIMEOUT;
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let cluster = RedisCluster::start_with_replica();
    let (limits, prefix) = warmed_up(&cluster, "failover").await;
    let app = Router::new().route("/", get(wide)).with_state(limits);
    let master = cluster.ports()[0];
    let replica = cluster.replica().unwrap();
    let clients = clients_by_owner(&cluster, &prefix, 5).await[&master].clone();
    for client in &clients {
        assert!(is_decided(&app, client).await);
    }

    let cluster = blocking(cluster, move |c| c.stop(master)).await;
    let start = Instant::now();
    let promoted = tokio::task::spawn_blocking(move || {
        while !cluster.is_master(replica) {
            std::thread::sleep(Duration::from_millis(10));
        }
        (start.elapsed(), cluster)
    });
    let mut samples = Vec::new();
    let mut promoted = Some(promoted);
    let mut took_over = None;
    let mut i = 0;
    loop {
        let at = start.elapsed();
        let decided = is_decided(&app, &clients[i % clients.len()]).await;
        i += 1;
        samples.push((at, decided));
        if promoted
            .as_ref()
            .is_some_and(tokio::task::JoinHandle::is_finished)
        {
            took_over = Some(promoted.take().unwrap().await.unwrap());
        }
        if let Some((at, _)) = &took_over
            && start.elapsed() > *at + back_within(breaker, timeout) + Duration::from_secs(1)
        {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no failover");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (promoted, cluster) = took_over.unwrap();
    let first = samples
        .iter()
        .find(|(at, decided)| {
            *decided && *at >= promoted.saturating_sub(Duration::from_millis(100))
        })
        .map(|(at, _)| *at)
        .unwrap();
    let after = first.saturating_sub(promoted);
    eprintln!("replica a master {promoted:?} after the kill; its keys decided {after:?} later");
    assert!(
        samples
            .iter()
            .any(|(at, decided)| *at < promoted && !*decided)
    );
    assert!(after <= back_within(breaker, timeout), "{after:?}");
    let late: Vec<_> = samples
        .iter()
        .filter(|(at, _)| *at > promoted + back_within(breaker, timeout))
        .collect();
    assert!(late.len() > 10, "{}", late.len());
    assert!(late.iter().all(|(_, decided)| *decided));
    // The map was read again: the promoted replica is a master with a breaker of its own,
    // closed, and the dead master's breaker no longer reads open.
    let gauges = metric_values(&snapshotter);
    let gauge = |port: u16| {
        let name = format!("gauge plug_limit_breaker_open{{node=127.0.0.1:{port},pool=default}}");
        gauges.get(&name).cloned()
    };
    assert_eq!(gauge(replica).as_deref(), Some("0"), "{gauges:#?}");
    assert_eq!(gauge(master).as_deref(), Some("0"), "{gauges:#?}");
    drop(cluster);
}

/// A cluster whose first master gave the slot of one of its clients (`moves`) to the second,
/// which is then killed; `stays` is another client of the first master. The app's slot map
/// was read before the move, so it still places `moves` on the first master.
struct MovedSlot {
    cluster: RedisCluster,
    app: Router,
    stays: String,
    moves: String,
}

async fn moved_slot(test: &str) -> MovedSlot {
    let cluster = RedisCluster::start();
    let (limits, prefix) = warmed_up(&cluster, test).await;
    let app = Router::new().route("/", get(wide)).with_state(limits);
    let [from, to] = [cluster.ports()[0], cluster.ports()[1]];
    let [stays, moves] =
        <[String; 2]>::try_from(clients_by_owner(&cluster, &prefix, 2).await[&from].clone())
            .unwrap();
    assert!(is_decided(&app, &stays).await);
    let slot = Slots::read(&cluster)
        .await
        .slot(&stored_key(
            &prefix,
            "fixed_window",
            "1000000,600",
            "/",
            &moves,
        ))
        .await;
    cluster.move_slot(slot, to);
    let cluster = blocking(cluster, move |c| c.stop(to)).await;
    MovedSlot {
        cluster,
        app,
        stays,
        moves,
    }
}

#[tokio::test]
async fn a_master_whose_slot_moved_away_is_not_kept_open_by_that_slots_failures() {
    let timeout = TIMEOUT;
    let MovedSlot {
        cluster,
        app,
        stays,
        moves,
    } = moved_slot("moved").await;

    // `moves`'s checks now fail on `to`, while the map still says `from`: enough of them open
    // a breaker, and its master no longer owns their slot.
    let failing: Vec<_> = (0..5)
        .map(|_| {
            let app = app.clone();
            let moves = moves.clone();
            tokio::spawn(async move { is_decided(&app, &moves).await })
        })
        .collect();
    for check in failing {
        assert!(!check.await.unwrap());
    }
    let opened = Instant::now();
    let decided = loop {
        if is_decided(&app, &stays).await {
            break opened.elapsed();
        }
        assert!(opened.elapsed() < Duration::from_secs(2), "never decided");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    eprintln!("{stays} decided {decided:?} after {moves}'s failures opened a breaker");
    assert!(decided < timeout / 2, "{decided:?}");
    drop(cluster);
}

#[tokio::test]
async fn a_stack_with_a_limit_on_a_dead_master_fails_at_once_counting_nothing_once_known() {
    let cluster = RedisCluster::start();
    let (limits, prefix) = warmed_up(&cluster, "stack_outage").await;
    let [live, dead] = [cluster.ports()[0], cluster.ports()[1]];
    let by_owner = clients_by_owner(&cluster, &prefix, 1).await;
    let (ann, team) = (by_owner[&live][0].as_str(), by_owner[&dead][0].as_str());
    let window = [Opt::Int(100), Opt::Int(600)];
    let stack = [
        (limit("fixed_window", &window[..]), ann),
        (limit("fixed_window", &window[..]), team),
    ];
    let alone = [(limit("fixed_window", &window[..]), ann)];
    let left = async |limits: &PlugLimit| {
        let peek = limits
            .peek(limit("fixed_window", &window), ann)
            .await
            .unwrap();
        peek.header("x-ratelimit-remaining")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert!(limits.check_all(&stack).await.unwrap().is_allowed());
    let cluster = blocking(cluster, move |c| c.stop(dead)).await;

    // Until the dead master's breaker opens, each stack counts for ann, then fails on the
    // team's master: the groups before a failure keep what they counted.
    for _ in 0..5 {
        let started = Instant::now();
        let error = limits.check_all(&stack).await.unwrap_err();
        assert!(matches!(error, plug_limit::Error::Timeout(_)), "{error}");
        assert!(started.elapsed() < Duration::from_millis(400));
    }
    assert_eq!(left(&limits).await, "93");
    // Open: the stack fails at once and counts nothing.
    for _ in 0..20 {
        let started = Instant::now();
        let error = limits.check_all(&stack).await.unwrap_err();
        assert!(
            matches!(error, plug_limit::Error::CircuitOpen(_)),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_millis(20));
    }
    assert_eq!(left(&limits).await, "93");
    // A stack wholly on live masters is decided as if nothing happened.
    assert!(limits.check_all(&alone).await.unwrap().is_allowed());
    assert_eq!(left(&limits).await, "92");
    drop(cluster);
}

#[tokio::test]
async fn a_slot_moved_to_a_dead_master_is_refused_at_once_while_its_old_master_answers() {
    let timeout = TIMEOUT;
    let MovedSlot {
        cluster,
        app,
        stays,
        moves,
    } = moved_slot("moved_mixed").await;

    // One check of each in turn: `from`'s successes keep its breaker closed, so only a map
    // read again after the failures finds `moves`'s slot on the dead master.
    let start = Instant::now();
    let mut moved = Vec::new();
    while start.elapsed() < Duration::from_secs(3) {
        assert!(is_decided(&app, &stays).await);
        let at = start.elapsed();
        assert!(!is_decided(&app, &moves).await);
        moved.push((at, start.elapsed() - at));
    }
    let late: Vec<Duration> = moved
        .iter()
        .filter(|(at, _)| *at > Duration::from_millis(1_500))
        .map(|(_, took)| *took)
        .collect();
    let at_once = late
        .iter()
        .filter(|took| **took < Duration::from_millis(20))
        .count();
    eprintln!(
        "{} checks of the moved slot; after 1.5 s, {at_once} of {} at once",
        moved.len(),
        late.len()
    );
    assert!(late.len() > 20, "{}", late.len());
    assert!(
        at_once * 10 >= late.len() * 9,
        "{at_once} of {}",
        late.len()
    );
    assert!(
        late.iter()
            .all(|took| *took < timeout + Duration::from_millis(100))
    );
    drop(cluster);
}

#[tokio::test]
async fn an_idle_check_on_a_live_master_is_decided_while_another_master_is_frozen() {
    let cluster = RedisCluster::start();
    let (limits, prefix) = warmed_up(&cluster, "idle").await;
    let app = Router::new().route("/", get(wide)).with_state(limits);
    let [live, frozen] = [cluster.ports()[0], cluster.ports()[1]];
    let client = clients_by_owner(&cluster, &prefix, 1).await[&live][0].clone();
    cluster.freeze(frozen);
    // Each check follows more than a second without one: the shared connection is idle, and
    // no PING to every master (the frozen one too) stands between it and its answer.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let started = Instant::now();
        assert!(is_decided(&app, &client).await);
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "{:?}",
            started.elapsed()
        );
    }
    cluster.thaw(frozen);
}

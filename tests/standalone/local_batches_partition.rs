//! A region cut off from the store, under `FailurePolicy::LocalShare`: the cut instance
//! admits a hot key's requests at the rate its batches were granted before the cut, so the
//! limit is passed by at most its share while the other instance still reaches Redis. Load
//! open-loop (on a clock), past the limit, through relays, one of which goes silent.

use std::time::Duration;

use axum::{Router, routing::get};
use plug_limit::{FailurePolicy, Limit, Limiter, LocalBatches, Opt, PlugLimit, RateLimited, key};
use plug_limit_tests::{Fault, FaultProxy, RedisServer, Sent, open_loop, pool, unique_prefix};

/// 200 a second (12,000 a minute refilled evenly, a burst of 100).
struct Steady;

impl Limit for Steady {
    const LIMITER: &'static str = "steady";
    const OPTS: &'static [Opt] = &[Opt::Int(12_100), Opt::Int(60), Opt::Int(100)];
}

async fn steady(limited: RateLimited<Steady>) -> (RateLimited<Steady>, &'static str) {
    (limited, "ok")
}

const TIMEOUT: Duration = Duration::from_millis(500);

fn instance(proxy: &FaultProxy, prefix: &str, policy: FailurePolicy) -> Router {
    let limits = PlugLimit::builder(pool(&proxy.url()))
        .prefix(prefix)
        .key(key::header("x-client"))
        .timeout(TIMEOUT)
        .limiter(
            "steady",
            Limiter::token_bucket()
                .local_batches(LocalBatches::new(100))
                .on_failure(policy),
        )
        .build()
        .unwrap();
    Router::new().route("/", get(steady)).with_state(limits)
}

/// What one instance admitted in each second of a run, and what its policy passed unchecked.
fn admitted_between(sent: &[Sent], instance: usize, from: Duration, to: Duration) -> usize {
    sent.iter()
        .filter(|sent| sent.instance == instance && sent.at >= from && sent.at < to)
        .filter(|sent| sent.status == 200)
        .count()
}

/// Two instances share 200 a second under a flood of 600; then the second's link goes silent
/// for 3 s. Returns every request sent, and whether the second then reached Redis again
/// within 2 s of its link coming back (a request of another client made a script call).
async fn cut_off(policy: FailurePolicy) -> (Vec<Sent>, bool) {
    let redis = RedisServer::start();
    let (near, far) = (
        FaultProxy::start(redis.addr()),
        FaultProxy::start(redis.addr()),
    );
    near.set(Fault::Latency(Duration::from_millis(5)));
    far.set(Fault::Latency(Duration::from_millis(20)));
    let prefix = unique_prefix("partition");
    let apps = [
        instance(&near, &prefix, policy),
        instance(&far, &prefix, policy),
    ];
    let far_app = apps[1].clone();
    let load = tokio::spawn(async move {
        open_loop(&apps, "/", "everyone", 600, Duration::from_secs(7)).await
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    far.set(Fault::Blackhole);
    tokio::time::sleep(Duration::from_secs(3)).await;
    far.set(Fault::Latency(Duration::from_millis(20)));
    let sent = load.await.unwrap();
    let mut decided_again = false;
    for _ in 0..20 {
        let before = redis.script_calls().await;
        let reply = plug_limit_tests::get(&far_app, "/", "another").await;
        if reply.status == 200 && redis.script_calls().await > before {
            decided_again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (sent, decided_again)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_instance_admits_its_recent_share_and_no_more() {
    let (sent, decided_again) = cut_off(FailurePolicy::LocalShare).await;
    let second = |from: u64, to: u64| (Duration::from_secs(from), Duration::from_secs(to));
    // Before the cut (past the first second's burst), the far instance's share of 200 a second.
    let (from, to) = second(1, 3);
    let share = admitted_between(&sent, 1, from, to) as f64 / 2.0;
    assert!(share >= 30.0, "the far instance's share: {share} a second");
    // During the cut (past its first second, while the silence is learnt): its share, and
    // the near instance the whole limit from Redis.
    let (from, to) = second(4, 6);
    let far = admitted_between(&sent, 1, from, to) as f64 / 2.0;
    let near = admitted_between(&sent, 0, from, to) as f64 / 2.0;
    assert!(
        far <= share * 1.3 + 5.0 && far >= share * 0.5,
        "the cut instance admitted {far} a second on a share of {share}"
    );
    assert!(
        (170.0..=215.0).contains(&near),
        "the instance reaching Redis admitted {near} a second of 200"
    );
    // Nothing passed unchecked, and nothing waited past the timeout.
    assert!(
        sent.iter()
            .all(|sent| matches!(sent.status.as_u16(), 200 | 429) && sent.limited),
        "a request was passed by the policy or failed"
    );
    let slowest = sent.iter().map(|sent| sent.latency).max().unwrap();
    assert!(
        slowest <= TIMEOUT + Duration::from_millis(100),
        "{slowest:?}"
    );
    // Once the cut is known (a reservation failed), the cut instance answers at once: no
    // request waits on the silent link but those that learnt it.
    let mut cut: Vec<Duration> = sent
        .iter()
        .filter(|sent| sent.instance == 1)
        .filter(|sent| sent.at >= Duration::from_secs(4) && sent.at < Duration::from_secs(6))
        .map(|sent| sent.latency)
        .collect();
    cut.sort();
    let p99 = cut[cut.len() * 99 / 100];
    assert!(
        p99 < Duration::from_millis(50),
        "p99 {p99:?} during the cut"
    );
    // Once the link is back, the far instance is decided by Redis again.
    assert!(
        decided_again,
        "the far instance did not reach Redis after the cut"
    );
}

/// The same cut under `Open`: the cut instance passes every request it cannot decide, so the
/// limit is passed by the whole of its load, where `LocalShare` bounds it by its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_open_a_cut_off_instance_passes_its_whole_load() {
    let (sent, _) = cut_off(FailurePolicy::Open).await;
    let during = |sent: &&Sent| {
        sent.instance == 1 && sent.at >= Duration::from_secs(4) && sent.at < Duration::from_secs(6)
    };
    let passed = sent
        .iter()
        .filter(during)
        .filter(|sent| sent.status == 200 && !sent.limited)
        .count();
    // 300 a second reach the far instance: nearly all pass.
    assert!(passed >= 500, "{passed} passed unchecked in 2 s");
}

/// `LocalShare` decides by a limiter's local batches: `build` refuses it for all limiters at
/// once, or on one without batches, naming the field.
#[test]
fn local_share_needs_local_batches() {
    let pool = || plug_limit_tests::pool("redis://127.0.0.1:1/");
    let refused = PlugLimit::builder(pool())
        .on_failure(FailurePolicy::LocalShare)
        .build()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid `on_failure`: `local_share` decides by a limiter's local batches: set it on such a limiter, not for all"
    );
    let refused = PlugLimit::builder(pool())
        .limiter(
            "plain",
            Limiter::fixed_window().on_failure(FailurePolicy::LocalShare),
        )
        .build()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid `limiters.plain.on_failure`: `local_share` decides by the limiter's local batches: it needs `local_batches`"
    );
}

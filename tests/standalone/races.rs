//! Racing requests: the limit holds exactly, within one instance and across instances that
//! share one Redis.

use axum::{Router, routing::get};
use plug_limit::{FixedWindow, PlugLimit, RateLimited, key};
use plug_limit_tests::{RedisServer, get as send_get};

type Fifty = RateLimited<FixedWindow<50, 60>>;

async fn fifty(limited: Fifty) -> (Fifty, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new().route("/", get(fifty)).with_state(limits)
}

fn limits(redis: &RedisServer) -> PlugLimit {
    PlugLimit::builder(redis.pool())
        .key(key::header("x-client"))
        .build()
        .unwrap()
}

/// Fires `n` requests at once, alternating between `apps`, and counts the statuses.
async fn race(apps: &[Router], n: usize) -> (usize, usize) {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let app = apps[i % apps.len()].clone();
            tokio::spawn(async move { send_get(&app, "/", "racer").await.status.as_u16() })
        })
        .collect();
    let (mut ok, mut denied) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            200 => ok += 1,
            429 => denied += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    (ok, denied)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_racing_requests_admit_exactly_fifty() {
    let redis = RedisServer::start();
    let apps = [app(limits(&redis))];
    assert_eq!(race(&apps, 200).await, (50, 150));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_with_separate_pools_share_one_limit() {
    let redis = RedisServer::start();
    // Two app instances: separate PlugLimit handles, separate pools, one Redis.
    let apps = [app(limits(&redis)), app(limits(&redis))];
    assert_eq!(race(&apps, 200).await, (50, 150));
}

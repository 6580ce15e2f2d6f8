//! The built-in Lua scripts on a real Redis, called directly with EVALSHA: the shared scenarios
//! of `plug_limit/src/algorithm/scenarios.rs` (which the Rust mirror's unit tests run too), with an explicit
//! `now` so no test sleeps; then what only Redis can show: TTLs, server time, members.

use std::time::{SystemTime, UNIX_EPOCH};

use deadpool_redis::redis::{self, Script, Value, aio::MultiplexedConnection};
use plug_limit_tests::{RedisServer, unique_prefix};

#[path = "../../plug_limit/src/algorithm/scenarios.rs"]
mod scenarios;

fn script(limiter: &str) -> Script {
    Script::new(match limiter {
        "fixed_window" => include_str!("../../lua/fixed_window.lua"),
        "token_bucket" => include_str!("../../lua/token_bucket.lua"),
        "sliding_window" => include_str!("../../lua/sliding_window.lua"),
        "sliding_log" => include_str!("../../lua/sliding_log.lua"),
        "leaky_bucket" => include_str!("../../lua/leaky_bucket.lua"),
        "gcra" => include_str!("../../lua/gcra.lua"),
        "multi_window" => include_str!("../../lua/multi_window.lua"),
        "calendar_quota" => include_str!("../../lua/calendar_quota.lua"),
        "concurrency" => include_str!("../../lua/concurrency.lua"),
        other => panic!("no script {other}"),
    })
}

fn real_now_ms() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since_epoch.as_millis()).unwrap()
}

/// One EVALSHA with ARGV = `opts` then `tail` (cost, now), its reply rendered as the
/// scenarios write it.
async fn eval(
    conn: &mut MultiplexedConnection,
    (limiter, key): (&str, &str),
    opts: &[&str],
    tail: &[impl redis::ToRedisArgs],
) -> String {
    let script = script(limiter);
    let mut invocation = script.key(key);
    invocation.arg(opts).arg(tail);
    match invocation.invoke_async::<Value>(conn).await {
        Ok(reply) => render(limiter, reply),
        Err(err) => {
            assert_eq!(err.code(), Some("ERR"), "{err}");
            format!("error {}", err.detail().unwrap_or_default())
        }
    }
}

fn render(limiter: &str, reply: Value) -> String {
    let text = |value: &Value| match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        other => panic!("not a bulk string: {other:?}"),
    };
    let Value::Array(items) = reply else {
        panic!("not an array: {reply:?}")
    };
    // A batch's `~n` reply carries the units it granted and the milliseconds left of their
    // window after the headers, and multi_window's every reply the window that decided.
    let (decision, headers, granted, window) = match items.as_slice() {
        [decision, Value::Array(headers)] => (decision, headers, None, None),
        [decision, Value::Array(headers), Value::Int(window)] if limiter == "multi_window" => {
            (decision, headers, None, Some(*window))
        }
        [
            decision,
            Value::Array(headers),
            Value::Int(granted),
            Value::Int(window_ms),
        ] => (
            decision,
            headers,
            Some((u32::try_from(*granted).unwrap(), *window_ms)),
            None,
        ),
        _ => panic!("not {{decision, headers[, granted and ms, or window]}}: {items:?}"),
    };
    let headers: Vec<String> = headers.iter().map(text).collect();
    scenarios::render(text(decision) == "allow", &headers, granted, window)
}

async fn query<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    cmd: &str,
    key: &str,
) -> T {
    redis::cmd(cmd).arg(key).query_async(conn).await.unwrap()
}

/// Typical opts for each script.
const CATALOGUE: [(&str, &[&str]); 8] = [
    ("fixed_window", &["10", "60"]),
    ("token_bucket", &["20", "600", "5"]),
    ("sliding_window", &["10", "60"]),
    ("sliding_log", &["10", "60"]),
    ("leaky_bucket", &["10", "60"]),
    ("gcra", &["20", "600", "5"]),
    ("multi_window", &["1/5", "5/3600"]),
    ("calendar_quota", &["10000", "day", "-300"]),
];

#[tokio::test]
async fn scenarios_get_the_same_replies_from_the_scripts() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    for scenario in scenarios::SCENARIOS {
        let key = unique_prefix("scenario");
        let start = scenarios::start(real_now_ms());
        for (i, call) in scenario.calls.iter().enumerate() {
            let tail = [call.cost.arg(), (start + call.at_ms).to_string()];
            let got = eval(&mut conn, (scenario.limiter, &key), scenario.opts, &tail).await;
            assert_eq!(got, call.expect, "{} call {i}", scenario.name);
        }
    }
    for (start, scenario) in scenarios::ANCHORED {
        let key = unique_prefix("anchored");
        for (i, call) in scenario.calls.iter().enumerate() {
            let tail = [call.cost.arg(), (start + call.at_ms).to_string()];
            let got = eval(&mut conn, (scenario.limiter, &key), scenario.opts, &tail).await;
            assert_eq!(got, call.expect, "{} call {i}", scenario.name);
        }
    }
    for line in scenarios::REFUSED {
        let (limiter, opts, expect) = scenarios::refused(line);
        let key = unique_prefix("refused");
        let got = eval(&mut conn, (limiter, &key), &opts, &[1, real_now_ms()]).await;
        assert_eq!(got, expect, "{line}");
    }
}

#[tokio::test]
async fn every_key_written_gets_a_ttl_and_a_peek_writes_none() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let start = scenarios::start(real_now_ms());
    for (limiter, opts) in CATALOGUE {
        for tail in [vec![], vec![1], vec![1, start]] {
            let key = unique_prefix(limiter);
            let reply = eval(&mut conn, (limiter, &key), opts, &tail).await;
            assert!(reply.starts_with("allow"), "{limiter} {tail:?}: {reply}");
            let pttl: i64 = query(&mut conn, "PTTL", &key).await;
            assert!(pttl > 0, "{limiter} {tail:?}: PTTL {pttl}");
        }
        let key = unique_prefix(limiter);
        for tail in [vec![0], vec![0, start]] {
            let reply = eval(&mut conn, (limiter, &key), opts, &tail).await;
            assert!(reply.starts_with("allow"), "{limiter} peek: {reply}");
        }
        let exists: i64 = query(&mut conn, "EXISTS", &key).await;
        assert_eq!(exists, 0, "{limiter}: a peek wrote its key");
    }
}

#[tokio::test]
async fn new_scripts_decide_by_server_time_without_now() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let cases: [(&str, &[&str]); 5] = [
        ("sliding_window", &["2", "60"]),
        ("sliding_log", &["2", "60"]),
        ("leaky_bucket", &["2", "60"]),
        ("gcra", &["2", "60", "2"]),
        ("multi_window", &["2/60", "5/3600"]),
    ];
    for (limiter, opts) in cases {
        let key = unique_prefix(limiter);
        let mut replies = Vec::new();
        for _ in 0..3 {
            replies.push(eval(&mut conn, (limiter, &key), opts, &[] as &[i64]).await);
        }
        // "<decision> <limit>,<reset>,<remaining>[,<retry-after>]"
        let fields: Vec<Vec<&str>> = replies
            .iter()
            .map(|r| r.split([' ', ',']).collect())
            .collect();
        let decisions = fields
            .iter()
            .map(|f| [f[0], f[1], f[3]])
            .collect::<Vec<_>>();
        assert_eq!(
            decisions,
            [["allow", "2", "1"], ["allow", "2", "0"], ["deny", "2", "0"]],
            "{limiter}"
        );
        for seconds in [fields[2][2], fields[2][4]] {
            let seconds: i64 = seconds.parse().unwrap();
            assert!((1..=120).contains(&seconds), "{limiter}: {replies:?}");
        }
    }
}

#[tokio::test]
async fn fixed_window_and_token_bucket_take_a_cost_on_server_time() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let key = unique_prefix("fw");
    let mut seen = Vec::new();
    for cost in [2, 2, 0, 1, 0] {
        seen.push(eval(&mut conn, ("fixed_window", &key), &["3", "60"], &[cost]).await);
    }
    assert_eq!(
        seen,
        [
            "allow 3,60,1",
            "deny 3,60,1",
            "allow 3,60,0",
            "allow 3,60,0",
            "deny 3,60,0"
        ]
    );
    let count: i64 = query(&mut conn, "GET", &key).await;
    assert_eq!(count, 3, "a denied cost is undone");

    let key = unique_prefix("tb");
    let p = "5 5;w=600;burst=3;policy=token_bucket";
    let mut seen = Vec::new();
    for cost in [2, 2, 0, 1] {
        let opts = ["5", "600", "3"];
        seen.push(eval(&mut conn, ("token_bucket", &key), &opts, &[cost]).await);
    }
    assert_eq!(
        seen,
        [
            format!("allow {p},600,3"),
            format!("deny {p},600,3,300"),
            format!("allow {p},600,2,300"),
            format!("allow {p},600,2,300"),
        ]
    );
}

#[tokio::test]
async fn a_state_past_its_stored_expiry_restarts_while_redis_still_holds_it() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let start = scenarios::start(real_now_ms());
    // Every call runs ahead of the server's clock, so Redis keeps keys the caller's time
    // considers expired: only the stored expiry can tell.
    for (limiter, opts) in CATALOGUE {
        let key = unique_prefix(limiter);
        let first = eval(&mut conn, (limiter, &key), opts, &[1, start]).await;
        // A calendar day's state is over only the next day; at the same time of day, its
        // answer is the first one again.
        let later = start
            + if limiter == "calendar_quota" {
                86_400_000
            } else {
                7_200_000
            };
        let again = eval(&mut conn, (limiter, &key), opts, &[1, later]).await;
        assert_eq!(again, first, "{limiter}");
    }
}

#[tokio::test]
async fn multi_window_stores_nothing_for_a_request_one_limit_denies() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let key = unique_prefix("mw");
    let start = scenarios::start(real_now_ms());
    let opts = ["1/5", "5/3600"];
    assert_eq!(
        eval(&mut conn, ("multi_window", &key), &opts, &[1, start]).await,
        "allow 1,5,0 @0"
    );
    let before: Vec<String> = query(&mut conn, "HGETALL", &key).await;
    assert_eq!(
        eval(
            &mut conn,
            ("multi_window", &key),
            &opts,
            &[1, start + 1_000]
        )
        .await,
        "deny 1,4,0,4 @0"
    );
    let after: Vec<String> = query(&mut conn, "HGETALL", &key).await;
    assert_eq!(before, after);
    assert_eq!(after[..2], ["c5", "1"]);
    assert_eq!(after[4..6], ["c3600", "1"]);
}

#[tokio::test]
async fn sliding_log_keeps_one_entry_per_unit_even_when_time_steps_back() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let key = unique_prefix("sl");
    let start = scenarios::start(real_now_ms());
    let opts = ["10", "1"];
    // "t-0" at 0, "t-1" and "t-2" at 500; at 1000 the first leaves; back at 500 the next number
    // is 2 again, already taken: the script must still log a third entry at 500.
    for (cost, at) in [(1, 0), (2, 500), (0, 1_000), (1, 500)] {
        let reply = eval(&mut conn, ("sliding_log", &key), &opts, &[cost, start + at]).await;
        assert!(reply.starts_with("allow"), "{reply}");
    }
    let entries: i64 = query(&mut conn, "ZCARD", &key).await;
    assert_eq!(entries, 3);
}

/// The steps of the native twin's `a_held_lease_renews_at_its_limit_and_a_new_one_waits`
/// (`plug_limit/src/algorithm/concurrency.rs`), on the script, and the renewed lease's new
/// expiry as Redis keeps it.
#[tokio::test]
async fn concurrency_renews_a_held_lease_at_its_limit() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let key = unique_prefix("lease");
    let start = scenarios::start(real_now_ms());
    let opts = ["2", "30"];
    let steps = [
        ("a", 0, "allow 2,30,1"),
        ("b", 0, "allow 2,30,0"),
        // a renews at the limit: it holds its unit already. b's lease is now the oldest.
        ("a", 20_000, "allow 2,10,0"),
        ("c", 20_000, "deny 2,10,0,1"),
        // b ran out at 30 s; a, renewed at 20 s, holds until 50 s.
        ("c", 31_000, "allow 2,19,0"),
        ("d", 45_000, "deny 2,5,0,1"),
        ("d", 50_000, "allow 2,11,0"),
    ];
    for (i, (id, at, expect)) in steps.into_iter().enumerate() {
        let tail = ["1".to_owned(), (start + at).to_string(), id.to_owned()];
        let got = eval(&mut conn, ("concurrency", &key), &opts, &tail).await;
        assert_eq!(got, expect, "step {i}");
        if i == 2 {
            let expiry: i64 = redis::cmd("ZSCORE")
                .arg(&key)
                .arg("a")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(expiry, start + 50_000);
        }
    }
}

/// The twin's second sequence of `a_held_lease_renews_at_its_limit_and_a_new_one_waits`: a
/// lease of two units renews whole, and a cost past the limit is denied before any per-unit
/// command (its 2^31 - 1 units would keep Redis busy for minutes, past `SCRIPT KILL`).
#[tokio::test]
async fn concurrency_renews_a_lease_of_several_units_and_denies_a_cost_past_the_limit_at_once() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let key = unique_prefix("lease");
    let start = scenarios::start(real_now_ms());
    let steps = [
        ("x", 2, 0, "allow 2,30,0"),
        ("x", 2, 10_000, "allow 2,30,0"),
        ("y", 1, 10_000, "deny 2,30,0,1"),
        ("y", 1, 35_000, "deny 2,5,0,1"),
        ("z", 2_147_483_647, 35_000, "deny 2,5,0,1"),
        ("y", 1, 40_000, "allow 2,30,1"),
    ];
    for (i, (id, cost, at, expect)) in steps.into_iter().enumerate() {
        let tail = [cost.to_string(), (start + at).to_string(), id.to_owned()];
        let call = eval(&mut conn, ("concurrency", &key), &["2", "30"], &tail);
        let got = tokio::time::timeout(std::time::Duration::from_secs(2), call)
            .await
            .unwrap_or_else(|_| panic!("step {i}: no answer within 2 s"));
        assert_eq!(got, expect, "step {i}");
    }
}

#[tokio::test]
async fn calendar_quota_in_a_zone_takes_its_period_end_with_its_now() {
    let redis = RedisServer::start();
    let mut conn = redis.connection().await;
    let key = unique_prefix("calendar_quota");
    let now = real_now_ms();
    let opts = ["2", "day", "Europe/Berlin"];
    let at = |tail: &[String]| tail.to_vec();
    let mut seen = Vec::new();
    for tail in [
        at(&["1".into()]),
        at(&["1".into(), now.to_string()]),
        at(&["1".into(), now.to_string(), now.to_string()]),
        at(&[
            "1".into(),
            now.to_string(),
            (now + 32 * 86_400_000 + 1).to_string(),
        ]),
        at(&["1".into(), now.to_string(), (now + 1500).to_string()]),
    ] {
        seen.push(eval(&mut conn, ("calendar_quota", &key), &opts, &tail).await);
    }
    let bad = eval(
        &mut conn,
        ("calendar_quota", &key),
        &["2", "day", "Europe/Ber lin"],
        &["1"],
    )
    .await;
    seen.push(bad);
    let period_end = |got: i64| {
        format!(
            "error calendar_quota: period_end must be an integer after now and at most \
             2764800000 ms on, got '{got}'"
        )
    };
    assert_eq!(
        seen,
        [
            "error calendar_quota: now must be given with a time zone, got ''".to_owned(),
            "error calendar_quota: period_end must be an integer after now and at most \
             2764800000 ms on, got ''"
                .to_owned(),
            period_end(now),
            period_end(now + 32 * 86_400_000 + 1),
            "allow 2,2,1".to_owned(),
            "error calendar_quota: utc_offset_minutes must be an integer from -1439 to 1439 or \
             an IANA time zone name, got 'Europe/Ber lin'"
                .to_owned(),
        ]
    );
}

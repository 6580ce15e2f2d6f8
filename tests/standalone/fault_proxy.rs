//! The test support's `FaultProxy` in front of a real Redis: each fault does what the failure
//! tests rely on. Spoken in raw RESP over plain sockets, so no client library retries, pings or
//! reconnects behind the test's back.

use std::io;
use std::time::{Duration, Instant};

use plug_limit::redis;
use plug_limit_tests::{Fault, FaultProxy, RedisServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const PONG: &[u8] = b"+PONG\r\n";
/// How long a test waits for what must come; only a broken proxy makes it wait that long.
const PATIENCE: Duration = Duration::from_secs(5);
/// How long a stalled connection is watched staying silent.
const SILENCE: Duration = Duration::from_millis(200);

/// A Redis of this test's own, and a proxy in front of it.
fn proxied() -> (RedisServer, FaultProxy) {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.addr());
    (redis, proxy)
}

/// Sends one inline command and reads until `len` bytes or the end of the stream: what came.
async fn ask(stream: &mut TcpStream, command: &str, len: usize) -> io::Result<Vec<u8>> {
    stream
        .write_all(format!("{command}\r\n").as_bytes())
        .await?;
    let mut reply = Vec::with_capacity(len);
    while reply.len() < len {
        let mut chunk = [0; 64];
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        reply.extend_from_slice(&chunk[..read]);
    }
    Ok(reply)
}

/// A new connection through `proxy` that has passed a `PING`.
async fn forwarded(proxy: &FaultProxy) -> TcpStream {
    let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    let reply = timeout(PATIENCE, ask(&mut stream, "PING", PONG.len())).await;
    assert_eq!(reply.expect("answered in time").expect("read"), PONG);
    stream
}

/// Reads what is left of `stream`: empty when the proxy closed it without a word.
async fn rest(stream: &mut TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    timeout(PATIENCE, stream.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .expect("an orderly close");
    rest
}

#[tokio::test]
async fn forward_passes_a_ping_and_counts_connections() {
    let (_redis, proxy) = proxied();
    assert_eq!(proxy.url(), format!("redis://{}/", proxy.addr()));
    assert_eq!(proxy.fault(), Fault::Forward);
    assert_eq!(proxy.accepted(), 0);

    let _first = forwarded(&proxy).await;
    assert_eq!(proxy.accepted(), 1);
    let _second = forwarded(&proxy).await;
    assert_eq!(proxy.accepted(), 2);
}

#[tokio::test]
async fn drop_replies_runs_the_command_and_loses_its_reply() {
    let (redis, proxy) = proxied();
    proxy.set(Fault::DropReplies);

    let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    let reply = timeout(PATIENCE, ask(&mut stream, "INCR dropped", 4)).await;
    assert_eq!(
        reply.expect("closed in time").expect("an orderly close"),
        b""
    );

    let mut direct = redis.connection().await;
    let count: Option<i64> = redis::cmd("GET")
        .arg("dropped")
        .query_async(&mut direct)
        .await
        .expect("GET");
    assert_eq!(count, Some(1));
}

#[tokio::test]
async fn delay_holds_each_reply() {
    let (_redis, proxy) = proxied();
    proxy.set(Fault::Delay(Duration::from_millis(300)));

    let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    let sent = Instant::now();
    let reply = timeout(PATIENCE, ask(&mut stream, "PING", PONG.len())).await;
    let took = sent.elapsed();
    assert_eq!(reply.expect("answered in time").expect("read"), PONG);
    assert!(took >= Duration::from_millis(300), "PONG after {took:?}");
}

#[tokio::test]
async fn latency_delays_each_way_once() {
    let (_redis, proxy) = proxied();
    proxy.set(Fault::Latency(Duration::from_millis(50)));

    let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    let sent = Instant::now();
    let reply = timeout(PATIENCE, ask(&mut stream, "PING", PONG.len())).await;
    let took = sent.elapsed();
    assert_eq!(reply.expect("answered in time").expect("read"), PONG);
    // 50 ms to Redis, 50 ms back.
    assert!(took >= Duration::from_millis(100), "PONG after {took:?}");
}

/// How many PINGs [`pings_on_a_clock`] sends.
const PINGS: usize = 20;
/// How far apart [`pings_on_a_clock`] sends them.
const APART: Duration = Duration::from_millis(5);

/// Sends [`PINGS`] PINGs on one connection through `proxy`, [`APART`] apart whatever became of
/// the earlier ones, each with a message of 16 KiB, the most the proxy moves at once, so each
/// crosses it, either way, in a chunk of its own at least: holds that added up per chunk would
/// add up per PING. Returns when each reply was complete, from the first PING's send time, once
/// it has checked that every reply came, in order.
async fn pings_on_a_clock(proxy: &FaultProxy) -> Vec<Duration> {
    let stream = TcpStream::connect(proxy.addr()).await.expect("connect");
    let (mut replies, mut requests) = stream.into_split();
    // `PING message` answers the bulk string `message`: the replies tell their requests apart.
    let messages: Vec<Vec<u8>> = (0..PINGS)
        .map(|n| format!("{n:02}").repeat(8 * 1024).into_bytes())
        .collect();
    let bulk = |message: &[u8]| {
        [
            format!("${}\r\n", message.len()).as_bytes(),
            message,
            b"\r\n",
        ]
        .concat()
    };
    let expected: Vec<Vec<u8>> = messages.iter().map(|message| bulk(message)).collect();

    let start = tokio::time::Instant::now();
    let send = async {
        for (n, message) in messages.iter().enumerate() {
            tokio::time::sleep_until(start + APART * n as u32).await;
            let ping = [&b"*2\r\n$4\r\nPING\r\n"[..], &bulk(message)].concat();
            requests.write_all(&ping).await.expect("write");
        }
    };
    let receive = async {
        let total: usize = expected.iter().map(Vec::len).sum();
        let mut received = Vec::with_capacity(total);
        let mut back = Vec::with_capacity(PINGS);
        let mut reply_end = 0;
        let mut chunk = vec![0; 64 * 1024];
        while received.len() < total {
            let read = replies.read(&mut chunk).await.expect("read");
            assert_ne!(read, 0, "closed after {} bytes", received.len());
            received.extend_from_slice(&chunk[..read]);
            while back.len() < PINGS && received.len() >= reply_end + expected[back.len()].len() {
                reply_end += expected[back.len()].len();
                back.push(start.elapsed());
            }
        }
        (received, back)
    };
    let ((), (received, back)) = timeout(PATIENCE, async { tokio::join!(send, receive) })
        .await
        .expect("every reply in time");
    assert!(received == expected.concat(), "{PINGS} replies, in order");
    assert_eq!(back.len(), PINGS);
    back
}

#[tokio::test]
async fn latency_overlaps_on_one_connection_and_keeps_the_order() {
    const LATENCY: Duration = Duration::from_millis(50);
    // The last PING leaves at 95 ms and is back one round trip later, at 195 ms. Delays that
    // added up, a chunk after another, would bring it back after 20 × 50 ms = 1 s at least.
    const ALL_BACK_WITHIN: Duration = Duration::from_millis(400);

    let (_redis, proxy) = proxied();
    proxy.set(Fault::Latency(LATENCY));
    let back = pings_on_a_clock(&proxy).await;
    for (n, back) in back.iter().enumerate() {
        let took = back.saturating_sub(APART * n as u32);
        assert!(took >= 2 * LATENCY, "reply {n} after {took:?}");
    }
    let last = back[PINGS - 1];
    assert!(last < ALL_BACK_WITHIN, "the last reply back at {last:?}");

    // The same traffic under `Delay`, whose holds add up: what the bound above tells apart.
    proxy.set(Fault::Delay(LATENCY));
    let back = pings_on_a_clock(&proxy).await;
    let last = back[PINGS - 1];
    assert!(
        last > Duration::from_secs(1),
        "the last reply back at {last:?}"
    );
}

#[tokio::test]
async fn latency_keeps_a_chunk_s_delivery_time_when_the_fault_switches() {
    let (_redis, proxy) = proxied();
    let mut stream = forwarded(&proxy).await;
    proxy.set(Fault::Latency(Duration::from_millis(300)));

    let sent = Instant::now();
    let reply = async {
        let reply = ask(&mut stream, "PING", PONG.len()).await;
        (reply, sent.elapsed())
    };
    let switch = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        proxy.set(Fault::Forward);
    };
    let ((reply, took), ()) = timeout(PATIENCE, async { tokio::join!(reply, switch) })
        .await
        .expect("answered in time");
    assert_eq!(reply.expect("read"), PONG);
    // The PING, read under the latency, still took 300 ms to Redis; the PONG came back at once.
    assert!(took >= Duration::from_millis(300), "PONG after {took:?}");
    assert!(took < Duration::from_millis(500), "PONG after {took:?}");
}

#[tokio::test]
async fn blackhole_answers_nothing_on_new_and_open_connections() {
    let (_redis, proxy) = proxied();
    let mut open = forwarded(&proxy).await;
    proxy.set(Fault::Blackhole);

    let mut new = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert!(
        timeout(SILENCE, ask(&mut new, "PING", PONG.len()))
            .await
            .is_err()
    );
    assert!(
        timeout(SILENCE, ask(&mut open, "PING", PONG.len()))
            .await
            .is_err()
    );
    assert_eq!(proxy.accepted(), 2);

    proxy.set(Fault::Forward);
    let _after = forwarded(&proxy).await;
    assert_eq!(proxy.accepted(), 3);
}

#[tokio::test]
async fn refuse_closes_open_and_new_connections() {
    let (_redis, proxy) = proxied();
    let mut open = forwarded(&proxy).await;
    proxy.set(Fault::Refuse);
    assert_eq!(rest(&mut open).await, b"");

    let mut new = TcpStream::connect(proxy.addr()).await.expect("connect");
    assert_eq!(rest(&mut new).await, b"");
    assert_eq!(proxy.accepted(), 2);

    proxy.set(Fault::Forward);
    let _after = forwarded(&proxy).await;
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_connections_and_its_port() {
    let (_redis, proxy) = proxied();
    let addr = proxy.addr();
    let mut open = forwarded(&proxy).await;

    drop(proxy);
    assert_eq!(rest(&mut open).await, b"");
    let refused = TcpStream::connect(addr).await.map(|_| ());
    assert_eq!(
        refused.map_err(|err| err.kind()),
        Err(io::ErrorKind::ConnectionRefused)
    );
}

/// The open-loop generator the failure tests pair with the proxy: requests leave on the clock,
/// round-robin over the apps, whatever became of the earlier ones.
#[tokio::test]
async fn open_loop_sends_on_the_clock_whatever_the_replies_take() {
    const SLOW: Duration = Duration::from_millis(100);

    fn app(limited: bool) -> axum::Router {
        axum::Router::new().route(
            "/slow",
            axum::routing::get(move |headers: http::HeaderMap| async move {
                tokio::time::sleep(SLOW).await;
                let status = if headers
                    .get("x-client")
                    .is_some_and(|client| client == "ann")
                {
                    http::StatusCode::OK
                } else {
                    http::StatusCode::BAD_REQUEST
                };
                let mut reply = http::Response::builder().status(status);
                if limited {
                    reply = reply.header("x-ratelimit-limit", "5");
                }
                reply.body(axum::body::Body::empty()).expect("response")
            }),
        )
    }

    let started = Instant::now();
    let sent = plug_limit_tests::open_loop(
        &[app(true), app(false)],
        "/slow",
        "ann",
        20,
        Duration::from_millis(500),
    )
    .await;
    let took = started.elapsed();

    let at: Vec<_> = sent.iter().map(|one| one.at).collect();
    let due: Vec<_> = (0..10).map(|i| Duration::from_millis(50) * i).collect();
    assert_eq!(at, due);
    for (i, one) in sent.iter().enumerate() {
        assert_eq!(one.instance, i % 2);
        assert_eq!(one.status, http::StatusCode::OK);
        assert_eq!(one.limited, one.instance == 0);
        assert!(one.latency >= SLOW, "request {i} after {:?}", one.latency);
    }
    // Closed-loop, the 10 replies of 100 ms each would take 1 s; on the clock, the last leaves
    // at 450 ms and is back at 550 ms.
    assert!(took < Duration::from_millis(900), "the run took {took:?}");
}

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

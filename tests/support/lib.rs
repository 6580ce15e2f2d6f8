//! Test support for the plug_limit workspace: real `redis-server` processes on free loopback
//! ports, one per test binary or per test, so tests never share a fixed port.
//!
//! A missing `redis-server` is a loud failure with a hint, never a skip. Set `REDIS_SERVER`
//! to use another binary.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deadpool_redis::{Config, Pool, Runtime};

pub use self::keys::stored_key;

mod keys;

/// A `redis-server` process owned by a test; killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING`.
    #[must_use]
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments, e.g. `["--busy-reply-threshold", "50"]`.
    #[must_use]
    pub fn start_with(args: &[&str]) -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("plug_limit-redis-{port}"));
        std::fs::create_dir_all(&dir).expect("create the redis-server working directory");
        let mut server = Self {
            child: None,
            port,
            dir,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        let child = Command::new(&binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start `{binary}` ({err}): the tests need a real Redis. \
                     Install it (`apt-get install redis-server`) or set REDIS_SERVER=/path/to/redis-server"
                )
            });
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("redis-server on port {} exited early: {status}", self.port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        );
    }

    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    /// The server's port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:{port}/`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A new deadpool-redis pool for this server.
    #[must_use]
    pub fn pool(&self) -> Pool {
        pool(&self.url())
    }

    /// A plain client connection for assertions and setup (`SCRIPT FLUSH`, `TTL`, ...).
    pub async fn connection(&self) -> deadpool_redis::redis::aio::MultiplexedConnection {
        deadpool_redis::redis::Client::open(self.url())
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to the test redis-server")
    }

    /// Kills the server (as a crash would) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts a new one on the same port: an empty Redis, as after a
    /// restart without persistence.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of three masters without replicas, owned by a test: each master a
/// `redis-server` on free loopback ports; every node killed and its files removed on drop.
///
/// A missing `redis-server` or `redis-cli` is a loud failure with a hint. Set `REDIS_SERVER`
/// and `REDIS_CLI` to use other binaries.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Child>,
    ports: Vec<u16>,
    dir: PathBuf,
}

impl RedisCluster {
    const NODES: usize = 3;

    /// Starts three masters, joins them with `redis-cli --cluster create`, and waits until
    /// every node reports `cluster_state:ok`.
    #[must_use]
    pub fn start() -> Self {
        // Two ports a node: a client port and a bus port. Each node's bus port is chosen
        // rather than the default client port + 10000, which can be taken or above 65535.
        // All six listeners are held at once, so the ports are distinct.
        let ports = {
            let listeners: Vec<TcpListener> = (0..2 * Self::NODES)
                .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral loopback port"))
                .collect();
            listeners
                .iter()
                .map(|listener| listener.local_addr().expect("local address").port())
                .collect::<Vec<u16>>()
        };
        let (ports, bus_ports) = ports.split_at(Self::NODES);
        let dir = std::env::temp_dir().join(format!("plug_limit-cluster-{}", ports[0]));
        std::fs::create_dir_all(&dir).expect("create the cluster's working directory");
        // Built before the nodes start, so a panic below still kills the ones started.
        let mut cluster = Self {
            nodes: Vec::with_capacity(Self::NODES),
            ports: ports.to_vec(),
            dir,
        };
        for (&port, &bus_port) in ports.iter().zip(bus_ports) {
            let node = cluster.spawn_node(port, bus_port);
            cluster.nodes.push(node);
        }
        for (index, &port) in ports.iter().enumerate() {
            cluster.wait_ping(index, port);
        }
        cluster.create();
        cluster.wait_ok();
        cluster
    }

    fn spawn_node(&self, port: u16, bus_port: u16) -> Child {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes", "--cluster-port", &bus_port.to_string()])
            .arg("--cluster-config-file")
            .arg(self.dir.join(format!("nodes-{port}.conf")))
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start `{binary}` ({err}): the cluster tests need a real Redis. \
                     Install it (`apt-get install redis-server`) or set REDIS_SERVER=/path/to/redis-server"
                )
            })
    }

    fn wait_ping(&mut self, index: usize, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                let mut reply = [0u8; 7];
                if stream.write_all(b"PING\r\n").is_ok()
                    && stream.read_exact(&mut reply).is_ok()
                    && &reply == b"+PONG\r\n"
                {
                    return;
                }
            }
            if let Ok(Some(status)) = self.nodes[index].try_wait() {
                panic!("cluster node redis-server on port {port} exited early: {status}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("cluster node redis-server on port {port} did not answer PING within 10 s");
    }

    fn create(&self) {
        let binary = std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned());
        let output = Command::new(&binary)
            .args(["--cluster", "create"])
            .args(self.ports.iter().map(|port| format!("127.0.0.1:{port}")))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start `{binary}` ({err}): the cluster tests need it to join the nodes. \
                     Install it (`apt-get install redis-tools`, part of redis-server) or set REDIS_CLI=/path/to/redis-cli"
                )
            });
        assert!(
            output.status.success(),
            "`{binary} --cluster create` failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }

    /// `redis-cli` returns once the nodes agree on the slots; each node declares the cluster
    /// `ok` only when it has heard from the others, a moment later.
    fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = Vec::new();
        while Instant::now() < deadline {
            last = self.ports.iter().map(|&port| cluster_info(port)).collect();
            if last
                .iter()
                .all(|info| info.lines().any(|line| line.trim() == "cluster_state:ok"))
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let states: Vec<String> = self
            .ports
            .iter()
            .zip(&last)
            .map(|(port, info)| {
                let state = info
                    .lines()
                    .find(|line| line.starts_with("cluster_state:"))
                    .unwrap_or(info.as_str());
                format!("{port}: {}", state.trim())
            })
            .collect();
        panic!(
            "the Redis Cluster did not reach cluster_state:ok on every node within 30 s: {}",
            states.join(", ")
        );
    }

    /// The client ports of the three masters.
    #[must_use]
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// `redis://127.0.0.1:{port}/` for each master.
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|port| format!("redis://127.0.0.1:{port}/"))
            .collect()
    }

    /// A new deadpool-redis cluster pool for this cluster.
    #[must_use]
    pub fn pool(&self) -> deadpool_redis::cluster::Pool {
        deadpool_redis::cluster::Config::from_urls(self.urls())
            .create_pool(Some(Runtime::Tokio1))
            .expect("create a deadpool-redis cluster pool")
    }

    /// A plain connection to the master on `port`, not following redirections: to ask one
    /// node about itself (`CLUSTER KEYSLOT`, `SCRIPT FLUSH`, `EXISTS` of a key it owns).
    pub async fn node(&self, port: u16) -> deadpool_redis::redis::aio::MultiplexedConnection {
        assert!(self.ports.contains(&port), "no node on port {port}");
        deadpool_redis::redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to a cluster node")
    }
}

/// `CLUSTER INFO` of the node on `port`, or the error in its place.
fn cluster_info(port: u16) -> String {
    use deadpool_redis::redis;
    let info = redis::Client::open(format!("redis://127.0.0.1:{port}/")).and_then(|client| {
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
        conn.set_read_timeout(Some(Duration::from_secs(1)))?;
        redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut conn)
    });
    info.unwrap_or_else(|err| format!("error: {err}"))
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
        }
        for node in &mut self.nodes {
            let _ = node.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The same limits on both backends, `configure`d alike: `("redis", ..)` on `redis` and
/// `("memory", ..)` in process. Call-for-call tests run on both.
pub fn backends(
    redis: &RedisServer,
    configure: impl Fn(plug_limit::Builder) -> plug_limit::Builder,
) -> [(&'static str, plug_limit::PlugLimit); 2] {
    let build = |builder| {
        configure(builder)
            .build()
            .expect("valid test configuration")
    };
    [
        ("redis", build(plug_limit::PlugLimit::builder(redis.pool()))),
        ("memory", build(plug_limit::PlugLimit::memory_builder())),
    ]
}

/// A deadpool-redis pool for `url`.
#[must_use]
pub fn pool(url: &str) -> Pool {
    Config::from_url(url)
        .create_pool(Some(Runtime::Tokio1))
        .expect("create a deadpool-redis pool")
}

/// A loopback port nothing listens on at the moment of the call.
#[must_use]
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("bind an ephemeral loopback port")
}

/// A Redis URL where no server listens: every connection is refused.
#[must_use]
pub fn dead_url() -> String {
    format!("redis://127.0.0.1:{}/", free_port())
}

/// A key prefix unique to this call, so tests sharing a server never share keys.
#[must_use]
pub fn unique_prefix(test: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("t{}-{test}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What a test reads of a response.
#[derive(Debug)]
pub struct Reply {
    /// The status.
    pub status: http::StatusCode,
    /// The headers.
    pub headers: http::HeaderMap,
    /// The body, as text.
    pub body: String,
}

impl Reply {
    /// A header's value as text, `None` when absent.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("visible ASCII header"))
    }

    /// The `x-ratelimit-limit`, `x-ratelimit-reset`, `x-ratelimit-remaining` and
    /// `retry-after` values, `None` where absent.
    #[must_use]
    pub fn rate_headers(&self) -> [Option<&str>; 4] {
        [
            self.header("x-ratelimit-limit"),
            self.header("x-ratelimit-reset"),
            self.header("x-ratelimit-remaining"),
            self.header("retry-after"),
        ]
    }
}

/// Sends `GET uri` with `x-client: client` through `app` (no socket) and reads the reply.
pub async fn get(app: &axum::Router, uri: &str, client: &str) -> Reply {
    let request = http::Request::get(uri)
        .header("x-client", client)
        .body(axum::body::Body::empty())
        .expect("request");
    send(app, request).await
}

/// Sends `request` through `app` (no socket) and reads the reply.
pub async fn send(app: &axum::Router, request: http::Request<axum::body::Body>) -> Reply {
    use tower::ServiceExt;
    let response = app
        .clone()
        .oneshot(request)
        .await
        .expect("infallible router");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("read body");
    Reply {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).expect("utf-8 body"),
    }
}

/// Log lines captured from the `tracing` events of the current thread.
#[derive(Debug, Clone, Default)]
pub struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    /// Captures every event of this thread at `TRACE` and above until the guard drops. Use with
    /// a current-thread runtime (the `#[tokio::test]` default).
    #[must_use]
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .without_time()
            .with_writer(logs.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        (logs, guard)
    }

    /// Everything logged so far.
    #[must_use]
    pub fn text(&self) -> String {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

// The README's examples compile as doctests of this package.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

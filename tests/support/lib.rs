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

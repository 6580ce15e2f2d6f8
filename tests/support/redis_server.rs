//! A single `redis-server` process per test, on a free loopback port.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deadpool_redis::Pool;

use crate::{free_port, pool};

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
    ///
    /// A port found free may be taken before the server binds it (by another test's server,
    /// or as the source port of any connection on the machine): a server that exits at once is
    /// started again on another port, a few times, before the test fails.
    #[must_use]
    pub fn start_with(args: &[&str]) -> Self {
        let mut attempts = 0;
        loop {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!("plug_limit-redis-{port}"));
            std::fs::create_dir_all(&dir).expect("create the redis-server working directory");
            let mut server = Self {
                child: None,
                port,
                dir,
                args: args.iter().map(|a| (*a).to_owned()).collect(),
            };
            attempts += 1;
            match server.try_spawn() {
                Ok(()) => return server,
                Err(exited) if attempts < 5 => eprintln!("{exited}; trying another port"),
                Err(exited) => panic!("{exited}, {attempts} times"),
            }
        }
    }

    fn spawn(&mut self) {
        if let Err(exited) = self.try_spawn() {
            panic!("{exited}");
        }
    }

    /// Starts the server and waits until it answers; `Err` when it exited first.
    fn try_spawn(&mut self) -> Result<(), String> {
        let child = spawn_server(self.port, &self.dir, &self.args, "the tests");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let Some(child) = self.child.as_mut() else {
                break;
            };
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Err(format!(
                    "redis-server on port {} exited early: {status}",
                    self.port
                ));
            }
            // Another process's server on the port answers too: only our own will do.
            if answers_ping(self.port) && process_id(self.port) == Some(child.id()) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        );
    }

    /// The server's port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:{port}`, to put a [`FaultProxy`](crate::FaultProxy) in front of the server.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
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

    /// How many calls of `command` (`evalsha`, `eval`, ...) the server answered so far, from
    /// `INFO commandstats`; a script's first `EVALSHA`, failed with `NOSCRIPT`, counts too.
    pub async fn calls(&self, command: &str) -> u64 {
        let mut conn = self.connection().await;
        let stats: String = deadpool_redis::redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .expect("INFO commandstats");
        let prefix = format!("cmdstat_{command}:calls=");
        stats
            .lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |calls| calls.parse().expect("a count of calls"))
    }

    /// How many script calls (`EVALSHA` and `EVAL`) the server answered so far. The first call
    /// of a script counts twice: its `EVALSHA` fails with `NOSCRIPT`, and it runs again as
    /// `EVAL`.
    pub async fn script_calls(&self) -> u64 {
        self.calls("evalsha").await + self.calls("eval").await
    }

    /// Kills the server (as a crash would) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server (`SIGSTOP`): it holds its connections and answers nothing, as a
    /// paused VM would, until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Lets a server stopped by [`pause`](Self::pause) run again (`SIGCONT`).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("a running server");
        let status = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(
            status.success(),
            "kill {signal} the server on port {}",
            self.port
        );
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

/// Starts `redis-server` on loopback `port`, working in `dir`, without persistence, followed by
/// `extra` arguments. A missing binary panics with a hint on installing it, saying who needs it.
pub(crate) fn spawn_server<S: AsRef<OsStr>>(
    port: u16,
    dir: &Path,
    extra: impl IntoIterator<Item = S>,
    needed_by: &str,
) -> Child {
    let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
    Command::new(&binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|err| {
            panic!(
                "cannot start `{binary}` ({err}): {needed_by} need a real Redis. \
                 Install it (`apt-get install redis-server`) or set REDIS_SERVER=/path/to/redis-server"
            )
        })
}

/// Whether a server on loopback `port` answers a raw `PING` within half a second: spoken by
/// hand, so a server can be awaited before any client library is involved.
/// The `process_id` of the server on loopback `port`, from `INFO server`, spoken by hand.
fn process_id(port: u16) -> Option<u32> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream.write_all(b"INFO server\r\n").ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    // The section is a few hundred bytes, read until its `process_id` line is whole.
    loop {
        let text = String::from_utf8_lossy(&reply);
        if let Some(at) = text.find("process_id:") {
            let value = &text[at + "process_id:".len()..];
            if let Some(end) = value.find("\r\n") {
                return value[..end].trim().parse().ok();
            }
        }
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        reply.extend_from_slice(&chunk[..read]);
    }
}

pub(crate) fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

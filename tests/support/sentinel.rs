//! One Redis primary, one replica, and a `redis-server --sentinel` watching them, each on a free
//! loopback port: a failover a test can cause by killing the primary.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deadpool_redis::redis;
use deadpool_redis::sentinel::{Config, Pool, SentinelServerType};

use crate::redis_server::answers_ping;
use crate::{RedisServer, free_port};

/// The name Sentinel knows the primary by.
pub const MASTER_NAME: &str = "plug";

/// A primary, its replica and a Sentinel (quorum 1, the primary judged down after a second
/// without an answer: long enough that a loaded machine does not fail it over by itself); the Sentinel is killed on drop, the servers by their own drop.
#[derive(Debug)]
pub struct SentinelSet {
    /// The primary Sentinel watches at the start.
    pub primary: RedisServer,
    /// Its replica, which Sentinel promotes when the primary goes.
    pub replica: RedisServer,
    sentinel: Child,
    port: u16,
    dir: PathBuf,
}

impl SentinelSet {
    /// Starts the three and waits until the replica is in sync and Sentinel knows both.
    #[must_use]
    pub fn start() -> Self {
        let primary = RedisServer::start();
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
        wait_for("the replica to sync", || {
            info(replica.port(), "replication").contains("master_link_status:up")
        });
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("plug_limit-sentinel-{port}"));
        std::fs::create_dir_all(&dir).expect("create the sentinel's directory");
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 1\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = dir.display(),
                primary = primary.port(),
            ),
        )
        .expect("write sentinel.conf");
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        let sentinel = Command::new(&binary)
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start `{binary} --sentinel` ({err}): the Sentinel tests need a real \
                     Redis. Install it (`apt-get install redis-server`) or set REDIS_SERVER"
                )
            });
        let set = Self {
            primary,
            replica,
            sentinel,
            port,
            dir,
        };
        wait_for("Sentinel to answer", || answers_ping(port));
        wait_for("Sentinel to know the replica", || {
            set.sentinel_query(&["SENTINEL", "REPLICAS", MASTER_NAME])
                .is_some_and(|reply| reply.contains(&set.replica.port().to_string()))
        });
        set
    }

    /// A deadpool-redis Sentinel pool asking this Sentinel for the primary.
    #[must_use]
    pub fn pool(&self) -> Pool {
        Config::from_urls(
            vec![format!("redis://127.0.0.1:{}/", self.port)],
            MASTER_NAME.to_owned(),
            SentinelServerType::Master,
        )
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .expect("a sentinel pool")
    }

    /// Whether Sentinel names the server on `port` primary, and as one a client may use: its
    /// flags `master`, without `s_down` or `o_down` (what redis-rs's Sentinel client checks).
    /// Until then a pool finds no primary, whatever `GET-MASTER-ADDR-BY-NAME` says.
    #[must_use]
    pub fn serves_as_primary(&self, port: u16) -> bool {
        let Some(mut conn) = connect(self.port) else {
            return false;
        };
        // `SENTINEL MASTERS`, as the client reads it, not `SENTINEL MASTER`.
        let Ok(masters) = redis::cmd("SENTINEL")
            .arg("MASTERS")
            .query::<Vec<std::collections::HashMap<String, String>>>(&mut conn)
        else {
            return false;
        };
        let Some(fields) = masters
            .into_iter()
            .find(|fields| fields.get("name").map(String::as_str) == Some(MASTER_NAME))
        else {
            return false;
        };
        let flags = fields.get("flags").map_or("", String::as_str);
        fields.get("port") == Some(&port.to_string())
            && flags.split(',').any(|flag| flag == "master")
            && !flags.contains("s_down")
            && !flags.contains("o_down")
    }

    /// Asks Sentinel for a failover while the primary is up (`SENTINEL FAILOVER`): the replica
    /// is promoted, and the old primary, still serving, is made its replica.
    /// Sentinel refuses (`NOGOODSLAVE`) until it has heard from the replica lately: asked
    /// again until it accepts, for up to 15 s.
    pub fn fail_over(&self) {
        wait_for("Sentinel to accept a failover", || {
            self.sentinel_query(&["SENTINEL", "FAILOVER", MASTER_NAME])
                .is_some()
        });
    }

    /// Whether the server on `port` serves as a replica now (`INFO replication`).
    #[must_use]
    pub fn is_replica(port: u16) -> bool {
        info(port, "replication").contains("role:slave")
    }

    /// A Sentinel command's reply, flattened to text; `None` when it answered an error.
    fn sentinel_query(&self, args: &[&str]) -> Option<String> {
        let mut conn = connect(self.port)?;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        let reply: redis::Value = cmd.query(&mut conn).ok()?;
        Some(format!("{reply:?}"))
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        let _ = self.sentinel.kill();
        let _ = self.sentinel.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A connection to the server (or Sentinel) on loopback `port`, if it answers within 500 ms.
fn connect(port: u16) -> Option<redis::Connection> {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .ok()?
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()
}

/// `INFO section` of the server on `port`, or nothing when it does not answer.
fn info(port: u16, section: &str) -> String {
    connect(port)
        .and_then(|mut conn| {
            redis::cmd("INFO")
                .arg(section)
                .query::<String>(&mut conn)
                .ok()
        })
        .unwrap_or_default()
}

/// Waits up to 15 s for `ready`, or fails naming `what`.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

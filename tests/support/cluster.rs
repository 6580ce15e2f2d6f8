//! A three-master Redis Cluster per test, on free loopback ports.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deadpool_redis::Runtime;

use crate::redis_server::{answers_ping, spawn_server};

/// A Redis Cluster of three masters, without replicas or with one ([`start_with_replica`]),
/// owned by a test: each node a `redis-server` on free loopback ports; every node killed and
/// its files removed on drop.
///
/// [`start_with_replica`]: Self::start_with_replica
///
/// A missing `redis-server` or `redis-cli` is a loud failure with a hint. Set `REDIS_SERVER`
/// and `REDIS_CLI` to use other binaries.
#[derive(Debug)]
pub struct RedisCluster {
    /// Each node's process, masters first; `None` while it is stopped.
    nodes: Vec<Option<Child>>,
    /// The client port of each node, masters first.
    ports: Vec<u16>,
    bus_ports: Vec<u16>,
    /// `cluster-node-timeout`, when not Redis's 15 s.
    node_timeout: Option<Duration>,
    dir: PathBuf,
}

impl RedisCluster {
    const MASTERS: usize = 3;

    /// Starts three masters, joins them with `redis-cli --cluster create`, and waits until
    /// every node reports `cluster_state:ok`.
    ///
    /// A node that exits before it answers lost its port to another process between the
    /// choice of the ports and the node's bind (tests start clusters in parallel): the
    /// cluster starts again on new ports, a few times at most.
    #[must_use]
    pub fn start() -> Self {
        Self::start_with(0, None)
    }

    /// [`start`](Self::start), plus a replica of the first master ([`replica`](Self::replica)),
    /// with a `cluster-node-timeout` of 1 s: a killed first master is replaced by its replica
    /// about two seconds later. Meanwhile, once its failure is agreed (after the node timeout),
    /// the whole cluster answers `CLUSTERDOWN` until the replica takes over.
    #[must_use]
    pub fn start_with_replica() -> Self {
        Self::start_with(1, Some(Duration::from_secs(1)))
    }

    fn start_with(replicas: usize, node_timeout: Option<Duration>) -> Self {
        const ATTEMPTS: usize = 5;
        let mut exits = Vec::new();
        for _ in 0..ATTEMPTS {
            match Self::try_start(replicas, node_timeout) {
                Ok(cluster) => return cluster,
                Err(exit) => exits.push(exit),
            }
        }
        panic!(
            "no Redis Cluster started in {ATTEMPTS} attempts: {}",
            exits.join("; ")
        );
    }

    /// One attempt of [`start`](Self::start): `Err` when a node exited before it answered.
    fn try_start(replicas: usize, node_timeout: Option<Duration>) -> Result<Self, String> {
        let nodes = Self::MASTERS + replicas;
        // Two ports a node: a client port and a bus port. Each node's bus port is chosen
        // rather than the default client port + 10000, which can be taken or above 65535.
        // All the listeners are held at once, so the ports are distinct.
        let ports = {
            let listeners: Vec<TcpListener> = (0..2 * nodes)
                .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral loopback port"))
                .collect();
            listeners
                .iter()
                .map(|listener| listener.local_addr().expect("local address").port())
                .collect::<Vec<u16>>()
        };
        let (ports, bus_ports) = ports.split_at(nodes);
        let dir = std::env::temp_dir().join(format!("plug_limit-cluster-{}", ports[0]));
        std::fs::create_dir_all(&dir).expect("create the cluster's working directory");
        // Built before the nodes start, so a panic below, or a failed attempt, still kills the
        // ones started.
        let mut cluster = Self {
            nodes: Vec::with_capacity(nodes),
            ports: ports.to_vec(),
            bus_ports: bus_ports.to_vec(),
            node_timeout,
            dir,
        };
        for (&port, &bus_port) in ports.iter().zip(bus_ports) {
            let node = cluster.spawn_node(port, bus_port);
            cluster.nodes.push(Some(node));
        }
        for (index, &port) in ports.iter().enumerate() {
            cluster.wait_ping(index, port)?;
        }
        cluster.create();
        for &replica in &ports[Self::MASTERS..] {
            Self::add_replica(replica, ports[0]);
        }
        cluster.wait_ok();
        Ok(cluster)
    }

    fn spawn_node(&self, port: u16, bus_port: u16) -> Child {
        let bus_port = bus_port.to_string();
        let config = self.dir.join(format!("nodes-{port}.conf"));
        let node_timeout = self
            .node_timeout
            .map(|timeout| timeout.as_millis().to_string());
        let mut cluster_args = vec![
            OsStr::new("--cluster-enabled"),
            OsStr::new("yes"),
            OsStr::new("--cluster-port"),
            OsStr::new(&bus_port),
            OsStr::new("--cluster-config-file"),
            config.as_os_str(),
        ];
        if let Some(timeout) = &node_timeout {
            cluster_args.extend([OsStr::new("--cluster-node-timeout"), OsStr::new(timeout)]);
        }
        spawn_server(port, &self.dir, cluster_args, "the cluster tests")
    }

    /// Waits until the node at `index` answers; `Err` when it exited first.
    fn wait_ping(&mut self, index: usize, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if answers_ping(port) {
                return Ok(());
            }
            let exited = self.nodes[index].as_mut().map(|node| node.try_wait());
            if let Some(Ok(Some(status))) = exited {
                return Err(format!(
                    "cluster node redis-server on port {port} exited early: {status}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("cluster node redis-server on port {port} did not answer PING within 10 s");
    }

    fn create(&self) {
        redis_cli(
            ["--cluster", "create"]
                .into_iter()
                .map(str::to_owned)
                .chain(self.ports().iter().map(|port| format!("127.0.0.1:{port}")))
                .chain(["--cluster-replicas", "0", "--cluster-yes"].map(str::to_owned)),
        );
    }

    /// Joins the node on `replica` to the cluster as a replica of the master on `master`.
    fn add_replica(replica: u16, master: u16) {
        let id = node_id(master);
        redis_cli([
            "--cluster".to_owned(),
            "add-node".to_owned(),
            format!("127.0.0.1:{replica}"),
            format!("127.0.0.1:{master}"),
            "--cluster-slave".to_owned(),
            "--cluster-master-id".to_owned(),
            id,
        ]);
        // Ready once it has the master's data.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !info(replica, "replication").contains("master_link_status:up") {
            assert!(
                Instant::now() < deadline,
                "the replica on port {replica} did not sync with its master within 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
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

    /// Kills the node on `port`, as a crash would, and waits for it to exit. A master's slots
    /// stay its own until the cluster agrees it failed, after `cluster-node-timeout` (15 s by
    /// default), and a replica takes over if it has one.
    pub fn stop(&mut self, port: u16) {
        let index = self.index(port);
        if let Some(mut node) = self.nodes[index].take() {
            let _ = node.kill();
            let _ = node.wait();
        }
    }

    /// Freezes the node on `port` (`SIGSTOP`): it holds its connections and answers nothing,
    /// as a paused VM would, until [`thaw`](Self::thaw).
    pub fn freeze(&self, port: u16) {
        self.signal(port, "-STOP");
    }

    /// Lets a node frozen by [`freeze`](Self::freeze) run again (`SIGCONT`).
    pub fn thaw(&self, port: u16) {
        self.signal(port, "-CONT");
    }

    fn signal(&self, port: u16, signal: &str) {
        let node = self.nodes[self.index(port)]
            .as_ref()
            .unwrap_or_else(|| panic!("the node on port {port} is stopped"));
        let status = Command::new("kill")
            .args([signal, &node.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} the node on port {port}");
    }

    /// Starts the node on `port` again, from its cluster configuration file: the same node,
    /// with the same slots and no keys (nothing is persisted). Returns once it answers `PING`.
    pub fn restart(&mut self, port: u16) {
        self.stop(port);
        let index = self.index(port);
        let node = self.spawn_node(port, self.bus_ports[index]);
        self.nodes[index] = Some(node);
        if let Err(exit) = self.wait_ping(index, port) {
            panic!("the restarted master on port {port} did not come back: {exit}");
        }
    }

    /// Waits until the master on `port` reports `cluster_state:ok`, as it does a moment after
    /// a restart: a master that comes back waits before it serves its slots again (Redis's
    /// rejoin delay, up to 5 s), answering `CLUSTERDOWN` meanwhile.
    pub fn wait_serving(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut info = String::new();
        while Instant::now() < deadline {
            info = cluster_info(port);
            if info.lines().any(|line| line.trim() == "cluster_state:ok") {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the master on port {port} did not report cluster_state:ok within 30 s: {info}");
    }

    fn index(&self, port: u16) -> usize {
        self.ports
            .iter()
            .position(|&p| p == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The client ports of the three masters.
    #[must_use]
    pub fn ports(&self) -> &[u16] {
        &self.ports[..Self::MASTERS]
    }

    /// The client port of the first master's replica ([`start_with_replica`]).
    ///
    /// [`start_with_replica`]: Self::start_with_replica
    #[must_use]
    pub fn replica(&self) -> Option<u16> {
        self.ports[Self::MASTERS..].first().copied()
    }

    /// Gives `slot`, which must hold no key, to the master on `to`: the new owner first, then
    /// every other master, are told (`CLUSTER SETSLOT slot NODE id`).
    pub fn move_slot(&self, slot: u16, to: u16) {
        let id = node_id(to);
        let slot = slot.to_string();
        let others = self.ports().iter().filter(|&&port| port != to);
        for &port in std::iter::once(&to).chain(others) {
            let answer = ask(port, &["CLUSTER", "SETSLOT", &slot, "NODE", &id]);
            assert_eq!(
                answer, "OK",
                "CLUSTER SETSLOT {slot} NODE {id} on port {port}"
            );
        }
    }

    /// Whether the node on `port` is a master now (a replica is, once it took over).
    #[must_use]
    pub fn is_master(&self, port: u16) -> bool {
        info(port, "replication").contains("role:master")
    }

    /// `redis://127.0.0.1:{port}/` for each master.
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.ports()
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
        self.index(port);
        deadpool_redis::redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to a cluster node")
    }
}

/// `CLUSTER INFO` of the node on `port`, or the error in its place.
fn cluster_info(port: u16) -> String {
    ask(port, &["CLUSTER", "INFO"])
}

/// `INFO section` of the node on `port`, or the error in its place.
fn info(port: u16, section: &str) -> String {
    ask(port, &["INFO", section])
}

/// The node ID of the node on `port`.
fn node_id(port: u16) -> String {
    let id = ask(port, &["CLUSTER", "MYID"]);
    assert!(
        !id.starts_with("error"),
        "CLUSTER MYID on port {port}: {id}"
    );
    id
}

/// The node on `port`'s text answer to `command`, or the error in its place.
fn ask(port: u16, command: &[&str]) -> String {
    use deadpool_redis::redis;
    let answer = redis::Client::open(format!("redis://127.0.0.1:{port}/")).and_then(|client| {
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
        conn.set_read_timeout(Some(Duration::from_secs(1)))?;
        redis::cmd(command[0])
            .arg(&command[1..])
            .query::<String>(&mut conn)
    });
    answer.unwrap_or_else(|err| format!("error: {err}"))
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in self.nodes.iter_mut().flatten() {
            // SIGKILL ends a frozen node too.
            let _ = node.kill();
        }
        for node in self.nodes.iter_mut().flatten() {
            let _ = node.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `redis-cli` with `args`, which must succeed.
fn redis_cli(args: impl IntoIterator<Item = String>) {
    let binary = std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned());
    let output = Command::new(&binary)
            .args(args)
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
        "`{binary} --cluster` failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

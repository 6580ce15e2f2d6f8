//! What one run of the matrix does, drawn from its seed alone: the incident, the mode, the
//! failure policy, the limit, the load and the schedule. The same seed is the same run.

use std::fmt;
use std::time::Duration;

use plug_limit::FailurePolicy;
use plug_limit_options::Builtin;

use super::deployment;

/// Every check's timeout in the matrix.
pub const TIMEOUT: Duration = Duration::from_millis(100);
/// The breaker: 5 failures in a row (its default) open it for [`OPEN_FOR`].
pub(super) const FAILURES: u32 = 5;
/// How long an open breaker waits before one check probes the store again.
pub const OPEN_FOR: Duration = Duration::from_millis(200);
/// The lease of the `concurrency` mode's units, in seconds: a unit whose release was lost
/// comes back after it.
pub(super) const LEASE_SECS: u64 = 1;

/// What goes wrong in a run, for a stretch of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Incident {
    /// Nothing: the control row.
    Nothing,
    /// A slow link: every byte delivered this long after it was sent, each way.
    Latency(Duration),
    /// A link whose one-way delay changes every 25 ms, drawn between 0 and 60 ms.
    Jitter,
    /// Every connection closed, and new ones closed on accept.
    Resets,
    /// A blackhole, as TCP lives a network partition: nothing passes either way while it
    /// lasts; TCP delivers what was held, in order, once it ends.
    Partition,
    /// Commands reach Redis and run; their replies are lost with the connection.
    LostReplies,
    /// The server stopped (`SIGSTOP`), then continued (`SIGCONT`).
    Pause,
    /// The server killed (`SIGKILL`), then started again, empty.
    KillRestart,
    /// `SCRIPT FLUSH` every 20 ms.
    ScriptFlush,
    /// `maxmemory` below what the server uses, under `noeviction`: every write answered `OOM`.
    OutOfMemory,
    /// The server made a replica of an empty one: every write answered `READONLY`, and its
    /// keys replaced by the empty primary's.
    ReadOnly,
    /// `allkeys-random` under a `maxmemory` a filler keeps reaching: keys evicted.
    Eviction,
    /// On a three-master cluster, the master of the key's slot killed, then started again.
    ClusterMasterKilled,
    /// On a cluster with a replica, the key's master killed: its replica takes over.
    ReplicaPromoted,
    /// Under Sentinel, the primary killed: Sentinel promotes its replica.
    SentinelFailover,
}

/// Where an incident's run takes place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One `redis-server` behind a fault proxy.
    Single,
    /// Three masters (and a replica for [`Incident::ReplicaPromoted`]).
    Cluster,
    /// A primary, a replica and a Sentinel.
    Sentinel,
}

/// Which part of the library a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// One built-in limiter, by name, through `RateLimitLayer::runtime`.
    Builtin(&'static str),
    /// Two limits stacked: counted on both or neither.
    Stack,
    /// A `fixed_window` admitting on an estimate of 3 units, settled to the 1 the handler used.
    Settle,
    /// A `fixed_window` with local batches.
    Batches,
    /// A `gcra` whose denied requests wait for admission.
    Waiting,
}

/// The failure policies the matrix runs under; [`FailurePolicy::LocalShare`] only with
/// [`Mode::Batches`], as `build` requires.
pub(super) const POLICIES: [FailurePolicy; 3] = [
    FailurePolicy::Open,
    FailurePolicy::Closed,
    FailurePolicy::Memory,
];

/// The incidents each topology runs.
pub const SINGLE: [Incident; 12] = [
    Incident::Nothing,
    Incident::Latency(Duration::ZERO),
    Incident::Jitter,
    Incident::Resets,
    Incident::Partition,
    Incident::LostReplies,
    Incident::Pause,
    Incident::KillRestart,
    Incident::ScriptFlush,
    Incident::OutOfMemory,
    Incident::ReadOnly,
    Incident::Eviction,
];

/// The cluster's incidents.
pub const CLUSTER: [Incident; 2] = [Incident::ClusterMasterKilled, Incident::ReplicaPromoted];

/// Sentinel's incident.
pub const SENTINEL: [Incident; 1] = [Incident::SentinelFailover];

/// Every mode: each built-in, then the stack, settle, local batches and waiting.
#[must_use]
pub fn modes() -> Vec<Mode> {
    Builtin::ALL
        .into_iter()
        .map(|builtin| Mode::Builtin(builtin.name()))
        .chain([Mode::Stack, Mode::Settle, Mode::Batches, Mode::Waiting])
        .collect()
}

/// The policies `mode` runs under.
#[must_use]
pub fn policies(mode: Mode) -> Vec<FailurePolicy> {
    let mut all = POLICIES.to_vec();
    if mode == Mode::Batches {
        all.push(FailurePolicy::LocalShare);
    }
    all
}

/// One run, drawn from its seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The seed the rest was drawn from.
    pub seed: u64,
    /// What goes wrong.
    pub incident: Incident,
    /// What is driven.
    pub mode: Mode,
    /// What the library does when the store fails.
    pub policy: FailurePolicy,
    /// The limit: this many units (a `concurrency` limit: this many at once).
    pub limit: u32,
    /// How many app instances share the limit.
    pub instances: usize,
    /// Requests a second, over all instances.
    pub per_second: u32,
    /// When the incident starts, from the start of the load.
    pub incident_at: Duration,
    /// How long it lasts (the cluster and Sentinel incidents last until the store serves).
    pub incident_for: Duration,
    /// How long the load lasts.
    pub load_for: Duration,
    /// How long a denied request may wait ([`Mode::Waiting`]).
    pub wait: Duration,
    /// The jitter's delays, one per 25 ms of the incident ([`Incident::Jitter`]).
    pub jitter: Vec<Duration>,
}

impl Plan {
    /// The run `seed` names among `incidents`: seeds walk the incidents first, then the
    /// modes, then the policies, so consecutive seeds cover the matrix evenly; the numbers are
    /// drawn from the seed.
    #[must_use]
    pub fn new(seed: u64, incidents: &[Incident]) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let modes = modes();
        let mut cell = seed;
        let incident = incidents[(cell % incidents.len() as u64) as usize];
        cell /= incidents.len() as u64;
        let mode = modes[(cell % modes.len() as u64) as usize];
        cell /= modes.len() as u64;
        let all = policies(mode);
        let policy = all[(cell % all.len() as u64) as usize];
        let incident = match incident {
            // One way; a new connection's three round trips (its handshake, then a script
            // Redis has not cached: `NOSCRIPT`, then `EVAL`) within the timeout, and past it.
            Incident::Latency(_) => Incident::Latency(Duration::from_millis(
                [5, 10, 35, 60, 80, 150][rng.usize(0..6)],
            )),
            other => other,
        };
        let incident_at = Duration::from_millis(rng.u64(100..=250));
        let incident_for = Duration::from_millis(rng.u64(100..=400));
        let jitter = (0..incident_for.as_millis() / 25 + 1)
            .map(|_| Duration::from_millis(rng.u64(0..=60)))
            .collect();
        let per_second = rng.u32(200..=400);
        // A budget that lasts into the incident, so that it acts on a key with units left,
        // and runs out after it: the load passes the limit.
        // Every other request is the shared client's.
        let sent_by_the_end =
            per_second / 2 * (incident_at + incident_for).as_millis() as u32 / 1_000;
        let limit = match mode {
            // Units held at once: about 3 to 6 of its requests are in their handler at a time.
            Mode::Builtin("concurrency") => rng.u32(2..=4),
            // The stack's limits are types: fixed.
            Mode::Stack => deployment::STACK_LIMIT,
            _ => sent_by_the_end * rng.u32(80..=140) / 100,
        };
        Self {
            seed,
            incident,
            mode,
            policy,
            limit,
            instances: rng.usize(2..=3),
            per_second,
            incident_at,
            incident_for,
            load_for: match topology(incident) {
                // Past the recovery bound, long enough to see decisions again.
                Topology::Single => {
                    incident_at + incident_for + recovery_bound(incident) + RECOVERED_FOR
                }
                // A promotion, or a restarted master's rejoin, takes seconds.
                Topology::Cluster | Topology::Sentinel => incident_at + Duration::from_secs(7),
            },
            wait: Duration::from_millis(rng.u64(50..=150)),
            jitter,
        }
    }

    /// Where this plan runs.
    #[must_use]
    pub fn topology(&self) -> Topology {
        topology(self.incident)
    }

    /// The command that replays this run.
    #[must_use]
    pub fn replay(&self) -> String {
        format!(
            "cargo run -p plug_limit_tests --release --example fault_matrix -- --{} --seed {}",
            match self.topology() {
                Topology::Single => "single",
                Topology::Cluster => "cluster",
                Topology::Sentinel => "sentinel",
            },
            self.seed
        )
    }
}

/// Where `incident` runs.
#[must_use]
pub fn topology(incident: Incident) -> Topology {
    match incident {
        Incident::ClusterMasterKilled | Incident::ReplicaPromoted => Topology::Cluster,
        Incident::SentinelFailover => Topology::Sentinel,
        _ => Topology::Single,
    }
}

/// How long after the load the run keeps sending once the store is known to serve again,
/// beyond the recovery bound: the answers that show the recovery.
const RECOVERED_FOR: Duration = Duration::from_millis(300);

/// How soon after an incident ends every check is decided again, as the guide states it: a
/// breaker opened by it lets one probe through after [`OPEN_FOR`], which may wait out one
/// [`TIMEOUT`] on a connection the incident left behind, then the next check is decided
/// (another timeout at most); under Sentinel, from the promotion Sentinel announces. On a
/// cluster, the slot map is read again at most once a second after failed calls. Plus 100 ms
/// of scheduling on a loaded two-core machine.
#[must_use]
pub fn recovery_bound(incident: Incident) -> Duration {
    let base = OPEN_FOR + TIMEOUT * 2 + Duration::from_millis(100);
    match incident {
        Incident::ClusterMasterKilled | Incident::ReplicaPromoted => base + Duration::from_secs(1),
        _ => base,
    }
}

/// Scheduling allowance over a bound on a loaded two-core machine, as the timeout tests allow.
pub(super) const SCHEDULING: Duration = Duration::from_millis(150);

impl fmt::Display for Incident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nothing => f.write_str("nothing"),
            Self::Latency(delay) if !super::judge::fails_calls(Self::Latency(*delay)) => {
                f.write_str("latency, 3 round trips < timeout")
            }
            Self::Latency(_) => f.write_str("latency, 3 round trips > timeout"),
            Self::Jitter => f.write_str("jitter 0-60 ms"),
            Self::Resets => f.write_str("connection resets"),
            Self::Partition => f.write_str("blackhole (a partition)"),
            Self::LostReplies => f.write_str("lost replies"),
            Self::Pause => f.write_str("SIGSTOP"),
            Self::KillRestart => f.write_str("SIGKILL, restart"),
            Self::ScriptFlush => f.write_str("SCRIPT FLUSH storm"),
            Self::OutOfMemory => f.write_str("OOM replies"),
            Self::ReadOnly => f.write_str("READONLY replies"),
            Self::Eviction => f.write_str("evicting policy"),
            Self::ClusterMasterKilled => f.write_str("cluster master killed"),
            Self::ReplicaPromoted => f.write_str("cluster replica promoted"),
            Self::SentinelFailover => f.write_str("Sentinel failover"),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin(name) => f.write_str(name),
            Self::Stack => f.write_str("stack"),
            Self::Settle => f.write_str("settle"),
            Self::Batches => f.write_str("local batches"),
            Self::Waiting => f.write_str("waiting"),
        }
    }
}

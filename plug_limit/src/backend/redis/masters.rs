//! The masters of a Redis Cluster as its circuit breakers see them: which master owns each
//! slot, read from the cluster itself (`CLUSTER SLOTS`), and one breaker for each master.
//!
//! A master is the failure domain: when one dies, all of its slots go with it, so one breaker
//! per master learns of the outage from its first few failed checks, where a breaker per slot
//! would let every slot of the dead master wait out the timeout again. A breaker per master
//! also keeps one master's outage from refusing the others' checks, as one breaker for the
//! whole cluster did.
//!
//! The map is read when a new cluster connection is first used, every 30 s while checks go
//! on, after a failed call (at most once a second), and at once whenever a breaker opens or
//! closes: a failover or a slot move may be why the calls failed, or why they answer again. A
//! breaker whose master lost a slot in that read probes at once, since the failures that
//! opened it may have been that slot's new master's; a breaker whose master left the map is
//! retired. Until the first read, and for the
//! commands no one master serves (a script without keys, `reset_all`'s fan-out), one more
//! breaker stands for the whole cluster; the first map closes it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use deadpool_redis::redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use deadpool_redis::redis::{Value, cmd};

use super::connection::Current;
use super::multiplexed::Multiplexed;
use crate::backend::breaker::Breaker;
use crate::config::{CircuitBreaker, LogLevel};
use crate::telemetry::BreakerLabel;

/// The number of slots of a Redis Cluster.
const SLOTS: usize = 16384;

/// A slot no known master owns.
const UNOWNED: u16 = u16::MAX;

/// How often the map is read again while checks go on: slots move between healthy masters too.
const REREAD: Duration = Duration::from_secs(30);

/// The least time between two reads after failed calls.
const AFTER_FAILURE: Duration = Duration::from_secs(1);

/// How many nodes one read asks before it gives up: `CLUSTER SLOTS` goes to a random node,
/// which in an outage may be the dead one.
const READ_TRIES: u32 = 3;

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the text between its
/// first `{` and the next `}`, when not empty) or else of the whole key, modulo 16384.
pub(super) fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(bytes)) % 16384
}

/// The breakers of a cluster's masters, and the map that finds a slot's.
pub(super) struct Masters {
    settings: CircuitBreaker,
    log_level: LogLevel,
    /// The pool's label; each master's adds its address.
    label: BreakerLabel,
    map: RwLock<Arc<SlotMap>>,
    /// A read of the map is under way.
    reading: AtomicBool,
    /// A read was asked for since the one under way began: that one may have been answered
    /// before a failover was known (it was, when a breaker closes on a promoted replica's
    /// answer while a read waits on the dead master), so another follows it.
    again: AtomicBool,
    /// The generation of the connection the map was last read on, or tried; `u64::MAX` before
    /// the first read.
    read_on: AtomicU64,
    /// When the last read started, in milliseconds since `epoch`.
    read_at_ms: AtomicU64,
    epoch: Instant,
}

/// Which master owns each slot, and their breakers.
struct SlotMap {
    /// Each slot's owner, an index into `masters`, or [`UNOWNED`].
    owners: Box<[u16]>,
    masters: Vec<Master>,
    /// The breaker of commands no one master serves, and of slots no known master owns.
    any: Arc<Breaker>,
}

struct Master {
    /// The node's ID and address: a master that comes back elsewhere, or a replica promoted
    /// in its place, is another master with a breaker of its own.
    node: Box<str>,
    breaker: Arc<Breaker>,
}

/// One range of `CLUSTER SLOTS`: its slots, and the ID and address of their master.
struct Range {
    slots: std::ops::RangeInclusive<u16>,
    node: String,
    address: String,
}

impl Masters {
    pub(super) fn new(settings: CircuitBreaker, log_level: LogLevel, label: BreakerLabel) -> Self {
        let any = Arc::new(Breaker::new(settings, log_level, label.clone()));
        Self {
            settings,
            log_level,
            label,
            map: RwLock::new(Arc::new(SlotMap {
                owners: vec![UNOWNED; SLOTS].into_boxed_slice(),
                masters: Vec::new(),
                any,
            })),
            reading: AtomicBool::new(false),
            again: AtomicBool::new(false),
            read_on: AtomicU64::new(u64::MAX),
            read_at_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The breaker of the master owning `slot`; with no slot, the whole cluster's.
    pub(super) fn breaker(&self, slot: Option<u16>) -> Arc<Breaker> {
        let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
        let owner = slot.map_or(UNOWNED, |slot| map.owners[usize::from(slot)]);
        match map.masters.get(usize::from(owner)) {
            Some(master) => Arc::clone(&master.breaker),
            None => Arc::clone(&map.any),
        }
    }

    /// A call is about to use `current`: the map is read if it was not read on that connection
    /// yet (a new connection), or not for [`REREAD`].
    pub(super) fn using(self: &Arc<Self>, current: &Current, timeout: Duration) {
        if self.read_on.load(Ordering::Relaxed) != current.generation || self.since_read() >= REREAD
        {
            self.read(current.clone(), timeout);
        }
    }

    /// A call on `current` failed for a reason of Redis's: the map is read again if it was not
    /// for [`AFTER_FAILURE`], and at once when that opened a breaker. A slot that moved to a
    /// dead master fails without opening any breaker while its old master's other slots
    /// answer; read again, it counts against the dead master's own.
    pub(super) fn failed(self: &Arc<Self>, current: Current, opened: bool, timeout: Duration) {
        if opened || self.since_read() >= AFTER_FAILURE {
            self.read(current, timeout);
        }
    }

    fn since_read(&self) -> Duration {
        let read_at = Duration::from_millis(self.read_at_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(read_at)
    }

    /// Reads the map again in a task of its own, within `timeout` for each node asked. When a
    /// read is under way, another follows it instead: nothing asked for is lost. Nothing waits
    /// for it: the checks go on with the map they have.
    pub(super) fn read(self: &Arc<Self>, current: Current, timeout: Duration) {
        self.again.store(true, Ordering::Release);
        if self.reading.swap(true, Ordering::Acquire) {
            return;
        }
        self.read_on.store(current.generation, Ordering::Relaxed);
        // Lets the next read in however this task ends, dropped with its runtime included.
        let mut reading = Reading {
            masters: Arc::clone(self),
            held: true,
        };
        tokio::spawn(async move {
            let mut current = current;
            loop {
                reading.masters.again.store(false, Ordering::Release);
                reading.masters.read_once(&mut current, timeout).await;
                if !reading.more() {
                    break;
                }
            }
        });
    }

    /// One read: up to [`READ_TRIES`] nodes asked, each within `timeout`, until one answers.
    async fn read_once(&self, current: &mut Current, timeout: Duration) {
        let now_ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.read_at_ms.store(now_ms, Ordering::Relaxed);
        for _ in 0..READ_TRIES {
            match tokio::time::timeout(timeout, self.query(&mut current.conn)).await {
                Ok(Ok(ranges)) => return self.install(&ranges),
                Ok(Err(error)) => self.log_level.log_event(&format!(
                    "cannot read the cluster's slots, the breakers keep their map: {error}"
                )),
                Err(_) => self.log_level.log_event(&format!(
                    "cannot read the cluster's slots within {timeout:?}, the breakers keep their map"
                )),
            }
        }
    }

    /// `CLUSTER SLOTS`, asked of any master.
    async fn query(&self, conn: &mut Multiplexed) -> Result<Vec<Range>, String> {
        let Multiplexed::Cluster(cluster) = conn else {
            return Err("not a cluster connection".to_owned());
        };
        let mut slots = cmd("CLUSTER");
        slots.arg("SLOTS");
        let any = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        let reply = cluster
            .route_command(slots, any)
            .await
            .map_err(|error| error.to_string())?;
        parse_slots(&reply).ok_or_else(|| format!("an unexpected CLUSTER SLOTS reply: {reply:?}"))
    }

    /// Installs the map `ranges` give, keeping the breaker of every master still in it.
    fn install(&self, ranges: &[Range]) {
        // Only one read runs at a time: the map cannot change between this snapshot and the
        // swap below, which is all that holds the lock.
        let old = Arc::clone(&self.map.read().unwrap_or_else(PoisonError::into_inner));
        let mut owners = vec![UNOWNED; SLOTS].into_boxed_slice();
        let mut masters: Vec<Master> = Vec::new();
        for range in ranges {
            let node = format!("{}@{}", range.node, range.address);
            let index = masters
                .iter()
                .position(|master| *master.node == *node)
                .unwrap_or_else(|| {
                    let breaker = old
                        .masters
                        .iter()
                        .find(|master| *master.node == *node)
                        .map_or_else(
                            || {
                                let label = self.label.node(&range.address);
                                Arc::new(Breaker::new(self.settings, self.log_level, label))
                            },
                            |master| Arc::clone(&master.breaker),
                        );
                    masters.push(Master {
                        node: node.into(),
                        breaker,
                    });
                    masters.len() - 1
                });
            // Far fewer masters than `UNOWNED`: an index always fits.
            let index = u16::try_from(index).unwrap_or(UNOWNED);
            owners[usize::from(*range.slots.start())..=usize::from(*range.slots.end())].fill(index);
        }
        // Which of the old masters lost a slot, to another master or to none.
        let mut lost = vec![false; old.masters.len()];
        for (&before, &after) in old.owners.iter().zip(owners.iter()) {
            let Some(was) = old.masters.get(usize::from(before)) else {
                continue;
            };
            let kept = masters
                .get(usize::from(after))
                .is_some_and(|now| now.node == was.node);
            if !kept {
                lost[usize::from(before)] = true;
            }
        }
        for (master, lost) in old.masters.iter().zip(lost) {
            if !masters.iter().any(|now| now.node == master.node) {
                // It left the map: nothing reaches its breaker any more.
                master.breaker.retire();
            } else if lost {
                // The failures that opened its breaker may have been a lost slot's.
                master.breaker.probe_now();
            }
        }
        if !masters.is_empty() {
            // Each slot now has its master's breaker: the whole cluster's, opened before the
            // map was known, no longer speaks for them.
            old.any.reset();
        }
        let now = Arc::new(SlotMap {
            owners,
            masters,
            any: Arc::clone(&old.any),
        });
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = now;
    }
}

/// Marks the end of a read of the map, however its task ends.
struct Reading {
    masters: Arc<Masters>,
    /// This task holds `reading`.
    held: bool,
}

impl Reading {
    /// Lets the next read in, unless one was asked for meanwhile and this task may run it.
    /// Checking `again` after letting go closes the gap where a read asked for just before
    /// would see `reading` still held and leave it to this task, which had already looked.
    fn more(&mut self) -> bool {
        let masters = &self.masters;
        masters.reading.store(false, Ordering::Release);
        self.held =
            masters.again.load(Ordering::Acquire) && !masters.reading.swap(true, Ordering::Acquire);
        self.held
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        if self.held {
            self.masters.reading.store(false, Ordering::Release);
        }
    }
}

/// The ranges of a `CLUSTER SLOTS` reply: `[start, end, [ip, port, id, ...], replicas...]`
/// each; `None` when the reply is not of that form.
fn parse_slots(reply: &Value) -> Option<Vec<Range>> {
    let Value::Array(entries) = reply else {
        return None;
    };
    entries
        .iter()
        .map(|entry| {
            let [Value::Int(start), Value::Int(end), Value::Array(master), ..] =
                entry.as_sequence()?
            else {
                return None;
            };
            let start = u16::try_from(*start).ok()?;
            let end = u16::try_from(*end).ok()?;
            if start > end || usize::from(end) >= SLOTS {
                return None;
            }
            let text = |value: &Value| match value {
                Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                Value::SimpleString(text) => Some(text.clone()),
                _ => None,
            };
            // A master whose endpoint is unknown (`cluster-preferred-endpoint-type
            // unknown-endpoint`) answers a null host: its ID still tells it apart.
            let (host, port, id) = match master.as_slice() {
                [host, Value::Int(port), rest @ ..] => (
                    text(host).unwrap_or_else(|| "?".to_owned()),
                    *port,
                    rest.first().and_then(text),
                ),
                _ => return None,
            };
            let address = format!("{host}:{port}");
            Some(Range {
                slots: start..=end,
                node: id.unwrap_or_else(|| address.clone()),
                address,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    fn entry(start: i64, end: i64, port: i64, id: &str) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk(id)]),
        ])
    }

    fn masters() -> Masters {
        Masters::new(
            CircuitBreaker::new(1, Duration::from_secs(60)),
            LogLevel::Off,
            BreakerLabel::shared(),
        )
    }

    fn install(masters: &Masters, entries: Vec<Value>) {
        masters.install(&parse_slots(&Value::Array(entries)).unwrap());
    }

    #[test]
    fn slots_are_those_of_redis() {
        // As `CLUSTER KEYSLOT` answers.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        // An empty tag is no tag: the whole key is hashed.
        assert_ne!(slot("{}foo"), slot("foo"));
    }

    #[test]
    fn each_slot_finds_its_masters_breaker_and_a_map_read_again_keeps_them() {
        let m = masters();
        // Before the first read, every slot and no slot share the cluster's breaker.
        assert!(Arc::ptr_eq(&m.breaker(Some(0)), &m.breaker(None)));
        install(&m, vec![entry(0, 99, 1, "a"), entry(100, 16383, 2, "b")]);
        let a = m.breaker(Some(99));
        let b = m.breaker(Some(100));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &m.breaker(None)));
        assert!(Arc::ptr_eq(&b, &m.breaker(Some(16383))));
        install(&m, vec![entry(0, 99, 1, "a"), entry(100, 16383, 2, "b")]);
        assert!(Arc::ptr_eq(&a, &m.breaker(Some(0))));
        assert!(Arc::ptr_eq(&b, &m.breaker(Some(200))));
    }

    #[test]
    fn a_promoted_replica_is_a_master_of_its_own_and_a_master_that_lost_slots_probes() {
        use crate::backend::breaker::Admit;
        let m = masters();
        install(&m, vec![entry(0, 99, 1, "a"), entry(100, 16383, 2, "b")]);
        let a = m.breaker(Some(0));
        let b = m.breaker(Some(100));
        let now = std::time::Instant::now();
        assert!(a.failed(Admit::Call, now));
        assert!(b.failed(Admit::Call, now));
        assert_eq!(a.admit(), Admit::Reject);
        // a's slots went to a replica promoted on port 3; b gave slot 100 to it.
        install(&m, vec![entry(0, 100, 3, "c"), entry(101, 16383, 2, "b")]);
        let c = m.breaker(Some(0));
        assert!(!Arc::ptr_eq(&c, &a));
        assert!(Arc::ptr_eq(&c, &m.breaker(Some(100))));
        assert_eq!(c.admit(), Admit::Call);
        // b lost a slot: its open breaker probes at once.
        assert!(Arc::ptr_eq(&b, &m.breaker(Some(101))));
        assert_eq!(b.admit(), Admit::Probe);
    }

    #[test]
    fn a_master_that_swapped_a_slot_probes_the_first_map_closes_the_clusters_breaker() {
        use crate::backend::breaker::Admit;
        let m = masters();
        let now = std::time::Instant::now();
        // Before the map, a failure opens the whole cluster's breaker.
        assert!(m.breaker(Some(5)).failed(Admit::Call, now));
        assert_eq!(m.breaker(None).admit(), Admit::Reject);
        install(&m, vec![entry(0, 99, 1, "a"), entry(100, 16383, 2, "b")]);
        assert_eq!(m.breaker(None).admit(), Admit::Call);
        let a = m.breaker(Some(0));
        assert!(a.failed(Admit::Call, now));
        // a gives slot 0 to b and takes slot 100: as many slots, one of them lost.
        install(
            &m,
            vec![
                entry(0, 0, 2, "b"),
                entry(1, 100, 1, "a"),
                entry(101, 16383, 2, "b"),
            ],
        );
        assert!(Arc::ptr_eq(&a, &m.breaker(Some(100))));
        assert_eq!(a.admit(), Admit::Probe);
    }

    #[test]
    fn a_reply_out_of_form_is_refused() {
        assert!(parse_slots(&Value::Int(1)).is_none());
        assert!(parse_slots(&Value::Array(vec![entry(5, 4, 1, "a")])).is_none());
        assert!(parse_slots(&Value::Array(vec![entry(0, 16384, 1, "a")])).is_none());
        let no_id = Value::Array(vec![
            Value::Int(0),
            Value::Int(1),
            Value::Array(vec![bulk("10.0.0.1"), Value::Int(6379)]),
        ]);
        let ranges = parse_slots(&Value::Array(vec![no_id])).unwrap();
        assert_eq!(ranges[0].node, "10.0.0.1:6379");
        assert_eq!(ranges[0].address, "10.0.0.1:6379");
        let no_endpoint = Value::Array(vec![
            Value::Int(0),
            Value::Int(1),
            Value::Array(vec![Value::Nil, Value::Int(6379), bulk("c")]),
        ]);
        let ranges = parse_slots(&Value::Array(vec![no_endpoint])).unwrap();
        assert_eq!((&*ranges[0].node, &*ranges[0].address), ("c", "?:6379"));
    }
}

//! The masters of a Redis Cluster as its circuit breakers see them: which master owns each
//! slot, read from the cluster itself (`CLUSTER SLOTS`), and one breaker for each master.
//!
//! A master is the failure domain: when one dies, all of its slots go with it, so one breaker
//! per master learns of the outage from its first few failed checks, where a breaker per slot
//! would let every slot of the dead master wait out the timeout again. A breaker per master
//! also keeps one master's outage from refusing the others' checks, as one breaker for the
//! whole cluster did.
//!
//! The map is read when a new cluster connection is first used, and again whenever a breaker
//! opens: a failover or a slot move may be why its checks failed. A breaker whose master lost
//! slots in that read probes at once, since the failures that opened it may have been another
//! master's; a breaker whose master left the map is dropped. Until the first read, and for the
//! commands no one master serves (a script without keys, `reset_all`'s fan-out), one more
//! breaker stands for the whole cluster.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use deadpool_redis::redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use deadpool_redis::redis::{Value, cmd};

use super::connection::{Current, Shared};
use crate::backend::breaker::Breaker;
use crate::config::{CircuitBreaker, LogLevel};
use crate::telemetry::BreakerLabel;

/// The number of slots of a Redis Cluster.
const SLOTS: usize = 16384;

/// A slot no known master owns.
const UNOWNED: u16 = u16::MAX;

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
    /// The generation of the connection the map was last read on, or tried; `u64::MAX` before
    /// the first read.
    read_on: AtomicU64,
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
            read_on: AtomicU64::new(u64::MAX),
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

    /// A call is about to use `current`: the map is read if it was not read on it yet (a new
    /// connection).
    pub(super) fn using(self: &Arc<Self>, current: &Current, timeout: Duration) {
        if self.read_on.load(Ordering::Relaxed) != current.generation {
            self.read(current.clone(), timeout);
        }
    }

    /// Reads the map again in a task of its own, within `timeout`, unless a read is under way.
    /// Nothing waits for it: the checks go on with the map they have.
    pub(super) fn read(self: &Arc<Self>, mut current: Current, timeout: Duration) {
        if self.reading.swap(true, Ordering::Acquire) {
            return;
        }
        let masters = Arc::clone(self);
        tokio::spawn(async move {
            let read = tokio::time::timeout(timeout, masters.query(&mut current.conn)).await;
            match read {
                Ok(Ok(ranges)) => masters.install(&ranges),
                Ok(Err(error)) => masters.log_level.log_event(&format!(
                    "cannot read the cluster's slots, the breakers keep their map: {error}"
                )),
                Err(_) => masters.log_level.log_event(&format!(
                    "cannot read the cluster's slots within {timeout:?}, the breakers keep their map"
                )),
            }
            // A failed read is tried again when a breaker opens, not by every check: until
            // then the map read last, or the whole cluster's breaker, stands.
            masters.read_on.store(current.generation, Ordering::Relaxed);
            masters.reading.store(false, Ordering::Release);
        });
    }

    /// `CLUSTER SLOTS`, asked of any master.
    async fn query(&self, conn: &mut Shared) -> Result<Vec<Range>, String> {
        let Shared::Cluster(cluster) = conn else {
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
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        let old = Arc::clone(&map);
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
        let now = SlotMap {
            owners,
            masters,
            any: Arc::clone(&old.any),
        };
        for (index, master) in old.masters.iter().enumerate() {
            match now.index_of(&master.node) {
                // It lost slots: the failures that opened its breaker may have been theirs.
                Some(new) if now.owned(new) < old.owned(index) => master.breaker.probe_now(),
                Some(_) => {}
                // It left the map: nothing reaches its breaker any more.
                None => master.breaker.retire(),
            }
        }
        *map = Arc::new(now);
    }
}

impl SlotMap {
    /// The index of the master `node`, if it is one.
    fn index_of(&self, node: &str) -> Option<usize> {
        self.masters.iter().position(|master| *master.node == *node)
    }

    /// How many slots the master at `index` owns.
    fn owned(&self, index: usize) -> usize {
        let index = u16::try_from(index).unwrap_or(UNOWNED);
        self.owners.iter().filter(|&&owner| owner == index).count()
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
            let (host, port, id) = match master.as_slice() {
                [host, Value::Int(port), rest @ ..] => {
                    (text(host)?, *port, rest.first().and_then(text))
                }
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
    }
}

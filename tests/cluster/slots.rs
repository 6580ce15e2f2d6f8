//! Which master owns which slot, read from the cluster itself.

use plug_limit::redis::{self, Value, aio::MultiplexedConnection};
use plug_limit_tests::RedisCluster;

/// Which master owns which slots, read from the cluster itself.
pub(crate) struct Slots {
    ranges: Vec<(i64, i64, u16)>,
    any: MultiplexedConnection,
}

impl Slots {
    pub(crate) async fn read(cluster: &RedisCluster) -> Self {
        let mut any = cluster.node(cluster.ports()[0]).await;
        let reply: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut any)
            .await
            .unwrap();
        let Value::Array(entries) = reply else {
            panic!("CLUSTER SLOTS: {reply:?}")
        };
        let ranges = entries
            .iter()
            .map(|entry| match entry.as_sequence() {
                Some([Value::Int(start), Value::Int(end), master, ..]) => {
                    match master.as_sequence() {
                        Some([_ip, Value::Int(port), ..]) => {
                            (*start, *end, u16::try_from(*port).unwrap())
                        }
                        _ => panic!("CLUSTER SLOTS master: {master:?}"),
                    }
                }
                _ => panic!("CLUSTER SLOTS entry: {entry:?}"),
            })
            .collect();
        Self { ranges, any }
    }

    /// The slot of `key`, by `CLUSTER KEYSLOT`.
    pub(crate) async fn slot(&mut self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut self.any)
            .await
            .unwrap()
    }

    /// The port of the master owning `key` when the slots were read.
    pub(crate) async fn owner(&mut self, key: &str) -> u16 {
        let slot = i64::from(self.slot(key).await);
        self.ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|&(_, _, port)| port)
            .unwrap_or_else(|| panic!("no master owns slot {slot}"))
    }
}

//! Redis Cluster: the built-in limiters on a real three-master cluster that each test starts
//! for itself (`plug_limit_tests::RedisCluster`), healthy and with a master down.

mod decisions;
mod fault_matrix;
#[path = "../support/metric_values.rs"]
mod metric_values;
mod outages;
mod redis_settings;
mod slots;

//! What a `metrics` recorder saw, as text a test compares exactly. Not part of the support
//! library (its crate would then be a dependency of it): each test binary that needs it
//! includes it with `#[path]`.

use std::collections::BTreeMap;

use metrics_util::debugging::{DebugValue, Snapshotter};

/// Every metric recorded since the last snapshot, as `kind name{label=value,...}` → value (a
/// histogram's value is its number of samples): a snapshot drains the recorder, leaving every
/// counter it had seen at 0.
#[must_use]
pub(crate) fn metric_values(snapshotter: &Snapshotter) -> BTreeMap<String, String> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (kind, key) = key.into_parts();
            let mut labels: Vec<String> = key
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            labels.sort();
            let value = match value {
                DebugValue::Counter(n) => n.to_string(),
                DebugValue::Gauge(x) => x.into_inner().to_string(),
                DebugValue::Histogram(samples) => format!("{} samples", samples.len()),
            };
            let kind = format!("{kind:?}").to_lowercase();
            let name = key.name();
            (format!("{kind} {name}{{{}}}", labels.join(",")), value)
        })
        .collect()
}

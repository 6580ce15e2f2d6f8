//! The run's settings, read from the environment (the table in `main.rs`'s header).

use std::path::PathBuf;
use std::time::Duration;

use crate::BoxError;

/// One curve, as `COST_CURVES_ONLY` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Only {
    Keys,
    SlidingLog,
    Connections,
    Stacked,
}

impl Only {
    const ALL: [(&'static str, Self); 4] = [
        ("keys", Self::Keys),
        ("sliding_log", Self::SlidingLog),
        ("connections", Self::Connections),
        ("stacked", Self::Stacked),
    ];
}

#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) only: Vec<Only>,
    pub(crate) out: PathBuf,
    /// Keys held by the memory backend at each point.
    pub(crate) memory_keys: Vec<usize>,
    /// Keys held by Redis at each point.
    pub(crate) redis_keys: Vec<usize>,
    /// Checks of held keys timed at each point, memory backend.
    pub(crate) memory_checks: usize,
    /// Checks timed at each point on Redis, one at a time.
    pub(crate) redis_checks: usize,
    /// `sliding_log` entries per key at each point.
    pub(crate) log_entries: Vec<usize>,
    pub(crate) connections: Vec<usize>,
    pub(crate) warmup: Duration,
    pub(crate) measure: Duration,
    pub(crate) max_limits: usize,
}

impl Settings {
    pub(crate) fn from_env() -> Result<Self, BoxError> {
        let quick = std::env::var("COST_CURVES_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let only = match std::env::var("COST_CURVES_ONLY") {
            Ok(list) if !list.trim().is_empty() => list
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(|name| {
                    Only::ALL
                        .iter()
                        .find(|(known, _)| *known == name)
                        .map(|&(_, only)| only)
                        .ok_or_else(|| {
                            let known: Vec<&str> = Only::ALL.iter().map(|(n, _)| *n).collect();
                            format!("COST_CURVES_ONLY: unknown curve {name:?}, known: {known:?}")
                        })
                })
                .collect::<Result<_, _>>()?,
            _ => Only::ALL.iter().map(|&(_, only)| only).collect(),
        };
        // A quick run's charts are rough: kept out of the tree unless asked for.
        let out = std::env::var_os("COST_CURVES_OUT").map_or_else(
            || {
                if quick {
                    std::env::temp_dir().join("cost_curves")
                } else {
                    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("curves")
                }
            },
            PathBuf::from,
        );
        let decades = |from: usize, to: usize| {
            std::iter::successors(Some(from), |n| n.checked_mul(10))
                .take_while(|&n| n <= to)
                .collect::<Vec<_>>()
        };
        Ok(if quick {
            Self {
                only,
                out,
                memory_keys: decades(1_000, 100_000),
                redis_keys: decades(1_000, 10_000),
                memory_checks: 100_000,
                redis_checks: 2_000,
                log_entries: decades(1, 1_000),
                connections: vec![1, 4, 16, 64],
                warmup: Duration::from_millis(200),
                measure: Duration::from_millis(500),
                max_limits: 5,
            }
        } else {
            Self {
                only,
                out,
                memory_keys: decades(1_000, 10_000_000),
                redis_keys: decades(1_000, 1_000_000),
                memory_checks: 1_000_000,
                redis_checks: 10_000,
                log_entries: decades(1, 10_000),
                connections: vec![1, 2, 4, 8, 16, 32, 64, 128, 256],
                warmup: Duration::from_millis(500),
                measure: Duration::from_secs(2),
                max_limits: 5,
            }
        })
    }

    pub(crate) fn runs(&self, curve: Only) -> bool {
        self.only.contains(&curve)
    }
}

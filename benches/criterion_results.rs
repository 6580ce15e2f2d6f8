//! What the criterion benchmarks (`check_micro`, `route_micro`) share: running criterion with
//! the command line's arguments, then reading back the median of each function of this run,
//! and printing the conditions the run had.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use criterion::Criterion;

/// One run of criterion: where its results are, and when it started.
pub(crate) struct Run {
    home: PathBuf,
    started: SystemTime,
}

/// Runs `benches` under criterion, configured from the command line, and prints criterion's
/// summary; `None` when its results cannot be found.
pub(crate) fn run(benches: impl FnOnce(&mut Criterion)) -> Option<Run> {
    let started = SystemTime::now();
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    Some(Run {
        home: criterion_home()?,
        started,
    })
}

impl Run {
    /// The median ns criterion estimated for `group/function` in this run.
    pub(crate) fn median_ns(&self, group: &str, function: &str) -> Option<f64> {
        median_ns(&self.home, group, function, self.started)
    }
}

/// Where criterion writes its results, found as criterion finds it.
fn criterion_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(home.into());
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(target).join("criterion"));
    }
    // The bench runs from <target>/release/deps/.
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// The median ns criterion estimated for `group/function`, if it ran in this run (since
/// `since`): a function filtered out keeps the file of an earlier run.
fn median_ns(home: &Path, group: &str, function: &str, since: SystemTime) -> Option<f64> {
    let path = home
        .join(group)
        .join(function)
        .join("new")
        .join("estimates.json");
    let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
    if modified < since {
        return None;
    }
    let estimates: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

/// Prints the library's features and the machine's load average.
pub(crate) fn print_conditions() {
    let features = if cfg!(feature = "metrics") {
        "default, cluster and metrics"
    } else {
        "default and cluster"
    };
    println!("library features: {features}");
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!(
            "load average: {}",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

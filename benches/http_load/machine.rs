//! The machine around the run: busy time over every CPU, CPU model and load average.

use std::time::Duration;

pub(crate) struct Machine {
    pub(crate) redis_version: String,
    pub(crate) load_at_start: String,
    pub(crate) load_at_end: String,
}

/// Busy time summed over every CPU, from the first line of `/proc/stat`.
pub(crate) fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
    let busy = ticks.iter().take(8).sum::<u64>() - ticks.get(3)? - ticks.get(4)?;
    // `/proc/stat` counts in USER_HZ, which Linux fixes at 100 for user space.
    Some(Duration::from_millis(busy.checked_mul(10)?))
}

pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The 1-minute load average: whether something else was running.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

//! The machine around the run: busy time over every CPU, CPU model and load average.

use std::time::Duration;

pub(crate) struct Machine {
    /// The CPUs the run may use, read before any pinning.
    pub(crate) cpus: usize,
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

/// Where each party runs when the run is pinned (`HTTP_LOAD_PIN`): the server alone on one
/// CPU, the load generator and Redis on another, so the server's CPU per request counts its
/// own work, not the caches and wake-ups it shares with Redis.
pub(crate) const SERVER_CPU: usize = 0;
/// The CPU of the load generator and Redis in a pinned run.
pub(crate) const OTHERS_CPU: usize = 1;

/// Pins the task `id` (a thread's id, or with `whole` every thread of the process `id`) to
/// `cpu`, with util-linux's `taskset`.
pub(crate) fn pin(id: u32, cpu: usize, whole: bool) -> Result<(), String> {
    let mut taskset = std::process::Command::new("taskset");
    if whole {
        taskset.arg("-a");
    }
    let status = taskset
        .args(["-p", "-c", &cpu.to_string(), &id.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|err| format!("taskset: {err} (HTTP_LOAD_PIN needs util-linux)"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("taskset -p -c {cpu} {id}: {status}"))
    }
}

/// The calling thread's id, from `/proc/thread-self`.
pub(crate) fn thread_id() -> Result<u32, String> {
    let path = std::fs::canonicalize("/proc/thread-self").map_err(|err| err.to_string())?;
    path.file_name()
        .and_then(|name| name.to_str()?.parse().ok())
        .ok_or_else(|| format!("no thread id in {}", path.display()))
}

//! Memory per key of the memory backend: one million distinct keys per built-in, measured as
//! the process's resident memory before and after (Linux `/proc/self/statm`).
//!
//! Run with: `cargo bench --bench memory_keys` (`MEMORY_KEYS` sets the number of keys).

use std::time::Instant;

use plug_limit::{ManualClock, Opt, PlugLimit};

const LIMITERS: [(&str, &[Opt]); 7] = [
    ("fixed_window", &[Opt::Int(10), Opt::Int(3600)]),
    ("token_bucket", &[Opt::Int(20), Opt::Int(3600), Opt::Int(5)]),
    ("sliding_window", &[Opt::Int(10), Opt::Int(3600)]),
    ("sliding_log", &[Opt::Int(10), Opt::Int(3600)]),
    ("leaky_bucket", &[Opt::Int(10), Opt::Int(3600)]),
    ("gcra", &[Opt::Int(20), Opt::Int(3600), Opt::Int(5)]),
    ("multi_window", &[Opt::Str("10/60"), Opt::Str("100/3600")]),
];

/// Resident memory in bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .expect("resident pages in statm");
    pages * 4096
}

fn main() {
    // Each limiter is measured in a process of its own: memory freed by one would otherwise be
    // reused by the next and hide from the resident-size delta.
    if let Some(limiter) = std::env::args().nth(1).filter(|arg| !arg.starts_with('-')) {
        measure(&limiter);
        return;
    }
    println!("| limiter | keys | bytes per key | ns per check |");
    println!("|---|---:|---:|---:|");
    let exe = std::env::current_exe().expect("the bench's own path");
    for (limiter, _) in LIMITERS {
        let status = std::process::Command::new(&exe)
            .arg(limiter)
            .status()
            .expect("run the measurement");
        assert!(status.success(), "{limiter}: {status}");
    }
}

/// Prints one table row: `limiter` over `MEMORY_KEYS` (default one million) distinct keys.
fn measure(limiter: &str) {
    let keys: usize = std::env::var("MEMORY_KEYS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let (_, opts) = LIMITERS
        .into_iter()
        .find(|(name, _)| *name == limiter)
        .expect("a built-in limiter");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    // One clock far from any expiry: every key stays live.
    let limits = PlugLimit::memory_builder()
        .clock(ManualClock::starting_now())
        .build()
        .expect("defaults are valid");
    let before = resident();
    let started = Instant::now();
    runtime.block_on(async {
        let mut key = String::new();
        for i in 0..keys {
            key.clear();
            key.push_str("client-");
            key.push_str(&i.to_string());
            let outcome = limits.check(limiter, &key, opts).await.expect("check");
            assert!(outcome.is_allowed());
        }
    });
    let elapsed = started.elapsed();
    let after = resident();
    assert_eq!(limits.memory_keys(), Some(keys));
    #[allow(clippy::cast_precision_loss)]
    let per_key = after.saturating_sub(before) as f64 / keys as f64;
    #[allow(clippy::cast_precision_loss)]
    let per_check = elapsed.as_nanos() as f64 / keys as f64;
    println!("| {limiter} | {keys} | {per_key:.0} | {per_check:.0} |");
}

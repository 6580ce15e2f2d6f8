//! Memory per key of the memory backend: one million distinct keys per built-in, measured as
//! the process's resident memory before and after (Linux `/proc/self/statm`), without a key
//! bound and with `memory_capacity` at a tenth of the keys sent, so that the bound evicts.
//!
//! Run with: `cargo bench -p plug_limit_bench --bench memory_keys` (`MEMORY_KEYS` sets the number of keys).

use std::time::Instant;

use plug_limit::{ManualClock, Opt, PlugLimit, RuntimeLimit, Store};

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
    let mut args = std::env::args().skip(1).filter(|arg| !arg.starts_with('-'));
    if let (Some(limiter), Some(capacity)) = (args.next(), args.next()) {
        measure(&limiter, capacity.parse().expect("a capacity"));
        return;
    }
    let keys = keys();
    println!(
        "| limiter | capacity | keys sent | keys held | resident growth | bytes per held key | ns per check |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let exe = std::env::current_exe().expect("the bench's own path");
    for (limiter, _) in LIMITERS {
        for capacity in [usize::MAX, keys / 10] {
            let status = std::process::Command::new(&exe)
                .args([limiter, &capacity.to_string()])
                .status()
                .expect("run the measurement");
            assert!(status.success(), "{limiter}: {status}");
        }
    }
}

/// `MEMORY_KEYS`, default one million.
fn keys() -> usize {
    std::env::var("MEMORY_KEYS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000)
}

/// Prints one table row: `limiter` over `keys()` distinct keys, with at most `capacity` held.
fn measure(limiter: &str, capacity: usize) {
    let keys = keys();
    let (_, opts) = LIMITERS
        .into_iter()
        .find(|(name, _)| *name == limiter)
        .expect("a built-in limiter");
    let limit = RuntimeLimit::new(limiter, opts.iter().cloned()).expect("a valid limit");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    // One clock far from any expiry: every key stays live, and only the bound evicts.
    let limits = PlugLimit::builder(Store::memory())
        .clock(ManualClock::starting_now())
        .memory_capacity(capacity)
        .build()
        .expect("a valid capacity");
    let before = resident();
    let started = Instant::now();
    runtime.block_on(async {
        let mut key = String::new();
        for i in 0..keys {
            key.clear();
            key.push_str("client-");
            key.push_str(&i.to_string());
            let outcome = limits.check(&limit, &key).await.expect("check");
            assert!(outcome.is_allowed());
        }
    });
    let elapsed = started.elapsed();
    let after = resident();
    let held = limits.memory_keys().expect("a memory backend");
    // Unbounded, every key is held; bounded, a full shard evicts an eighth at a time.
    if capacity >= keys {
        assert_eq!(held, keys, "{limiter}: keys held");
    } else {
        assert!(held <= capacity, "{limiter}: {held} keys held");
    }
    let grown = after.saturating_sub(before);
    #[allow(clippy::cast_precision_loss)]
    let per_key = grown as f64 / held as f64;
    #[allow(clippy::cast_precision_loss)]
    let per_check = elapsed.as_nanos() as f64 / keys as f64;
    #[allow(clippy::cast_precision_loss)]
    let grown_mb = grown as f64 / 1e6;
    let capacity = if capacity == usize::MAX {
        "none".to_owned()
    } else {
        capacity.to_string()
    };
    println!(
        "| {limiter} | {capacity} | {keys} | {held} | {grown_mb:.1} MB | {per_key:.0} | {per_check:.0} |"
    );
}

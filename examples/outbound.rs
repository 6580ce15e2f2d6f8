//! Outbound throttling: workers calling a third-party API that allows 20 calls a second across
//! the whole fleet wait their turn with `PlugLimit::acquire` instead of failing.
//!
//! Run with: `REDIS_URL=redis://127.0.0.1:6379/ cargo run --example outbound`, in several
//! terminals at once to see the instances share the 20 a second.
//!
//! Without `REDIS_URL` it keeps the limit in memory (this process only), and says so. It runs
//! 5 workers, each starting calls for 3 seconds, and prints when each call went out.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use deadpool_redis::{Config, Runtime};
use plug_limit::{Gcra, PlugLimit};

/// The partner's limit: 20 calls a second, at most 2 at once.
const PARTNER: Gcra<20, 1, 2> = Gcra;

/// How long a call may wait for its turn before the worker gives it up.
const MAX_WAIT: Duration = Duration::from_secs(2);

/// Stands in for the HTTP call to the partner's API.
async fn call_partner(worker: usize, job: u32) -> String {
    format!("worker {worker}, job {job}")
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let limits = if let Ok(url) = std::env::var("REDIS_URL") {
        let pool = Config::from_url(url.as_str()).create_pool(Some(Runtime::Tokio1))?;
        let limits = PlugLimit::redis(pool);
        // A peek counts nothing: it only proves Redis answers before the workers start.
        if let Err(error) = limits.peek(PARTNER, "partner-api").await {
            return Err(format!("cannot reach Redis at {url}: {error}").into());
        }
        println!("the limit is shared through Redis at {url}");
        limits
    } else {
        println!("REDIS_URL is unset: the limit is in this process's memory");
        PlugLimit::memory()
    };

    let started = Instant::now();
    let workers: Vec<_> = (0..5)
        .map(|worker| {
            let limits = limits.clone();
            tokio::spawn(async move {
                let mut job = 0;
                while started.elapsed() < Duration::from_secs(3) {
                    // One key for the partner: every worker of every instance shares its budget.
                    let turn = limits.acquire(PARTNER, "partner-api", MAX_WAIT);
                    match turn.await {
                        Ok(outcome) if outcome.is_allowed() => {
                            let done = call_partner(worker, job).await;
                            println!("{:>5} ms  {done}", started.elapsed().as_millis());
                            job += 1;
                        }
                        Ok(_) => {
                            println!(
                                "worker {worker}: no turn within {MAX_WAIT:?}, job {job} put back"
                            )
                        }
                        Err(error) => return Err(error),
                    }
                }
                Ok(job)
            })
        })
        .collect();
    let mut total = 0;
    for worker in workers {
        total += worker.await??;
    }
    println!("{total} calls by this instance, the last started before 3 s");
    Ok(())
}

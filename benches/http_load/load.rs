//! The load generator: keep-alive connections sending requests back to back, or at an offered
//! rate, and the measured window around them.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis::aio::MultiplexedConnection;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::BoxError;
use crate::client::exchange;
use crate::cpu::Snapshot;
use crate::measurement::{Measurement, Tally};
use crate::variants::Variant;

/// How long a request may outlive the measured window before its connection is abandoned.
const GRACE: Duration = Duration::from_secs(2);

pub(crate) struct Run {
    pub(crate) variant: Variant,
    pub(crate) addr: SocketAddr,
    pub(crate) requests: Arc<[Box<[u8]>]>,
    pub(crate) connections: usize,
    /// Requests a second over all connections together; `None`: back to back.
    pub(crate) rate: Option<f64>,
    pub(crate) warmup: Duration,
    pub(crate) measure: Duration,
}

impl Run {
    pub(crate) async fn execute(
        self,
        server_cpu: &Path,
        mut redis_conn: MultiplexedConnection,
    ) -> Result<Measurement, BoxError> {
        self.preflight().await?;
        let start = Instant::now();
        let measure_from = start + self.warmup;
        let measure_until = measure_from + self.measure;
        let run = Arc::new(self);
        let tasks: Vec<_> = (0..run.connections)
            .map(|n| {
                tokio::spawn(Arc::clone(&run).connection(n, start, measure_from, measure_until))
            })
            .collect();

        tokio::time::sleep_until(measure_from).await;
        let before = Snapshot::take(server_cpu, &mut redis_conn).await;
        tokio::time::sleep_until(measure_until).await;
        let after = Snapshot::take(server_cpu, &mut redis_conn).await;
        let cpu = before.share_until(&after);
        let redis_commands = before.redis_commands_until(&after);

        let mut tally = Tally::default();
        for task in tasks {
            tally.merge(task.await?);
        }
        tally.latencies.sort_unstable();
        let percentile = |p: f64| {
            let n = tally.latencies.len();
            if n == 0 {
                return Duration::ZERO;
            }
            let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
            tally.latencies[rank - 1]
        };
        let (p50, p99) = (percentile(0.50), percentile(0.99));
        Ok(Measurement {
            variant: run.variant,
            window: run.measure,
            tally,
            p50,
            p99,
            cpu,
            redis_commands,
        })
    }

    /// Requests checked before any load: a server that answers wrongly fails the run. For
    /// `deny_flood` they also spend its client's budget, so the flood meets a denied client.
    async fn preflight(&self) -> Result<(), BoxError> {
        let name = self.variant.name();
        let check = async {
            let stream = TcpStream::connect(self.addr).await?;
            let mut buf = Vec::with_capacity(4096);
            let mut answers = Vec::new();
            // The flood's limit is 1: its second answer is the first denial.
            let requests = if self.variant == Variant::DenyFlood {
                2
            } else {
                1
            };
            for _ in 0..requests {
                answers.push(exchange(&stream, &self.requests[0], &mut buf).await?);
            }
            Ok::<_, io::Error>(answers)
        };
        let answers = tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .map_err(|_| format!("{name}: no answer within 5 s"))??;
        let last = answers.last().ok_or("no preflight answer")?;
        if !self.variant.counts(last.status) {
            return Err(format!(
                "{name}: preflight got {}, expected {}",
                last.status,
                self.variant.expected()
            )
            .into());
        }
        if self.variant.sends_rate_headers() && !last.rate_headers {
            return Err(format!("{name}: no x-ratelimit-remaining header").into());
        }
        Ok(())
    }

    /// One keep-alive connection sending requests until `until`, then at most [`GRACE`] for
    /// the last answer: back to back, or each at its turn of an offered rate, the connections'
    /// turns interleaved from `start` (a connection behind its turns sends at once, so a
    /// server slower than the rate sees requests back to back).
    async fn connection(
        self: Arc<Self>,
        n: usize,
        start: Instant,
        from: Instant,
        until: Instant,
    ) -> Tally {
        let mut tally = Tally::default();
        let mut next = n * self.requests.len() / self.connections;
        let mut stream: Option<TcpStream> = None;
        let mut buf = Vec::with_capacity(4096);
        let every = self
            .rate
            .map(|rate| Duration::from_secs_f64(self.connections as f64 / rate));
        let mut turn = every.map(|every| start + every.mul_f64(n as f64 / self.connections as f64));
        while Instant::now() < until {
            if let (Some(at), Some(every)) = (turn.as_mut(), every) {
                tokio::time::sleep_until(*at).await;
                *at += every;
            }
            let conn = match stream.as_mut() {
                Some(conn) => conn,
                None => match tokio::time::timeout_at(until, TcpStream::connect(self.addr)).await {
                    Ok(Ok(conn)) => {
                        let _ = conn.set_nodelay(true);
                        stream.insert(conn)
                    }
                    Ok(Err(err)) => {
                        tally.errors += 1;
                        tally.problem(|| format!("connect: {err}"));
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                    Err(_) => break,
                },
            };
            let request = &self.requests[next % self.requests.len()];
            next += 1;
            let sent = Instant::now();
            let answer =
                tokio::time::timeout_at(until + GRACE, exchange(conn, request, &mut buf)).await;
            let done = Instant::now();
            let counted = sent >= from && done <= until;
            match answer {
                Ok(Ok(response)) if !self.variant.counts(response.status) => {
                    if counted {
                        tally.unexpected_status += 1;
                    }
                    tally.problem(|| format!("status {}", response.status));
                }
                Ok(Ok(response)) if self.variant.sends_rate_headers() && !response.rate_headers => {
                    if counted {
                        tally.missing_headers += 1;
                    }
                    tally.problem(|| {
                        format!("{} without x-ratelimit-remaining", self.variant.expected())
                    });
                }
                Ok(Ok(_)) => {
                    if counted {
                        tally.latencies.push(done - sent);
                    }
                }
                Ok(Err(err)) => {
                    if counted {
                        tally.errors += 1;
                    }
                    tally.problem(|| format!("exchange: {err}"));
                    stream = None;
                }
                Err(_) => {
                    tally.errors += 1;
                    tally.problem(|| format!("no answer within {GRACE:?} after the window"));
                    break;
                }
            }
        }
        tally
    }
}

//! What one pass of a variant measured: the counted answers, their latencies, and the CPU and
//! Redis commands spent during the window.

use std::time::Duration;

use crate::cpu::CpuShare;
use crate::variants::Variant;

#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) latencies: Vec<Duration>,
    pub(crate) unexpected_status: u64,
    pub(crate) missing_headers: u64,
    pub(crate) errors: u64,
    pub(crate) first_problem: Option<String>,
}

impl Tally {
    pub(crate) fn problem(&mut self, problem: impl FnOnce() -> String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(problem());
        }
    }

    pub(crate) fn merge(&mut self, other: Self) {
        self.latencies.extend(other.latencies);
        self.unexpected_status += other.unexpected_status;
        self.missing_headers += other.missing_headers;
        self.errors += other.errors;
        if self.first_problem.is_none() {
            self.first_problem = other.first_problem;
        }
    }
}

#[derive(Debug)]
pub(crate) struct Measurement {
    pub(crate) variant: Variant,
    pub(crate) window: Duration,
    pub(crate) tally: Tally,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) cpu: CpuShare,
    /// Redis commands executed during the measured window.
    pub(crate) redis_commands: Option<u64>,
}

impl Measurement {
    pub(crate) fn served(&self) -> usize {
        self.tally.latencies.len()
    }

    pub(crate) fn rps(&self) -> f64 {
        self.served() as f64 / self.window.as_secs_f64()
    }

    /// CPU microseconds per served request, from a share of one core.
    pub(crate) fn per_request(&self, share: Option<f64>) -> Option<f64> {
        let rps = self.rps();
        (rps > 0.0).then_some(share? * 1e6 / rps)
    }

    pub(crate) fn micros(&self, share: Option<f64>) -> String {
        self.per_request(share)
            .map_or_else(|| "n/a".to_owned(), |us| format!("{us:.1}"))
    }

    /// Server, client and Redis CPU microseconds per served request.
    pub(crate) fn cost(&self) -> Option<f64> {
        Some(
            self.per_request(self.cpu.server)?
                + self.per_request(self.cpu.client)?
                + self.per_request(self.cpu.redis)?,
        )
    }

    /// Redis commands per counted request. Requests that were answered but not counted (the
    /// edges of the window) cost commands too, so an allow decision reads a hair above its
    /// true figure.
    pub(crate) fn redis_commands_per_request(&self) -> String {
        match (self.redis_commands, self.served()) {
            (Some(0), _) => "0".to_owned(),
            (Some(commands), served) if served > 0 => {
                let per_request = commands as f64 / served as f64;
                // A batched variant makes a few commands per thousand requests: two decimals
                // would read 0.00.
                if per_request < 0.1 {
                    format!("{per_request:.4}")
                } else {
                    format!("{per_request:.2}")
                }
            }
            (Some(commands), _) => format!("{commands} total"),
            (None, _) => "n/a".to_owned(),
        }
    }
}

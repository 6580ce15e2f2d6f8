//! The run's settings, read from the environment (the table in `main.rs`'s header).

use std::str::FromStr;
use std::time::Duration;

use crate::BoxError;
use crate::variants::Variant;

#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) measure: Duration,
    pub(crate) warmup: Duration,
    pub(crate) connections: usize,
    pub(crate) clients: usize,
    pub(crate) rounds: usize,
    /// Requests a second offered over all connections together; `None`: back to back.
    pub(crate) rate: Option<f64>,
    /// The server on a CPU of its own, the load generator and Redis on another.
    pub(crate) pin: bool,
    pub(crate) variants: Vec<Variant>,
}

impl Settings {
    pub(crate) fn from_env() -> Result<Self, BoxError> {
        let secs = |name: &str, default: f64| -> Result<Duration, BoxError> {
            let secs: f64 = env_or(name, default)?;
            if !(0.1..=600.0).contains(&secs) {
                return Err(
                    format!("{name} must be between 0.1 and 600 seconds, got {secs}").into(),
                );
            }
            Ok(Duration::from_secs_f64(secs))
        };
        let count = |name: &str, default: usize, max: usize| -> Result<usize, BoxError> {
            let n: usize = env_or(name, default)?;
            if !(1..=max).contains(&n) {
                return Err(format!("{name} must be between 1 and {max}, got {n}").into());
            }
            Ok(n)
        };
        let variants = match std::env::var("HTTP_LOAD_VARIANTS") {
            Ok(list) => {
                let mut variants = vec![Variant::Bare];
                for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let variant = Variant::ALL
                        .into_iter()
                        .find(|v| v.name() == name)
                        .ok_or_else(|| format!("HTTP_LOAD_VARIANTS: unknown variant `{name}`"))?;
                    if !variants.contains(&variant) {
                        variants.push(variant);
                    }
                }
                Variant::ALL
                    .into_iter()
                    .filter(|v| variants.contains(v))
                    .collect()
            }
            Err(_) => Variant::ALL.to_vec(),
        };
        let rate = if std::env::var("HTTP_LOAD_RATE").is_ok() {
            let rate: f64 = env_or("HTTP_LOAD_RATE", 0.0)?;
            if !(1.0..=10_000_000.0).contains(&rate) {
                return Err(format!(
                    "HTTP_LOAD_RATE must be between 1 and 10000000 requests a second, got {rate}"
                )
                .into());
            }
            Some(rate)
        } else {
            None
        };
        Ok(Self {
            measure: secs("HTTP_LOAD_SECS", 5.0)?,
            warmup: secs("HTTP_LOAD_WARMUP_SECS", 1.0)?,
            connections: count("HTTP_LOAD_CONNECTIONS", 64, 4096)?,
            clients: count("HTTP_LOAD_CLIENTS", 10_000, 1_000_000)?,
            rounds: count("HTTP_LOAD_ROUNDS", 1, 20)?,
            rate,
            pin: std::env::var_os("HTTP_LOAD_PIN").is_some_and(|v| !v.is_empty() && v != "0"),
            variants,
        })
    }
}

fn env_or<T>(name: &str, default: T) -> Result<T, BoxError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(value) => value
            .trim()
            .parse()
            .map_err(|err| format!("{name}={value}: {err}").into()),
        Err(_) => Ok(default),
    }
}

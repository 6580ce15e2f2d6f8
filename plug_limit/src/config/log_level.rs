//! The level limiter errors are logged at.

use serde::Deserialize;

/// The level at which a limiter's errors are logged (target `plug_limit`). Normal 429s are
/// never logged above `DEBUG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LogLevel {
    /// Do not log errors.
    Off,
    /// `ERROR` (the default).
    #[default]
    Error,
    /// `WARN`.
    Warn,
    /// `INFO`.
    Info,
    /// `DEBUG`.
    Debug,
    /// `TRACE`.
    Trace,
}

/// `tracing::event!` at a [`LogLevel`]: tracing needs the level as a constant.
macro_rules! log_at {
    ($level:expr, $($event:tt)+) => {
        match $level {
            LogLevel::Off => {}
            LogLevel::Error => tracing::event!(target: "plug_limit", tracing::Level::ERROR, $($event)+),
            LogLevel::Warn => tracing::event!(target: "plug_limit", tracing::Level::WARN, $($event)+),
            LogLevel::Info => tracing::event!(target: "plug_limit", tracing::Level::INFO, $($event)+),
            LogLevel::Debug => tracing::event!(target: "plug_limit", tracing::Level::DEBUG, $($event)+),
            LogLevel::Trace => tracing::event!(target: "plug_limit", tracing::Level::TRACE, $($event)+),
        }
    };
}

impl LogLevel {
    /// Logs a limiter failure at this level; `suppressed` similar failures of the limiter went
    /// unlogged since its last line.
    pub(crate) fn log(self, limiter: &str, error: &dyn std::error::Error, suppressed: u64) {
        log_at!(self, limiter = %limiter, error = %error, suppressed, "rate limit check failed");
    }

    /// Logs an event of the backend (a circuit breaker's transition) at this level.
    pub(crate) fn log_event(self, message: &str) {
        log_at!(self, "{message}");
    }
}

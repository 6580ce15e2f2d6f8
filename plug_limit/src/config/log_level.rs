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

impl LogLevel {
    /// Logs a limiter failure at this level.
    pub(crate) fn log(self, limiter: &str, error: &dyn std::error::Error) {
        macro_rules! at {
            ($level:expr) => {
                tracing::event!(target: "plug_limit", $level, limiter = %limiter, error = %error, "rate limit check failed")
            };
        }
        match self {
            Self::Off => {}
            Self::Error => at!(tracing::Level::ERROR),
            Self::Warn => at!(tracing::Level::WARN),
            Self::Info => at!(tracing::Level::INFO),
            Self::Debug => at!(tracing::Level::DEBUG),
            Self::Trace => at!(tracing::Level::TRACE),
        }
    }
}

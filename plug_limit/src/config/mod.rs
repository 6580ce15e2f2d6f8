//! Settings: plain values a [`Builder`](crate::Builder) or a [`Config`](crate::Config) holds and
//! the rooms above read (policies, the circuit breaker, log level, rules, local batches).

pub use self::circuit_breaker::CircuitBreaker;
pub use self::enabled::Enabled;
pub use self::key_failure::KeyFailure;
pub use self::local_batches::LocalBatches;
pub use self::log_level::LogLevel;
pub use self::policy::FailurePolicy;
pub use self::rules::Rules;
pub(crate) use self::rules::{Cidrs, Skip};

mod circuit_breaker;
mod enabled;
mod key_failure;
mod local_batches;
mod log_level;
mod policy;
mod rules;

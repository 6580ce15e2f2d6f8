//! Configuration: the [`Builder`], its serializable [`Config`], custom [`Limiter`]s, and the
//! settings they hold.

pub use self::builder::Builder;
pub use self::circuit_breaker::CircuitBreaker;
pub use self::connection::RedisConnection;
pub use self::enabled::Enabled;
pub use self::file::{Config, LimiterConfig, LocalBatchesConfig, ScriptConfig};
pub use self::handler_uses::LimiterUse;
pub(crate) use self::handler_uses::assert_builtin_limiters;
pub use self::key_failure::KeyFailure;
pub use self::limiter::Limiter;
pub use self::local_batches::LocalBatches;
pub use self::log_level::LogLevel;
pub use self::policy::FailurePolicy;
pub use self::rules::Rules;
pub(crate) use self::rules::{Cidrs, Skip};
pub use self::script::Script;

mod apply;
mod build;
mod builder;
mod circuit_breaker;
mod connection;
mod enabled;
mod file;
mod handler_uses;
mod key_failure;
mod limiter;
mod local_batches;
mod log_level;
mod policy;
mod rules;
mod script;

//! Building a [`PlugLimit`](crate::PlugLimit): the [`Builder`], its serializable [`Config`],
//! custom [`Limiter`]s and [`Script`]s, and the one place that assembles backends, batches and
//! the decider from them.

pub use self::builder::Builder;
pub use self::file::Config;
pub use self::handler_uses::LimiterUse;
pub use self::limiter::Limiter;
pub use self::script::Script;
pub use self::store::Store;

mod assemble;
mod builder;
mod constructors;
mod file;
mod handler_uses;
mod limiter;
mod script;
mod store;

//! The engine: every check, from a request or from a call, from start to end.
//!
//! A request's check runs in one direction, a file per stage: preparing it (`prepare.rs`: the
//! limiter, the rules, the key, into an [`Evaluation`](prepare::Evaluation)), running it
//! (`run.rs`: the deny cache, one backend dispatch), concluding it (`conclude.rs`: the hook
//! and the failure policy), and what an admitted request owes after its response (`debt.rs`,
//! settled by `settle/`). A stack
//! (`stack.rs`), a limit with local batches (`batched.rs`, over `batch/`) and a wait for
//! admission (`wait.rs`) each run their own type over the same stages; a check from code and
//! the resets are `calls.rs` (a stack's from code, `stack.rs`). [`Decider`] holds what they share and keeps it to this room.

use std::num::NonZeroUsize;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::backend::{Backend, MemoryBackend};
use crate::clock::{Clock, SystemClock};
use crate::config::{Enabled, FailurePolicy, LogLevel};
use crate::error::{BuildError, Error};
use crate::limit::LimitRef;
use crate::telemetry::Telemetry;

pub(crate) use self::deny_cache::DenyCache;
pub(crate) use self::line::Lines;
pub(crate) use self::log_throttle::LogThrottle;
pub(crate) use self::registry::{Entry, Registry};
pub(crate) use self::ruling::RuleSet;
pub(crate) use self::verdict::Verdict;

pub(crate) mod batch;
mod batched;
mod calls;
mod conclude;
mod debt;
mod deny_cache;
mod keys;
mod line;
mod log_throttle;
mod pace;
mod prepare;
mod registry;
mod ruling;
mod run;
pub(crate) mod settle;
mod stack;
mod verdict;
mod wait;

/// What a [`Decider`] is made of: the settings of the handle, and what the build made of them.
pub(crate) struct Settings {
    pub(crate) enabled: Enabled,
    pub(crate) prefix: Box<str>,
    /// For a limit naming no registered limiter, and a resolver that overruns the timeout.
    pub(crate) log_level: LogLevel,
    /// For a limit naming no registered limiter, and a resolver that overruns the timeout.
    pub(crate) on_failure: FailurePolicy,
    /// Reading with what a request owes after its response: a refund lifts a cached denial.
    pub(crate) denials: Arc<DenyCache>,
    pub(crate) backend: Backend,
    /// The clock of a memory backend made here (the fallback of [`FailurePolicy::Memory`]).
    pub(crate) clock: Option<Arc<dyn Clock>>,
    /// The key bound of a memory backend made here.
    pub(crate) memory_capacity: NonZeroUsize,
    pub(crate) registry: Registry,
    /// The timeout of a check, which also bounds a limit's asynchronous resolver.
    pub(crate) timeout: Duration,
    /// The most requests of one key that wait in its line.
    pub(crate) wait_queue: usize,
}

/// Everything a check needs: the settings, the registered limiters and the backends. Its
/// fields are the engine's: the rooms above ask it to check, reset or describe itself.
pub(crate) struct Decider {
    enabled: Enabled,
    prefix: Box<str>,
    /// For a limit naming no registered limiter, and a resolver that overruns the timeout.
    log_level: LogLevel,
    /// For a limit naming no registered limiter, and a resolver that overruns the timeout.
    on_failure: FailurePolicy,
    /// For a limit naming no registered limiter, and a resolver that overruns the timeout.
    failures: LogThrottle,
    /// Reading with what a request owes after its response: a refund lifts a cached denial.
    denials: Arc<DenyCache>,
    backend: Backend,
    /// The clock of a memory backend made here (the fallback of [`FailurePolicy::Memory`]).
    clock: Option<Arc<dyn Clock>>,
    /// The key bound of a memory backend made here.
    memory_capacity: NonZeroUsize,
    fallback: OnceLock<Backend>,
    /// The origin of the deny cache's monotonic time.
    epoch: Instant,
    registry: Registry,
    /// The label text the metrics share.
    telemetry: Telemetry,
    /// The timeout of a check, which also bounds a limit's asynchronous resolver.
    timeout: Duration,
    /// The lines of requests waiting to be admitted, one per key (`line.rs`).
    lines: Lines,
    /// Whether a request without a peer address has been reported: once, at `WARN`.
    warned_no_peer: AtomicBool,
    /// The most requests of one key that wait in its line.
    wait_queue: usize,
}

impl Decider {
    pub(crate) fn new(settings: Settings) -> Self {
        let Settings {
            enabled,
            prefix,
            log_level,
            on_failure,
            denials,
            backend,
            clock,
            memory_capacity,
            registry,
            timeout,
            wait_queue,
        } = settings;
        Self {
            enabled,
            prefix,
            log_level,
            on_failure,
            failures: LogThrottle::new(),
            denials,
            backend,
            clock,
            memory_capacity,
            fallback: OnceLock::new(),
            epoch: Instant::now(),
            registry,
            telemetry: Telemetry::default(),
            timeout,
            lines: Lines::default(),
            warned_no_peer: AtomicBool::new(false),
            wait_queue,
        }
    }

    /// Whether checks are enabled now.
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.is_enabled()
    }

    /// Whether `limiter` is registered: the error a check of it would fail with, if not.
    pub(crate) fn knows(&self, limiter: &str) -> Result<(), Error> {
        self.registry.get(limiter).map(|_| ())
    }

    /// Whether a check of `limit` can run as it is written: the registry's
    /// [`admits`](Registry::admits).
    pub(crate) fn admits(&self, limit: LimitRef<'_>) -> Result<(), BuildError> {
        self.registry.admits(limit)
    }

    /// The limiters it knows, for the unit tests of the rooms above.
    #[cfg(test)]
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The handle's default backend.
    pub(crate) fn default_backend(&self) -> &Backend {
        &self.backend
    }

    /// Its settings and limiters, as the handle's `Debug` shows them.
    pub(crate) fn describe(&self, fields: &mut std::fmt::DebugStruct<'_, '_>) {
        fields
            .field("enabled", &self.enabled)
            .field("prefix", &self.prefix)
            .field("log_level", &self.log_level)
            .field("on_failure", &self.on_failure)
            .field("backend", &self.backend)
            .field("limiters", &self.registry.names());
    }

    /// The deny cache's time: the configured clock's, else a monotonic one (a wall clock
    /// stepped back would stretch every cached denial), read at `started` when the check has
    /// read it already.
    fn now_ms(&self, started: Option<Instant>) -> i64 {
        if let Some(clock) = &self.clock {
            return clock.now_ms();
        }
        let since_epoch = started
            .unwrap_or_else(Instant::now)
            .saturating_duration_since(self.epoch);
        i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
    }

    fn backend<'a>(&'a self, entry: &'a Entry) -> &'a Backend {
        entry.backend.as_ref().unwrap_or(&self.backend)
    }

    /// The memory backend that [`FailurePolicy::Memory`] limiters fall back on, made on first
    /// use.
    fn fallback(&self) -> &Backend {
        self.fallback.get_or_init(|| {
            let clock = self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
            Backend::Memory(Arc::new(MemoryBackend::new(
                clock,
                self.memory_capacity,
                &self.prefix,
            )))
        })
    }
}

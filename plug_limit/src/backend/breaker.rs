//! The circuit breaker's state machine: closed, open until a time, half-open with one probe.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{CircuitBreaker, LogLevel};
use crate::telemetry::BreakerLabel;

/// Whether a call may go to Redis now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Closed: call.
    Call,
    /// Half-open: this call is the one probe.
    Probe,
    /// Open: do not call; fail at once.
    Reject,
}

/// The breaker of one failure domain: a single Redis, or one master of a Redis Cluster. Its
/// state sits behind a mutex, which keeps the transitions simple to reason about; while Redis
/// is healthy (`quiet`), calls read one atomic and never take it.
#[derive(Debug)]
pub(crate) struct Breaker {
    settings: CircuitBreaker,
    log_level: LogLevel,
    /// Closed and no failure counted: the state needs no change on a success, and admits all.
    quiet: AtomicBool,
    state: Mutex<State>,
    /// Its metrics, and the node its log lines name.
    label: BreakerLabel,
    /// Its master left the cluster: it records and logs nothing more.
    #[cfg(feature = "cluster")]
    retired: AtomicBool,
}

#[derive(Debug)]
struct State {
    consecutive_failures: u32,
    /// Set while open: until when no call goes through.
    open_until: Option<Instant>,
    /// A probe is on its way (half-open).
    probing: bool,
}

impl Breaker {
    /// A closed breaker, under `label` in the metrics and the log.
    pub(crate) fn new(settings: CircuitBreaker, log_level: LogLevel, label: BreakerLabel) -> Self {
        label.created();
        Self {
            settings,
            log_level,
            quiet: AtomicBool::new(true),
            state: Mutex::new(State {
                consecutive_failures: 0,
                open_until: None,
                probing: false,
            }),
            label,
            #[cfg(feature = "cluster")]
            retired: AtomicBool::new(false),
        }
    }

    /// Whether a call may go to Redis now.
    pub(crate) fn admit(&self) -> Admit {
        if self.quiet.load(Ordering::Acquire) {
            return Admit::Call;
        }
        self.admit_at(Instant::now())
    }

    /// Whether a call may go to Redis at `now`, the breaker not being quiet.
    fn admit_at(&self, now: Instant) -> Admit {
        let mut state = self.state();
        match state.open_until {
            None => Admit::Call,
            Some(until) if now < until || state.probing => Admit::Reject,
            Some(_) => {
                state.probing = true;
                Admit::Probe
            }
        }
    }

    /// Whether [`admit`](Self::admit) would refuse a call now, asked without taking the probe.
    #[cfg(feature = "cluster")]
    pub(crate) fn refuses(&self) -> bool {
        if self.quiet.load(Ordering::Acquire) {
            return false;
        }
        let state = self.state();
        state
            .open_until
            .is_some_and(|until| Instant::now() < until || state.probing)
    }

    /// A call admitted as `admit` reached Redis and got its answer. True when that closed
    /// the breaker.
    pub(crate) fn succeeded(&self, admit: Admit) -> bool {
        if self.quiet.load(Ordering::Acquire) {
            return false;
        }
        let mut state = self.state();
        state.consecutive_failures = 0;
        self.quiet.store(true, Ordering::Release);
        if admit != Admit::Probe && state.open_until.is_none() {
            return false;
        }
        state.open_until = None;
        state.probing = false;
        drop(state);
        self.announce_closed("redis answers again");
        true
    }

    /// A call admitted as `admit` failed at `now` for a reason of Redis's (timeout, lost
    /// connection, no connection). True when that opened the breaker (tripped it, or failed
    /// its probe).
    pub(crate) fn failed(&self, admit: Admit, now: Instant) -> bool {
        let mut state = self.state();
        self.quiet.store(false, Ordering::Release);
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        // A probe's failure reopens only a breaker still half-open: a late success of a call
        // admitted before the trip may have closed it meanwhile.
        let reopen = admit == Admit::Probe && state.probing;
        let trip =
            state.open_until.is_none() && state.consecutive_failures >= self.settings.failures();
        if reopen || trip {
            state.open_until = Some(now + self.settings.open_for());
            state.probing = false;
            let failures = state.consecutive_failures;
            drop(state);
            if !self.speaks() {
                return true;
            }
            if trip {
                self.label.opened();
            }
            let open_for = self.settings.open_for();
            self.log_level.log_event(&format!(
                "circuit breaker open for {open_for:?} after {failures} consecutive redis failures{}",
                self.on_node()
            ));
            return true;
        }
        false
    }

    /// An open breaker lets its next call probe at once: the failures that opened it may have
    /// been another node's (a cluster's slots moved).
    #[cfg(feature = "cluster")]
    pub(crate) fn probe_now(&self) {
        let mut state = self.state();
        if state.open_until.is_some() {
            state.open_until = Some(Instant::now());
        }
    }

    /// Nothing reaches the breaker any more (its master left the cluster's map): its gauge
    /// reads closed rather than open for ever, and the calls still under way when it left
    /// record nothing more.
    #[cfg(feature = "cluster")]
    pub(crate) fn retire(&self) {
        let state = self.state();
        if !self.retired.swap(true, Ordering::AcqRel) && state.open_until.is_some() {
            self.label.retired();
        }
    }

    /// Closes the breaker if it is open, as a success would: the cluster-wide breaker once
    /// each master has one of its own, since what opened it were the masters' failures.
    #[cfg(feature = "cluster")]
    pub(crate) fn reset(&self) {
        let mut state = self.state();
        state.consecutive_failures = 0;
        self.quiet.store(true, Ordering::Release);
        if state.open_until.take().is_some() {
            state.probing = false;
            drop(state);
            self.announce_closed("each master of the cluster has a breaker of its own now");
        }
    }

    /// Whether it records and logs its transitions: not once retired.
    #[cfg(feature = "cluster")]
    fn speaks(&self) -> bool {
        !self.retired.load(Ordering::Acquire)
    }

    /// Whether it records and logs its transitions: always, without clusters.
    #[cfg(not(feature = "cluster"))]
    #[allow(clippy::unused_self)]
    fn speaks(&self) -> bool {
        true
    }

    /// Counts and logs a transition to closed, `why` first, unless the breaker is retired.
    fn announce_closed(&self, why: &str) {
        if self.speaks() {
            self.label.closed();
            self.log_level
                .log_event(&format!("{why}: circuit breaker closed{}", self.on_node()));
        }
    }

    /// ` on node ADDRESS` for a log line, when the breaker covers one node.
    fn on_node(&self) -> String {
        match self.label.address() {
            "" => String::new(),
            node => format!(" on node {node}"),
        }
    }

    /// A probe that ended without an answer either way (its request was dropped): let another
    /// check probe.
    pub(crate) fn abandoned(&self, admit: Admit) {
        if admit == Admit::Probe {
            self.state().probing = false;
        }
    }

    /// How long the breaker stays open, for error messages.
    pub(crate) fn open_for(&self) -> Duration {
        self.settings.open_for()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every write leaves the state whole, so a poisoned lock holds a valid state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(
            CircuitBreaker::new(3, Duration::from_millis(100)),
            LogLevel::Off,
            BreakerLabel::shared(),
        )
    }

    #[test]
    fn opens_after_consecutive_failures_only() {
        let b = breaker();
        let t0 = Instant::now();
        b.failed(Admit::Call, t0);
        b.failed(Admit::Call, t0);
        b.succeeded(Admit::Call);
        b.failed(Admit::Call, t0);
        b.failed(Admit::Call, t0);
        assert_eq!(b.admit_at(t0), Admit::Call);
        b.failed(Admit::Call, t0);
        assert_eq!(b.admit_at(t0), Admit::Reject);
        assert_eq!(b.admit_at(t0 + Duration::from_millis(99)), Admit::Reject);
    }

    #[test]
    fn half_open_lets_one_probe_through_and_closes_on_success() {
        let b = breaker();
        let t0 = Instant::now();
        for _ in 0..3 {
            b.failed(Admit::Call, t0);
        }
        let later = t0 + Duration::from_millis(100);
        assert_eq!(b.admit_at(later), Admit::Probe);
        assert_eq!(b.admit_at(later), Admit::Reject);
        b.succeeded(Admit::Probe);
        assert_eq!(b.admit_at(later), Admit::Call);
    }

    #[test]
    fn a_probe_failing_after_a_late_success_closed_the_breaker_does_not_reopen_it() {
        let b = breaker();
        let t0 = Instant::now();
        let early = b.admit();
        for _ in 0..3 {
            b.failed(Admit::Call, t0);
        }
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(b.admit_at(t1), Admit::Probe);
        // A call admitted before the trip answers late: Redis is up, the breaker closes.
        b.succeeded(early);
        b.failed(Admit::Probe, t1);
        assert_eq!(b.admit_at(t1), Admit::Call);
    }

    #[test]
    fn a_failed_probe_reopens_and_an_abandoned_one_frees_the_slot() {
        let b = breaker();
        let t0 = Instant::now();
        for _ in 0..3 {
            b.failed(Admit::Call, t0);
        }
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(b.admit_at(t1), Admit::Probe);
        b.failed(Admit::Probe, t1);
        assert_eq!(b.admit_at(t1 + Duration::from_millis(99)), Admit::Reject);
        let t2 = t1 + Duration::from_millis(100);
        assert_eq!(b.admit_at(t2), Admit::Probe);
        b.abandoned(Admit::Probe);
        assert_eq!(b.admit_at(t2), Admit::Probe);
    }
}

//! Which circuit breaker a command goes through: the backend's one on a single Redis; on Redis
//! Cluster, the breaker of the master owning the command's slot (see `masters.rs`).

use std::ops::Deref;
#[cfg(feature = "cluster")]
use std::sync::Arc;
use std::time::Duration;

use super::command::Command;
use super::connection::{Current, Link};
#[cfg(feature = "cluster")]
use super::masters::{Masters, slot};
use crate::backend::breaker::Breaker;
use crate::config::{CircuitBreaker, LogLevel};
use crate::telemetry::BreakerLabel;

/// The breakers of one Redis backend.
pub(super) enum Breakers {
    /// A single Redis, or the application's own connection: one failure domain.
    One(Breaker),
    /// A Redis Cluster: one breaker per master.
    #[cfg(feature = "cluster")]
    Masters(Arc<Masters>),
}

/// The breaker one command goes through, held for the length of the call.
pub(super) enum Held<'a> {
    One(&'a Breaker),
    #[cfg(feature = "cluster")]
    Master(Arc<Breaker>),
}

impl Deref for Held<'_> {
    type Target = Breaker;

    fn deref(&self) -> &Breaker {
        match self {
            Self::One(breaker) => breaker,
            #[cfg(feature = "cluster")]
            Self::Master(breaker) => breaker,
        }
    }
}

impl Breakers {
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(super) fn new(
        cluster: bool,
        settings: CircuitBreaker,
        log_level: LogLevel,
        label: BreakerLabel,
    ) -> Self {
        #[cfg(feature = "cluster")]
        if cluster {
            return Self::Masters(Arc::new(Masters::new(settings, log_level, label)));
        }
        Self::One(Breaker::new(settings, log_level, label))
    }

    /// The breaker `command` goes through: on a cluster, its key's master's.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
    pub(super) fn of(&self, command: &Command<'_>) -> Held<'_> {
        match self {
            Self::One(breaker) => Held::One(breaker),
            #[cfg(feature = "cluster")]
            Self::Masters(masters) => Held::Master(masters.breaker(command.key().map(slot))),
        }
    }

    /// On a cluster, the open breaker of the master owning `key`'s slot, if it is open: how long
    /// it stays open.
    #[cfg(feature = "cluster")]
    pub(super) fn refusing(&self, key: &str) -> Option<Duration> {
        match self {
            Self::One(_) => None,
            Self::Masters(masters) => {
                let breaker = masters.breaker(Some(slot(key)));
                breaker.refuses().then(|| breaker.open_for())
            }
        }
    }

    /// A call is about to use `current`: on a cluster, the slot map is read if it was not read
    /// on that connection yet.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables, clippy::unused_self))]
    pub(super) fn using(&self, current: &Current, timeout: Duration) {
        #[cfg(feature = "cluster")]
        if let Self::Masters(masters) = self {
            masters.using(current, timeout);
        }
    }

    /// A call failed for a reason of Redis's, which `opened` a breaker or not: on a cluster,
    /// the slot map is read again (see `Masters::failed`), since a failover or a slot move may
    /// be why.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables, clippy::unused_self))]
    pub(super) fn failed(&self, opened: bool, link: &Link, timeout: Duration) {
        #[cfg(feature = "cluster")]
        if let (Self::Masters(masters), Some(current)) = (self, link.current()) {
            masters.failed(current, opened, timeout);
        }
    }

    /// A breaker just closed: on a cluster, the slot map is read again, since the answer may
    /// have come from a replica promoted in its master's place, which is then a master with
    /// a breaker of its own.
    #[cfg_attr(not(feature = "cluster"), allow(unused_variables, clippy::unused_self))]
    pub(super) fn closed(&self, link: &Link, timeout: Duration) {
        #[cfg(feature = "cluster")]
        if let (Self::Masters(masters), Some(current)) = (self, link.current()) {
            masters.read(current, timeout);
        }
    }
}

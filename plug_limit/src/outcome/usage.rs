//! [`Usage`]: what a request reports it used, when its limit's cost is an estimate.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest usage a limit can be charged: the scripts' largest cost.
const MAX: u32 = 2_147_483_647;
/// Nothing reported yet.
const NONE: u64 = u64::MAX;

/// The units a request actually used, reported by its handler while it runs or streams, for a
/// limit whose cost is an estimate ([`Limit::SETTLE`](crate::Limit::SETTLE),
/// `#[rate_limit(settle)]`, [`RuntimeLimit::settle`](crate::RuntimeLimit::settle)).
///
/// The request is admitted on its estimated [`COST`](crate::Limit::COST); once its response
/// ends (its body's last byte), it is charged what was reported instead: the difference is
/// given back, or taken on top (without denying: the request was served). Nothing reported
/// leaves the estimate charged. Reports saturate at 2,147,483,647 units.
///
/// A handler takes it as `Extension<Usage>`, inserted by the limit's extractor or layer, or
/// from [`RateLimited::usage`](crate::RateLimited::usage); clones report to the same request,
/// so a streaming body can count as it sends.
///
/// # Example
///
/// ```
/// use axum::{response::Response, Extension};
/// use plug_limit::{rate_limit, Usage};
///
/// // 100,000 tokens an hour per client; each request reserves 500, then pays what it used.
/// #[rate_limit(opts = [100_000, 3_600], cost = 500, settle)]
/// async fn complete(Extension(usage): Extension<Usage>) -> String {
///     let answer = String::from("a short answer");
///     usage.set(120);
///     answer
/// }
/// ```
#[derive(Clone)]
pub struct Usage(Arc<AtomicU64>);

impl Usage {
    /// Adds `units` to what was reported.
    pub fn add(&self, units: u32) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |reported| {
                let base = if reported == NONE { 0 } else { reported };
                Some(base.saturating_add(u64::from(units)).min(u64::from(MAX)))
            });
    }

    /// Reports `units` as what the request used, replacing what was reported.
    pub fn set(&self, units: u32) {
        self.0.store(u64::from(units.min(MAX)), Ordering::Relaxed);
    }

    /// What was reported; `None` until something is.
    #[must_use]
    pub fn get(&self) -> Option<u32> {
        match self.0.load(Ordering::Relaxed) {
            NONE => None,
            units => u32::try_from(units).ok(),
        }
    }
}

impl Default for Usage {
    fn default() -> Self {
        Self(Arc::new(AtomicU64::new(NONE)))
    }
}

impl fmt::Debug for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Usage").field(&self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_add_up_saturate_and_replace() {
        let usage = Usage::default();
        assert_eq!(usage.get(), None);
        usage.add(0);
        assert_eq!(usage.get(), Some(0));
        let clone = usage.clone();
        clone.add(7);
        usage.add(5);
        assert_eq!(usage.get(), Some(12));
        usage.add(u32::MAX);
        assert_eq!(usage.get(), Some(MAX));
        usage.set(3);
        assert_eq!(clone.get(), Some(3));
        usage.set(u32::MAX);
        assert_eq!(usage.get(), Some(MAX));
    }
}

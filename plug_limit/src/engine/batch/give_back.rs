//! Giving a batch's unused units back to Redis: at once when its window ends too soon to
//! spend them, else once the batch goes idle, always before the window can have ended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Slot;
use super::held::GiveBack;
use super::inner::BatchesInner;
use crate::backend::{Call, RedisBackend};
use crate::limit::Charge;
use crate::limit::Opt;

/// What a give-back needs once the request that reserved the batch is gone.
pub(super) struct Owner {
    pub(super) inner: Arc<BatchesInner>,
    pub(super) redis: Arc<RedisBackend>,
    pub(super) key: Vec<String>,
    pub(super) opts: Vec<Opt>,
}

impl Owner {
    /// Gives `units` back now, in the background (a refund `-n`).
    pub(super) fn refund(self, units: u32) {
        tokio::spawn(async move { self.send(units).await });
    }

    /// Looks at batch `generation` of `slot` every `every`, and gives back what it holds once
    /// it goes unspent that long or would be past its time by the next look.
    pub(super) fn watch(self, slot: Arc<Slot>, generation: u64) {
        tokio::spawn(async move {
            let (every, timeout) = (self.inner.settings.every, self.inner.timeout);
            loop {
                tokio::time::sleep(every).await;
                match look(&slot, generation, Instant::now(), every, timeout) {
                    GiveBack::Later => {}
                    GiveBack::Units(units) => {
                        self.send(units).await;
                        return;
                    }
                    // Spent, replaced, or too near its window's end for a refund to land:
                    // what it holds is spent until its time, never given back to a window
                    // that may be over.
                    GiveBack::Done => return,
                }
            }
        });
    }

    async fn send(&self, units: u32) {
        let call = Call {
            program: &self.inner.program,
            keys: &self.key,
            opts: &self.opts,
            // Sent to Redis, whose script reads the options itself.
            read_ahead: None,
            cost: Charge::Refund(units),
            lease: None,
        };
        if let Err(error) = self.redis.eval(call).await {
            // Units not given back are only units not admitted: never an over-admission.
            tracing::debug!(target: "plug_limit", limiter = %self.inner.program.name, %error, units, "a local batch's units were not given back");
        }
    }
}

/// One look of a watch at batch `generation` of `slot` at `now`, under the slot's lock: the
/// units to give back, taken out of the batch, once it went unspent for `every` (see
/// [`Held::give_back`](super::held::Held::give_back)).
pub(super) fn look(
    slot: &Slot,
    generation: u64,
    now: Instant,
    every: Duration,
    timeout: Duration,
) -> GiveBack {
    let mut state = slot.state();
    let look = state.held.give_back(generation, now, every, timeout);
    if let GiveBack::Units(_) = look {
        // The key's limit has these units again: a denial it holds from when the batch
        // emptied the limit no longer says so.
        state.denial = None;
    }
    look
}

//! The call that admitted a request, kept: what settling it and renewing its lease send
//! again.

use crate::backend::{Backend, Call, Program};
use crate::limit::{Charge, Opt, ReadAhead};

/// The call that admitted a request, owned: what settling it and renewing its lease send again,
/// with another charge.
pub(super) struct Admission {
    pub(super) backend: Backend,
    pub(super) program: Program,
    pub(super) keys: [String; 1],
    pub(super) opts: Box<[Opt]>,
    pub(super) read_ahead: Option<ReadAhead>,
    /// The lease the admission took, given back whole.
    pub(super) lease: Option<String>,
}

impl Admission {
    pub(super) fn call(&self, charge: Charge) -> Call<'_> {
        Call {
            program: &self.program,
            keys: &self.keys,
            opts: &self.opts,
            read_ahead: self.read_ahead.as_ref(),
            cost: charge,
            lease: self.lease.as_deref(),
        }
    }
}

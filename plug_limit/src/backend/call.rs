//! What a backend is asked and what it answers: the program a limiter runs, a call of it
//! (its keys read through `KeyText`), a stack's parts and their answers.

use std::sync::Arc;

use super::digest::{ClientMemo, Digest, KeyDigests};
use crate::algorithm::{Builtin, Runtime};
use crate::error::Error;
use crate::limit::{Charge, Opt, ReadAhead};
use crate::lua::Lua;
use crate::outcome::Names;

/// What a limiter runs: a built-in algorithm, or a custom script, with its header names.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    /// The limiter's registered name, for errors.
    pub(crate) name: Box<str>,
    /// The built-in its script implements; `None` for a custom script.
    pub(crate) algorithm: Option<Builtin>,
    pub(crate) script: Arc<Lua>,
    pub(crate) headers: Names,
}

impl Program {
    /// A built-in under its own name and headers.
    pub(crate) fn builtin(algorithm: Builtin) -> Self {
        Self {
            name: algorithm.name().into(),
            algorithm: Some(algorithm),
            script: Arc::clone(algorithm.script()),
            headers: Names::Builtin(algorithm.headers()),
        }
    }

    /// The built-in algorithm, or [`Error::NotBuiltIn`] for what only built-ins do.
    pub(crate) fn builtin_only(&self) -> Result<Builtin, Error> {
        self.algorithm
            .ok_or_else(|| Error::NotBuiltIn(plug_limit_options::excerpt(&self.name).into_owned()))
    }
}

/// One evaluation: a program, the request's namespaced keys, the limit's options (and a
/// built-in's read ahead, for its twin), the cost, and for a limiter that leases its units,
/// the lease's id (its ARGV entry after `now`): the lease a `Take` takes, or a `Refund` gives
/// back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) program: &'a Program,
    pub(crate) keys: &'a dyn KeyText,
    pub(crate) opts: &'a [Opt],
    pub(crate) read_ahead: Option<&'a ReadAhead>,
    pub(crate) cost: Charge,
    pub(crate) lease: Option<&'a str>,
}

/// The keys of a call, as the backend reads them: every key's text (Redis), or only the first
/// key's digest (the in-process stores, for which a request's keys need not be composed).
pub(crate) trait KeyText: Sync + std::fmt::Debug {
    /// Every key's text.
    fn all(&self) -> &[String];

    /// The digest by `digests` of the first key past its first `head` bytes (its
    /// `{prefix}:{TAG}:`, which the in-process stores leave out); of an empty key without keys.
    fn first_digest(&self, head: usize, digests: &KeyDigests) -> Digest {
        digests.of_text(past_head(
            self.all().first().map_or("", String::as_str),
            head,
        ))
    }

    /// [`first_digest`](Self::first_digest), one of several on one map (a stack's): a client
    /// part `memo` holds from the key before is not hashed again.
    fn first_digest_shared<'s>(
        &'s self,
        head: usize,
        digests: &KeyDigests,
        memo: &mut ClientMemo<'s>,
    ) -> Digest {
        let _ = memo;
        self.first_digest(head, digests)
    }
}

/// The length of the `{prefix}:{TAG}:` head of every key under `prefix`: `:{`, the tag's four
/// hex digits, `}:` after the prefix. The in-process stores (the memory backend, the deny
/// cache, local batches) tell keys apart past it: one handle's keys share its prefix, and the
/// tag is a function of the client part that ends the key.
pub(crate) fn head_len(prefix: &str) -> usize {
    prefix.len() + ":{0000}:".len()
}

/// A client's keys of one limiter, under any options and scope: what
/// [`PlugLimit::reset_key`](crate::PlugLimit::reset_key) deletes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientKeys<'a> {
    pub(crate) prefix: &'a str,
    /// Their hash tag.
    pub(crate) tag: [u8; 4],
    pub(crate) limiter: &'a str,
    /// The client part they hold: the client's key, or `#` and its digest.
    pub(crate) part: &'a str,
}

/// `key` past its first `head` bytes; all of it when it is shorter.
pub(crate) fn past_head(key: &str, head: usize) -> &[u8] {
    let bytes = key.as_bytes();
    bytes.get(head..).unwrap_or(bytes)
}

impl KeyText for [String; 1] {
    fn all(&self) -> &[String] {
        self
    }
}

impl KeyText for Vec<String> {
    fn all(&self) -> &[String] {
        self
    }
}

/// One limit of stacked limits: its program (a built-in), its key, options and cost, and
/// whether its denial denies the stack (`soft`: shadow mode, it does not).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StackPart<'a> {
    pub(crate) program: &'a Program,
    pub(crate) keys: &'a dyn KeyText,
    pub(crate) opts: &'a [Opt],
    pub(crate) read_ahead: Option<&'a ReadAhead>,
    pub(crate) cost: u32,
    pub(crate) soft: bool,
}

impl StackPart<'_> {
    /// The built-in the part runs, or why it cannot be stacked: a custom script, options
    /// of another number than its built-in's, or a built-in that leases (its lease would
    /// outlive the call).
    #[inline(always)]
    pub(crate) fn builtin(&self) -> Result<Builtin, Error> {
        let algorithm = self.program.builtin_only()?;
        algorithm
            .check_arity(self.opts.len())
            .map_err(|refusal| Error::Input(refusal.into()))?;
        if algorithm.leases() {
            return Err(Error::Input(format!(
                "{}: cannot be stacked: its lease outlives the call",
                algorithm.name()
            )));
        }
        Ok(algorithm)
    }

    /// The part's key, composed: what Redis reads.
    pub(crate) fn key(&self) -> &str {
        self.keys.all().first().map_or("", String::as_str)
    }
}

//! Deciding: every check, from a request or from a call, goes through here once.
//!
//! A request's check runs in one direction: the limiter's entry, the key, the namespaced
//! Redis keys, the deny cache, one backend dispatch, then the failure policy and logging, each
//! in one place. [`Decider::check`] and [`Decider::reset`] share the dispatch and skip what
//! belongs to requests (the enabled flag, the deny cache's answers, the failure policy).

use std::borrow::Cow;
use std::cell::OnceCell;
use std::future::Future;
use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant};

use tracing::Instrument;

use axum::extract::MatchedPath;
use http::request::Parts;

use crate::algorithm::{Builtin, Report};
use crate::backend::{Backend, Call, ClientKeys, MemoryBackend, Started};
use crate::clock::{Clock, SystemClock};
use crate::config::{Enabled, FailurePolicy, KeyFailure, LogLevel};
use crate::error::Error;
use crate::key::{self, Extracted, KeyExtractor, Reads};
use crate::limit::Charge;
use crate::limit::{LimitRef, Opt, ReadAhead};
use crate::outcome::Outcome;
use crate::rejection::RateLimitRejection;
use crate::settle::{self, Deadline, Pending, Terms};
use crate::telemetry::{self, DecisionLabel, Telemetry, Watch};

pub(crate) use self::deny_cache::DenyCache;
pub(crate) use self::keys::{Keys, Named};
pub(crate) use self::line::Lines;
pub(crate) use self::log_throttle::LogThrottle;
pub(crate) use self::registry::{Entry, Registry};
pub(crate) use self::ruling::RuleSet;

mod batched;
mod deny_cache;
mod keys;
mod line;
mod log_throttle;
mod pace;
mod registry;
mod ruling;
mod stack;
mod wait;

/// What a check of one request comes to: `Ok(Some(outcome))` to allow it with headers,
/// `Ok(None)` to let it through without (disabled, or failed open), `Err` to refuse it.
pub(crate) type Decided = Result<Option<Outcome>, RateLimitRejection>;

/// What preparing a check comes to, before any backend call.
pub(crate) enum Prepared<T> {
    /// The request goes to its limiter: what the preparation's `then` made of it.
    Check(T),
    /// Let through uncounted and without headers: the rules skip it, or its key could not be
    /// read and its limiter's `KeyFailure` is `Pass`.
    Pass,
    /// Answered without its limiter: refused (a deny-list, a key that could not be read), or
    /// its limiter unknown, by the failure policy.
    Answered(Decided),
}

/// A check as far as it gets without waiting: decided, or waiting on Redis.
enum Step<'a> {
    Done(Decided),
    Waiting(Pin<Box<dyn Future<Output = Decided> + Send + 'a>>),
}

/// Everything a check needs: the settings, the registered limiters and the backends.
pub(crate) struct Decider {
    pub(crate) enabled: Enabled,
    pub(crate) prefix: Box<str>,
    /// For a limit naming no registered limiter.
    pub(crate) log_level: LogLevel,
    /// For a limit naming no registered limiter.
    pub(crate) on_failure: FailurePolicy,
    /// For a limit naming no registered limiter.
    pub(crate) failures: LogThrottle,
    /// Shared with what a request owes after its response: a refund lifts a cached denial.
    pub(crate) denials: Arc<DenyCache>,
    pub(crate) backend: Backend,
    /// The clock of a memory backend made here (the fallback of [`FailurePolicy::Memory`]).
    pub(crate) clock: Option<Arc<dyn Clock>>,
    /// The key bound of a memory backend made here.
    pub(crate) memory_capacity: NonZeroUsize,
    pub(crate) fallback: OnceLock<Backend>,
    /// The origin of the deny cache's monotonic time.
    pub(crate) epoch: Instant,
    pub(crate) registry: Registry,
    /// The label text the metrics share.
    pub(crate) telemetry: Telemetry,
    /// The timeout of a check, which also bounds a limit's asynchronous resolver
    /// (`runtime_layer.rs`).
    pub(crate) timeout: Duration,
    /// The lines of requests waiting to be admitted, one per key (`line.rs`).
    pub(crate) lines: Lines,
    /// Whether a request without a peer address has been reported: once, at `WARN`.
    pub(crate) warned_no_peer: AtomicBool,
    /// The most requests of one key that wait in its line.
    pub(crate) wait_queue: usize,
}

impl Decider {
    /// Runs a request's check as far as it goes without waiting.
    fn start<'a>(&'a self, limit: &LimitRef<'a>, parts: &'a Parts) -> Step<'a> {
        if !self.enabled.is_enabled() {
            return Step::Done(Ok(None));
        }
        match self.prepare(limit, parts, None, |request| self.run(request)) {
            Prepared::Check(step) => step,
            Prepared::Pass => Step::Done(Ok(None)),
            Prepared::Answered(decided) => Step::Done(decided),
        }
    }

    /// A request's check up to its dispatch: the limiter, the rules, the key (with `shared`,
    /// what a stack's limits share of reading the request: the route it matched, looked up
    /// once, and the header the limit before read, not read again);
    /// then `then` of the request, handed over where it is made rather than moved out and in
    /// again (the request is some three hundred bytes). [`Prepared::Pass`] or
    /// [`Prepared::Answered`] when the preparation settles the check.
    #[inline]
    fn prepare<'a, T>(
        &'a self,
        limit: &LimitRef<'a>,
        parts: &'a Parts,
        shared: Option<&mut Shared<'a>>,
        then: impl FnOnce(Request<'a>) -> T,
    ) -> Prepared<T> {
        let (matched, reads) = shared
            .map(|shared| (&shared.matched, &mut shared.reads))
            .unzip();
        // Scoped to the matched route by default, so two routes never share a budget by
        // accident; `*` only when the router matched nothing (a fallback).
        let route_scope = limit
            .scope
            .or_else(|| {
                let lookup = || {
                    parts
                        .extensions
                        .get::<MatchedPath>()
                        .map(MatchedPath::as_str)
                };
                match matched {
                    Some(matched) => *matched.get_or_init(lookup),
                    None => lookup(),
                }
            })
            .unwrap_or("*");
        let entry = match self.registry.of(limit) {
            Ok(entry) => entry,
            Err(error) => {
                // Labelled by a fixed word: the name may come from a request (a run-time
                // limit), and each distinct one would be a metric series of its own.
                let watch =
                    Watch::request(&self.telemetry, telemetry::UNKNOWN_LIMITER, route_scope);
                let _entered = watch.entered();
                self.failures.log(self.log_level, limit.limiter, &error);
                watch.failed(telemetry::cause(&error));
                watch.undecided();
                return Prepared::Answered(refuse_or_pass(self.on_failure, error));
            }
        };
        let watch = Watch::request(&self.telemetry, entry.name(), route_scope);
        // Until `then` returns: a check decided without waiting logs within its span, as one
        // that waits on Redis does.
        let _entered = watch.entered();
        // Before the key and any backend call: what the rules settle costs nothing else.
        if let Some(rules) = entry.rules.as_deref() {
            match rules.judge(parts) {
                ruling::Ruling::Check => {}
                ruling::Ruling::Pass => {
                    watch.decided(DecisionLabel::Skipped);
                    return Prepared::Pass;
                }
                ruling::Ruling::Forbid => {
                    watch.decided(DecisionLabel::Forbidden);
                    return Prepared::Answered(Err(RateLimitRejection::Forbidden));
                }
            }
        }
        let extractor = limit.key.unwrap_or(&*entry.key);
        let (key, scope) = match key::extract(extractor, parts, reads) {
            Ok(key) => (key, Cow::Borrowed(route_scope)),
            Err(error) => {
                tracing::debug!(target: "plug_limit", limiter = %entry.name(), %error, "no rate limit key");
                if matches!(error, key::KeyError::NoPeerAddress) {
                    self.warn_no_peer();
                }
                let by_peer = match entry.on_key_failure {
                    KeyFailure::PeerIp => key::peer_ip().extract(parts).ok().map(Extracted::Owned),
                    KeyFailure::Reject | KeyFailure::Pass => None,
                };
                let Some(peer) = by_peer else {
                    watch.failed(telemetry::KEY_CAUSE);
                    watch.undecided();
                    if entry.on_key_failure == KeyFailure::Pass {
                        return Prepared::Pass;
                    }
                    return Prepared::Answered(Err(RateLimitRejection::KeyRejected(error)));
                };
                // A budget of its own: the extractor's keys and the peer's never meet.
                (peer, Cow::Owned(format!("{route_scope}\0peer")))
            }
        };
        Prepared::Check(then(Request {
            entry,
            keys: Keys::namespaced(key, &self.prefix, named(entry, limit), scope),
            opts: limit.opts,
            read_ahead: limit.read_ahead,
            cost: limit.cost,
            // A shadow limiter never refuses, so it has no denials to answer from a cache.
            cached: (entry.deny_cache && !entry.shadow)
                .then(|| (opts_id(limit.opts), self.now_ms(watch.started()))),
            lease: lease_for(entry, Charge::Take(limit.cost)),
            terms: Terms {
                count_if: limit.count_if,
                settle: limit.settle,
            },
            watch,
        }))
    }

    /// Says once, at `WARN`, that requests come without a peer address: a server made without
    /// `into_make_service_with_connect_info` turns every request keyed by it into a `400`,
    /// which the `DEBUG` line alone would leave unexplained.
    #[cold]
    fn warn_no_peer(&self) {
        if !self.warned_no_peer.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "plug_limit",
                "requests come without a peer address, so a key read from it refuses them with 400: serve with `into_make_service_with_connect_info::<SocketAddr>()` (in tests, add axum's `MockConnectInfo` layer), or key by something else"
            );
        }
    }

    /// The local deny cache's answer to `request`, if it holds a denial for it. Inline, so
    /// that a limiter without the cache (the memory backend's) pays no call to learn it.
    #[inline]
    fn cached_denial(&self, request: &Request<'_>) -> Option<Decided> {
        let (opts, now_ms) = request.cached?;
        self.cached_denial_at(request, opts, now_ms)
    }

    /// [`cached_denial`](Self::cached_denial) of a limiter with the cache.
    fn cached_denial_at(&self, request: &Request<'_>, opts: u64, now_ms: i64) -> Option<Decided> {
        let outcome = self
            .denials
            .get(&request.keys, opts, request.cost, now_ms)?;
        let entry = request.entry;
        // The client's key stays out of the logs: it may be a credential (an API key).
        tracing::trace!(target: "plug_limit", limiter = %entry.name(), "request denied from the local deny cache");
        request.watch.deny_cache_hit();
        request.watch.decided(DecisionLabel::Denied);
        let hooked = entry.hooked(&outcome);
        Some(hooked.unwrap_or_else(|| Err(RateLimitRejection::denied(outcome))))
    }

    /// Answers `request` from the deny cache, or sends it to its backend.
    #[inline(always)]
    fn run<'a>(&'a self, request: Request<'a>) -> Step<'a> {
        if let Some(decided) = self.cached_denial(&request) {
            return Step::Done(decided);
        }
        let entry = request.entry;
        request.watch.dispatched(self.backend(entry).name());
        let backend = self.backend(entry);
        if let (Some(batches), Backend::Redis(redis)) = (&entry.batches, backend)
            && request.batchable()
        {
            return self.run_batched(batches, redis, request);
        }
        match backend.start(request.call()) {
            Started::Done(result) => {
                let result = self.admit(&request, backend, result);
                Step::Done(self.conclude(&request, result))
            }
            Started::Redis(redis) => {
                let span = request.watch.span().cloned();
                waiting(span, async move {
                    let result = redis.eval(request.call()).await;
                    let result = self.admit(&request, backend, result);
                    self.conclude(&request, result)
                })
            }
        }
    }

    /// Turns an evaluation into the request's fate: allowed, denied (and remembered by the
    /// deny cache), or failed by the limiter's policy.
    #[inline(always)]
    fn conclude(&self, request: &Request<'_>, result: Result<Outcome, Error>) -> Decided {
        match result {
            Ok(outcome) => self.verdict(request, outcome),
            Err(error) => self.fail(request, error),
        }
    }

    /// What an outcome, from the backend or from the memory fallback, means for the request:
    /// allowed, let through by shadow mode, or denied (and remembered by the deny cache).
    /// Inline to its callers: most outcomes are allowed, and are not moved into a call and out.
    #[inline(always)]
    fn verdict(&self, request: &Request<'_>, outcome: Outcome) -> Decided {
        let entry = request.entry;
        // Styled before the deny cache keeps a denial, so its answers read as this one does.
        let outcome = entry
            .style
            .finish(|| request.keys.first(), request.opts, outcome);
        // Most checks: allowed, and no hook to hear of it. Returned at once, the outcome is
        // moved once rather than through every arm below.
        if entry.hook.is_none() && outcome.is_allowed() {
            request.watch.decided(DecisionLabel::Allowed);
            return Ok(Some(outcome));
        }
        self.verdict_heard(request, outcome)
    }

    /// [`verdict`](Self::verdict) of a denial, or of an outcome a hook hears of.
    fn verdict_heard(&self, request: &Request<'_>, outcome: Outcome) -> Decided {
        let entry = request.entry;
        // The hook speaks first; the default path still counts, caches and logs the decision.
        let hooked = entry
            .hooked(&outcome)
            // Shadow mode never refuses, whatever a hook answers to a would-be denial.
            .filter(|decided| !(entry.shadow && decided.is_err()));
        let decided = match outcome {
            outcome if outcome.is_allowed() => {
                request.watch.decided(DecisionLabel::Allowed);
                Ok(Some(outcome))
            }
            outcome if entry.shadow => {
                if let Some(suppressed) = entry.shadow_denials.due() {
                    tracing::info!(target: "plug_limit", limiter = %entry.name(), suppressed, "request would be denied (shadow mode)");
                }
                request.watch.decided(DecisionLabel::ShadowDenied);
                Ok(Some(outcome))
            }
            outcome => {
                tracing::debug!(target: "plug_limit", limiter = %entry.name(), "request denied");
                request.watch.decided(DecisionLabel::Denied);
                if let Some((opts, now_ms)) = &request.cached {
                    self.denials
                        .insert(&request.keys, *opts, request.cost, &outcome, *now_ms);
                }
                Err(RateLimitRejection::denied(outcome))
            }
        };
        hooked.unwrap_or(decided)
    }

    /// Logs a check that could not decide and applies the limiter's failure policy: the one
    /// place both happen.
    fn fail(&self, request: &Request<'_>, error: Error) -> Decided {
        let entry = request.entry;
        entry.failures.log(entry.log_level, entry.name(), &error);
        request.watch.failed(telemetry::cause(&error));
        if let Some(decided) = entry.hooked_failure(&error) {
            request.watch.undecided();
            return decided;
        }
        if entry.on_failure == FailurePolicy::Memory
            && let Started::Done(result) = self.fallback().start(request.call())
        {
            return match self.admit(request, self.fallback(), result) {
                Ok(outcome) => {
                    request.watch.fell_back();
                    self.verdict(request, outcome)
                }
                Err(error) => {
                    entry.failures.log(entry.log_level, entry.name(), &error);
                    request.watch.undecided();
                    Ok(None)
                }
            };
        }
        request.watch.undecided();
        refuse_or_pass(entry.on_failure, error)
    }

    /// `result` of `request`'s call on `backend`, holding what it owes after its response.
    #[inline]
    fn admit(
        &self,
        request: &Request<'_>,
        backend: &Backend,
        result: Result<Outcome, Error>,
    ) -> Result<Outcome, Error> {
        let caches_denials = request.cached.is_some();
        self.admitted(
            backend,
            request.call(),
            request.terms,
            caches_denials,
            result,
        )
    }

    /// `result` of `call` on `backend`, holding what an admitted request owes after its response:
    /// the lease `call` took, what `terms` say, and (`caches_denials`) the deny cache its refund
    /// must lift. A call that failed may still have taken its lease (a reply lost on the way
    /// back): it is given back at once.
    #[inline]
    fn admitted(
        &self,
        backend: &Backend,
        call: Call<'_>,
        terms: Terms,
        caches_denials: bool,
        result: Result<Outcome, Error>,
    ) -> Result<Outcome, Error> {
        // Inline, so that a call that owes nothing after its response (most of them) does not
        // move its result in and out of a call.
        if call.lease.is_none() && !terms.owes() {
            return result;
        }
        self.owing(backend, call, terms, caches_denials, result)
    }

    /// [`admitted`](Self::admitted) of a call that owes something after its response.
    fn owing(
        &self,
        backend: &Backend,
        call: Call<'_>,
        terms: Terms,
        caches_denials: bool,
        result: Result<Outcome, Error>,
    ) -> Result<Outcome, Error> {
        match result {
            Ok(outcome) if outcome.is_allowed() => {
                let pending = self.owed(backend, call, terms, caches_denials, outcome.report());
                // A set clock, not real time, ends leases: renewals would keep them forever.
                let pending = if self.clock.is_none() {
                    pending.renewing()
                } else {
                    pending
                };
                Ok(outcome.owing(pending))
            }
            Ok(outcome) => Ok(outcome),
            Err(error) => {
                if call.lease.is_some() {
                    drop(Pending::new(
                        backend,
                        call,
                        Terms::default(),
                        Deadline::after(None, Duration::ZERO),
                        None,
                    ));
                }
                Err(error)
            }
        }
    }

    /// What a request admitted with `outcome` by `call` on `backend` owes after its response:
    /// the lease `call` took and what `terms` say, refunds lifting the deny cache's denials
    /// (`caches_denials`) and going back only until the outcome's reset.
    fn owed(
        &self,
        backend: &Backend,
        call: Call<'_>,
        terms: Terms,
        caches_denials: bool,
        report: Option<&Report>,
    ) -> Pending {
        let reset_s = report
            .and_then(|report| u64::try_from(report.reset()).ok())
            .unwrap_or(0);
        // Less a second, as the reset is rounded, and twice the timeout: the refund is sent
        // after the deadline is read, and may take that long to land.
        let refund_within = Duration::from_secs(reset_s)
            .saturating_sub(Duration::from_secs(1))
            .saturating_sub(self.timeout.saturating_mul(2));
        let refund_until = Deadline::after(self.clock.as_ref(), refund_within);
        let denials = caches_denials.then_some(&self.denials);
        Pending::new(backend, call, terms, refund_until, denials)
    }

    /// Evaluates `limit` for the programmatic client key `client`, charging `cost`: the same
    /// dispatch as a request's, with every error returned to the caller.
    pub(crate) async fn check(
        &self,
        limit: LimitRef<'_>,
        client: &str,
        cost: Charge,
    ) -> Result<Outcome, Error> {
        let scope = limit.scope.unwrap_or_default();
        let opts = limit.opts;
        let watch = Watch::call(&self.telemetry, limit.limiter, scope, cost);
        let work = async {
            let entry = self.registry.of(&limit)?;
            let keys = self.client_keys(entry, limit, client);
            if matches!(cost, Charge::Refund(_)) {
                // Units given back may lift a denial this instance has cached.
                self.denials.remove(&keys);
            }
            let lease = lease_for(entry, cost);
            let call = Call {
                program: &entry.program,
                keys: &keys,
                opts,
                read_ahead: limit.read_ahead,
                cost,
                lease: lease.as_deref(),
            };
            let backend = self.backend(entry);
            watch.dispatched(backend.name());
            let result = backend.eval(call).await;
            let outcome =
                self.admitted(backend, call, Terms::default(), entry.deny_cache, result)?;
            Ok(entry.style.finish(|| keys.first(), opts, outcome))
        };
        // Within the span only when something would record it (see `waiting`), and awaited
        // where it lies: each move of the work's future is a copy of it.
        let result = match watch.span() {
            None => work.await,
            Some(span) => work.instrument(span.clone()).await,
        };
        watch.checked(&result);
        result
    }

    /// Forgets everything `limit` counted for `client`, here and in this instance's deny
    /// cache.
    pub(crate) async fn reset(&self, limit: LimitRef<'_>, client: &str) -> Result<(), Error> {
        let entry = self.registry.of(&limit)?;
        let keys = self.client_keys(entry, limit, client);
        self.denials.remove(&keys);
        if let Some(batches) = &entry.batches {
            batches.forget(&keys);
        }
        let reset = self.backend(entry).reset(keys.first()).await;
        // Again: a batch reserved by a request while the key went would be of the window the
        // reset ended.
        if let Some(batches) = &entry.batches {
            batches.forget(&keys);
        }
        reset
    }

    /// Forgets everything `limiter` counted for `client` under any options and scope: in its
    /// backend and the memory fallback, in this instance's deny cache and local batches.
    pub(crate) async fn reset_key(&self, limiter: &str, client: &str) -> Result<u64, Error> {
        let entry = self.registry.get(limiter)?;
        let name = entry.name();
        let (tag, part) = keys::client_parts(client);
        let forget_here = || {
            self.denials.remove_client(name, &part);
            if let Some(batches) = &entry.batches {
                batches.forget_client(name, &part);
            }
        };
        forget_here();
        let (mut deleted, mut first_error) = (0, None);
        // One failing store does not keep the other from being cleared.
        let client = ClientKeys {
            prefix: &self.prefix,
            tag,
            limiter: name,
            part: &part,
        };
        for backend in std::iter::once(self.backend(entry)).chain(self.fallback.get()) {
            match backend.clear_client(client).await {
                Ok(count) => deleted += count,
                Err(error) => first_error = first_error.or(Some(error)),
            }
        }
        // Again: a denial cached, or a batch reserved, while the keys went would outlive them.
        forget_here();
        first_error.map_or(Ok(deleted), Err)
    }

    /// Forgets everything every limiter counted, in every backend (the limiters' own pools and
    /// the memory fallback included) and in this instance's deny cache.
    pub(crate) async fn reset_all(&self) -> Result<u64, Error> {
        self.denials.clear();
        for batches in self
            .registry
            .entries()
            .filter_map(|entry| entry.batches.as_ref())
        {
            batches.clear();
        }
        let own = self
            .registry
            .entries()
            .filter_map(|entry| entry.backend.as_ref());
        let fallback = self.fallback.get();
        let (mut deleted, mut first_error) = (0, None);
        // One failing Redis does not keep the others, or memory, from being cleared.
        for backend in std::iter::once(&self.backend).chain(own).chain(fallback) {
            match backend.clear(&self.prefix).await {
                Ok(count) => deleted += count,
                Err(error) => first_error = first_error.or(Some(error)),
            }
        }
        // Again: a denial cached, or a batch reserved, while the keys went would outlive the
        // reset.
        self.denials.clear();
        for batches in self
            .registry
            .entries()
            .filter_map(|entry| entry.batches.as_ref())
        {
            batches.clear();
        }
        first_error.map_or(Ok(deleted), Err)
    }

    /// The keys a programmatic check of `limit` counts `client` under: those of a request
    /// from the same client to a route of the limit's scope (none: `""`).
    fn client_keys<'a>(
        &'a self,
        entry: &'a Entry,
        limit: LimitRef<'a>,
        client: &'a str,
    ) -> Keys<'a> {
        let scope = limit.scope.unwrap_or_default();
        Keys::of_client(client, &self.prefix, named(entry, &limit), scope)
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

/// What a stack's limits share of reading their one request: each would read it alike.
#[derive(Default)]
struct Shared<'p> {
    /// The route the request matched (`None`: none did), once looked up.
    matched: OnceCell<Option<&'p str>>,
    reads: Reads<'p>,
}

/// One request's evaluation: its limiter, keys and limit, and when it consulted the deny
/// cache.
struct Request<'a> {
    entry: &'a Entry,
    keys: Keys<'a>,
    opts: &'a [Opt],
    read_ahead: Option<&'a ReadAhead>,
    cost: u32,
    /// Set when the limiter keeps a deny cache: the limit's options as the cache tells limits
    /// apart, and the time (by the limiter's clock) it was consulted.
    cached: Option<(u64, i64)>,
    /// The id of the lease it takes, for a limiter that leases its units.
    lease: Option<String>,
    /// What it owes its limit after its response, beyond its cost.
    terms: Terms,
    /// Its span and metrics.
    watch: Watch<'a>,
}

impl Request<'_> {
    fn call(&self) -> Call<'_> {
        Call {
            program: &self.entry.program,
            keys: &self.keys,
            opts: self.opts,
            read_ahead: self.read_ahead,
            cost: Charge::Take(self.cost),
            lease: self.lease.as_deref(),
        }
    }
}

/// What the keys of `limit`, run by `entry`, name of it.
fn named<'a>(entry: &'a Entry, limit: &LimitRef<'a>) -> Named<'a> {
    Named {
        limiter: entry.name(),
        opts: limit.opts,
        opts_key: limit.opts_key,
    }
}

/// The id of the lease a call of `cost` takes on `entry`'s limiter: a fresh one when the
/// limiter leases its units (a request holds them until its response ends) and the call takes
/// some; a peek takes nothing, so it has nothing to give back.
fn lease_for(entry: &Entry, cost: Charge) -> Option<String> {
    let leases = entry.program.algorithm.is_some_and(Builtin::leases);
    (leases && matches!(cost, Charge::Take(1..))).then(settle::new_id)
}

/// A limit's options as the deny cache and local batches tell limits apart (two limits of
/// different options may count under one key and decide differently): their hash, within this
/// process.
///
/// foldhash's quality hasher under a seed drawn once per process: a few words hash in a few
/// nanoseconds, where std's SipHash took about 35 on every cached or batched check (a profile
/// of `http_load`'s `global_batched`). The seed is secret, where `DefaultHasher::new()`'s key
/// is public; and a collision, which a run-time resolver building options from request text
/// could at most stumble on, only mixes two limits that count under the same client key.
fn opts_id(opts: &[Opt]) -> u64 {
    static HASHER: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);
    HASHER.hash_one(opts)
}

/// A check waiting on Redis, within `span` when there is one (something would record it):
/// entering and leaving a disabled span on every poll cost a Redis check about 400
/// instructions. Boxed where it is made: each move of the call's future is a copy of it.
fn waiting<'a>(
    span: Option<tracing::Span>,
    call: impl Future<Output = Decided> + Send + 'a,
) -> Step<'a> {
    Step::Waiting(match span {
        None => Box::pin(call),
        Some(span) => Box::pin(call.instrument(span)),
    })
}

/// The failure policy's answer once nothing can decide: pass (`Open`, and `Memory` when memory
/// cannot stand in) or refuse with 503 (`Closed`, and `LocalShare` where no share stands in).
fn refuse_or_pass(policy: FailurePolicy, error: Error) -> Decided {
    match policy {
        FailurePolicy::Open | FailurePolicy::Memory => Ok(None),
        FailurePolicy::Closed | FailurePolicy::LocalShare => {
            Err(RateLimitRejection::Unavailable(error))
        }
    }
}

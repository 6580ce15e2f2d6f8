//! The Redis backend: scripts evaluated by SHA1 on one shared multiplexed connection, to a
//! single Redis or (feature `cluster`) to a Redis Cluster.
//!
//! The rules every call follows:
//! - **Counted once or not at all.** A command that may have reached Redis is never sent
//!   again: a lost reply, a dropped connection or a timeout fails the check (its failure policy
//!   applies). A dropped connection, and one that answered nothing at all while a check timed
//!   out on it, is replaced for the next check. Only what counted nothing is retried: a command
//!   the connection refused on its first poll because it had already closed (sent again on a
//!   fresh connection; the only way it ran is a write failing in the same microseconds), a
//!   `PING` on an idle connection before a decision is sent on it, and a script Redis answered
//!   `NOSCRIPT` for (it ran nothing), sent again with its body (`EVAL`). On Redis Cluster the
//!   cluster client also resends by itself after a connection error (its own retry policy,
//!   which deadpool's cluster pool does not expose): a lost reply there may count twice, an
//!   over-count, never a free pass.
//! - **One timeout.** The backend's timeout bounds the whole call, connection included; the
//!   client's own response timeout is set above it, so it never cuts a call short.
//! - **Outages cost nothing once known.** A circuit breaker stops calling a Redis that keeps
//!   failing, so checks fail at once instead of each waiting out the timeout. On Redis Cluster
//!   each master has its own (`masters.rs`): one master's outage costs only the checks of its
//!   own slots.

use std::fmt;
use std::future::poll_fn;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use deadpool_redis::redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use self::breakers::Breakers;
use self::command::{Command, del, evalsha};
pub(crate) use self::connection::ConnectionSource;
use self::connection::Link;
use self::eviction::Eviction;
pub use self::eviction::EvictionPolicy;
use super::answer::{Answer, Outcomes, Stacked};
use super::breaker::{Admit, Breaker};
use super::call::{Call, ClientKeys, Program, StackPart, head_len};
use super::digest::split;
use crate::algorithm::{self, Builtin, stack};
use crate::clock::{Clock, SystemClock};
use crate::config::{CircuitBreaker, LogLevel};
use crate::error::Error;
use crate::limit::{Charge, Opt};
use crate::outcome::{
    Outcome, answered_in_full, packed_records, parse_builtin, parse_record, parse_reply,
};
use crate::telemetry::BreakerLabel;

mod breakers;
mod command;
mod connection;
mod eviction;
#[cfg(feature = "cluster")]
mod masters;
mod multiplexed;

/// Runs limiter scripts on Redis.
pub(crate) struct RedisBackend {
    link: Link,
    /// The most a call may take, connection included.
    timeout: Duration,
    /// Set: built-ins decide by this clock instead of the server's `TIME`.
    clock: Option<Arc<dyn Clock>>,
    breakers: Breakers,
}

/// How a Redis backend calls Redis.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) timeout: Duration,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    pub(crate) breaker: CircuitBreaker,
    pub(crate) log_level: LogLevel,
    /// The breakers' `pool` label in the metrics.
    pub(crate) pool: BreakerLabel,
}

impl RedisBackend {
    pub(crate) fn new(pool: ConnectionSource, settings: Settings) -> Self {
        // Twice the backend's timeout: the backend's fires first and is the one that counts.
        let response_timeout = settings.timeout.saturating_mul(2);
        let eviction = Eviction::new(settings.pool.clone(), settings.timeout);
        let link = Link::new(pool, response_timeout, eviction);
        let breakers = Breakers::new(
            link.is_cluster(),
            settings.breaker,
            settings.log_level,
            settings.pool,
        );
        Self {
            link,
            timeout: settings.timeout,
            clock: settings.clock,
            breakers,
        }
    }

    /// Evaluates `call` in one `EVALSHA` round trip.
    ///
    /// A built-in gets `ARGV = [opts..., cost, now_ms]`; both trailing values are optional, so
    /// the seed's plain `ARGV = opts` call stays valid and sends nothing extra.
    ///
    /// A calendar quota in a time zone gets `ARGV = [opts..., cost, now_ms, period_end]`: the
    /// script cannot know the zone's rules, so the period's end is found here, for a `now_ms`
    /// read here (the backend's clock, else the system's) and sent with it, the one time the
    /// script decides by.
    pub(crate) async fn eval(&self, call: Call<'_>) -> Result<Outcome, Error> {
        let zoned = zone_of(call.program, call.opts);
        // Custom scripts keep their own time: only a built-in takes `now_ms`.
        let now_ms = match (&self.clock, call.program.algorithm) {
            (Some(clock), Some(_)) => Some(clock.now_ms()),
            (None, Some(_)) if zoned.is_some() => Some(SystemClock.now_ms()),
            _ => None,
        };
        let lease = call.lease;
        let ends = match (zoned, now_ms) {
            (Some(name), Some(now_ms)) => {
                Some(algorithm::zone_end(call.opts, name, now_ms).map_err(Error::Input)?)
            }
            _ => None,
        };
        let extra = [
            cost_arg(call.cost),
            // '' stands for Redis TIME where a lease id follows.
            now_ms.map_or(Opt::Str(""), Opt::Int),
            match (lease, ends) {
                (Some(id), _) => Opt::Text(id.into()),
                (None, Some(ends)) => Opt::Int(ends),
                (None, None) => Opt::Str(""),
            },
        ];
        let extra = match (call.cost, now_ms, lease.or(ends.map(|_| ""))) {
            (_, _, Some(_)) => &extra[..],
            (Charge::Take(1), None, None) => &extra[..0],
            (_, None, None) => &extra[..1],
            (_, Some(_), None) => &extra[..2],
        };
        if !extra.is_empty() {
            call.program.builtin_only()?;
        }
        let lua = &call.program.script;
        let command = Command::Script {
            limiter: &call.program.name,
            evalsha: evalsha(lua, call.keys.all(), call.opts, extra),
            lua,
            keys: call.keys.all(),
            args: [call.opts, extra],
        };
        let reply = self.send(&command).await?;
        Ok(match call.program.algorithm {
            Some(algorithm) => parse_builtin(reply, algorithm, &call.program.headers)?,
            None => parse_reply(reply, &call.program.headers)?,
        })
    }

    /// Evaluates stacked limits in one `EVALSHA` of the stack script, on the same terms as
    /// [`eval`](Self::eval). On Redis Cluster, the parts whose keys share a slot go in one
    /// call, the groups one after another in the order of their first part, all within one
    /// timeout; a group that denies or fails ends the stack, and the groups before it keep
    /// what they counted. A stack with a group on a master whose breaker is open fails at once,
    /// and counts nothing.
    pub(crate) async fn eval_stack<'a>(&self, parts: &[StackPart<'a>]) -> Stacked {
        let started = Instant::now();
        let zoned = |part: &StackPart<'a>| zone_of(part.program, part.opts);
        // A period end in a time zone is found for a `now` read here, which is then sent: as
        // for one limit, the stack decides by the time its ends were found for.
        let now_ms = match &self.clock {
            Some(clock) => Some(clock.now_ms()),
            None => parts
                .iter()
                .any(|part| zoned(part).is_some())
                .then(|| SystemClock.now_ms()),
        };
        let mut outcomes: Outcomes = (0..parts.len()).map(|_| None).collect();
        let groups = slot_groups(parts, self.link.is_cluster());
        // A group on a master whose breaker is open would fail the stack: it fails before any
        // group counts, rather than after the groups before it counted for nothing.
        #[cfg(feature = "cluster")]
        if let Some(open_for) = groups
            .iter()
            .find_map(|group| self.breakers.refusing(parts[group[0]].key()))
        {
            return Err(Error::CircuitOpen(open_for));
        }
        for group in groups {
            let keys: Vec<String> = group.iter().map(|&i| parts[i].key().to_owned()).collect();
            let mut args = Vec::with_capacity(1 + group.len() * 6);
            args.push(now_ms.map_or(Opt::Str(""), Opt::Int));
            for &i in &group {
                let part = &parts[i];
                args.push(Opt::Str(part.program.builtin_only()?.name()));
                args.push(Opt::Str(if part.soft { "1" } else { "0" }));
                args.push(Opt::Int(i64::from(part.cost)));
                args.push(Opt::Int(i64::try_from(part.opts.len()).unwrap_or(i64::MAX)));
                args.extend(part.opts.iter().cloned());
                args.push(match (zoned(part), now_ms) {
                    (Some(name), Some(now_ms)) => Opt::Int(
                        algorithm::zone_end(part.opts, name, now_ms).map_err(Error::Input)?,
                    ),
                    _ => Opt::Str(""),
                });
            }
            let lua = stack::script();
            let command = Command::Script {
                limiter: "stack",
                evalsha: evalsha(lua, &keys, &args, &[]),
                lua,
                keys: &keys,
                args: [&args, &[]],
            };
            let left = self.timeout.saturating_sub(started.elapsed());
            let records: Vec<_> =
                packed_records(self.send_within(&command, left).await?)?.collect();
            let mut denied = false;
            for (&i, record) in group.iter().zip(&records) {
                let outcome = parse_record(record, &parts[i].program.headers)?;
                denied |= !outcome.is_allowed() && !parts[i].soft;
                outcomes[i] = Some(Answer::Outcome(outcome));
            }
            answered_in_full(group.len(), records.len(), denied)?;
            if denied {
                break;
            }
        }
        Ok(outcomes)
    }

    /// Deletes `key`, on the same terms as [`eval`](Self::eval).
    pub(crate) async fn delete(&self, key: &str) -> Result<(), Error> {
        self.send(&Command::Keyed(del(key), key)).await.map(drop)
    }

    /// Deletes every key the library wrote under `prefix`, in batches found by `SCAN` (each
    /// command on the same terms as [`eval`](Self::eval)); returns how many it deleted.
    ///
    /// On Redis Cluster, every primary is scanned, each with its own cursor; the cluster
    /// client splits an `UNLINK` of keys of several slots into one per node.
    pub(crate) async fn delete_prefix(&self, prefix: &str) -> Result<u64, Error> {
        let mut pattern = head_pattern(prefix, &"[0-9a-f]".repeat(4));
        pattern.push('*');
        self.delete_matching(&pattern, &|_| true).await
    }

    /// Deletes `client`'s keys under every options and scope of its limiter; returns how many
    /// there were.
    pub(crate) async fn delete_client(&self, client: ClientKeys<'_>) -> Result<u64, Error> {
        let tag: String = client.tag.map(char::from).into_iter().collect();
        let mut pattern = head_pattern(client.prefix, &tag);
        pattern.push_str(&escaped(client.limiter));
        pattern.push_str(":*");
        let head = head_len(client.prefix);
        let (limiter, part) = (client.limiter.as_bytes(), client.part.as_bytes());
        // What `SCAN` matched, read by its parts: a client part that only ends like this one,
        // or a limiter that only starts like this one, is another's.
        let keep = |key: &[u8]| {
            let (route, held) = split(key.get(head..).unwrap_or_default());
            held == part
                && route
                    .strip_prefix(limiter)
                    .is_some_and(|rest| rest.first() == Some(&b':'))
        };
        self.delete_matching(&pattern, &keep).await
    }

    /// Deletes the keys `pattern` matches (a `SCAN` pattern) that `keep` keeps; returns how
    /// many there were.
    async fn delete_matching(
        &self,
        pattern: &str,
        keep: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<u64, Error> {
        #[cfg(feature = "cluster")]
        if self.link.is_cluster() {
            return self.delete_matching_on_cluster(pattern, keep).await;
        }
        let first = self.send(&Command::Plain(scan(0, pattern))).await?;
        self.unlink_scanned(first, keep, |cursor| Command::Plain(scan(cursor, pattern)))
            .await
    }

    /// [`delete_matching`](Self::delete_matching) on Redis Cluster: a first `SCAN` on every
    /// primary tells them apart by address, then each is scanned to its end.
    #[cfg(feature = "cluster")]
    async fn delete_matching_on_cluster(
        &self,
        pattern: &str,
        keep: &(dyn Fn(&[u8]) -> bool + Sync),
    ) -> Result<u64, Error> {
        use deadpool_redis::redis::cluster_routing::{
            MultipleNodeRoutingInfo, RoutingInfo, SingleNodeRoutingInfo,
        };

        let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        let reply = self.send(&Command::Routed(scan(0, pattern), all)).await?;
        // One reply per primary, under its address.
        let firsts: Vec<(String, Value)> =
            deadpool_redis::redis::from_redis_value(reply).map_err(RedisError::from)?;
        let mut deleted = 0_u64;
        for (address, first) in firsts {
            let (host, port) = address
                .rsplit_once(':')
                .and_then(|(host, port)| Some((host.to_owned(), port.parse::<u16>().ok()?)))
                .ok_or_else(|| {
                    RedisError::from((
                        ErrorKind::Parse,
                        "a cluster node's address without a port",
                        address.clone(),
                    ))
                })?;
            let node = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
            deleted += self
                .unlink_scanned(first, keep, |cursor| {
                    Command::Routed(scan(cursor, pattern), node.clone())
                })
                .await?;
        }
        Ok(deleted)
    }

    /// Unlinks the keys `keep` keeps of `reply`, a `SCAN` step, and of the steps `step` sends
    /// from its cursor on, until the cursor is back at 0; how many keys there were.
    async fn unlink_scanned(
        &self,
        mut reply: Value,
        keep: &(dyn Fn(&[u8]) -> bool + Sync),
        step: impl Fn(u64) -> Command<'static>,
    ) -> Result<u64, Error> {
        let mut deleted = 0_u64;
        loop {
            let (next, mut keys): (u64, Vec<Vec<u8>>) =
                deadpool_redis::redis::from_redis_value(reply).map_err(RedisError::from)?;
            keys.retain(|key| keep(key));
            deleted += self.unlink(&keys).await?;
            if next == 0 {
                return Ok(deleted);
            }
            reply = self.send(&step(next)).await?;
        }
    }

    /// Unlinks `keys`; how many there were.
    async fn unlink(&self, keys: &[Vec<u8>]) -> Result<u64, Error> {
        if keys.is_empty() {
            return Ok(0);
        }
        let mut unlink = deadpool_redis::redis::cmd("UNLINK");
        unlink.arg(keys);
        let reply = self.send(&Command::Plain(unlink)).await?;
        Ok(deadpool_redis::redis::from_redis_value::<u64>(reply).map_err(RedisError::from)?)
    }

    /// What is known of the server's `maxmemory-policy`.
    pub(crate) fn eviction(&self) -> EvictionPolicy {
        self.link.eviction().policy()
    }

    /// The most a call may take, connection included.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends one command through the breaker, within the timeout, on the shared connection.
    async fn send(&self, command: &Command<'_>) -> Result<Value, Error> {
        self.send_within(command, self.timeout).await
    }

    /// [`send`](Self::send), within what is left of a timeout started earlier (a stack's
    /// calls on Redis Cluster share one).
    async fn send_within(&self, command: &Command<'_>, left: Duration) -> Result<Value, Error> {
        if left.is_zero() {
            return Err(Error::Timeout(self.timeout));
        }
        let breaker = self.breakers.of(command);
        let admit = breaker.admit();
        if admit == Admit::Reject {
            return Err(Error::CircuitOpen(breaker.open_for()));
        }
        // Settles a probe that is dropped before it ends (its request went away).
        let mut probe = ProbeGuard {
            breaker: &breaker,
            admit,
            settled: false,
        };
        // Which connection the call used, and how many replies had arrived before it: a call
        // that times out on a connection that answered nothing since is not kept waiting on it.
        let used = AtomicU64::new(u64::MAX);
        let replies = self.link.replies();
        let call = async {
            let mut current = self.link.get().await?;
            used.store(current.generation, Ordering::Relaxed);
            self.breakers.using(&current, self.timeout);
            let reply = match refused_at_once(command.run(&mut current.conn)).await {
                Sent(reply) => reply,
                // The connection is known dead and took nothing: a fresh one may carry it.
                Refused => {
                    self.link.forget(&current);
                    current = self.link.get().await?;
                    used.store(current.generation, Ordering::Relaxed);
                    command.run(&mut current.conn).await
                }
            };
            match &reply {
                Ok(_) => self.link.replied(),
                Err(err) if is_broken_connection(err) => self.link.failed(&current),
                Err(_) => {}
            }
            Ok::<_, Error>(reply?)
        };
        let result = tokio::time::timeout(left, call).await.unwrap_or_else(|_| {
            self.link
                .forget_if_silent(used.load(Ordering::Relaxed), replies);
            Err(Error::Timeout(self.timeout))
        });
        probe.settled = true;
        match &result {
            Err(error) if is_outage(error) => {
                let opened = breaker.failed(admit, Instant::now());
                self.breakers.failed(opened, &self.link, self.timeout);
            }
            // Redis answered, if only with a script error: it is up.
            _ => {
                if breaker.succeeded(admit) {
                    self.breakers.closed(&self.link, self.timeout);
                }
            }
        }
        result
    }
}

/// Whether a command was handed to the connection.
enum Handed {
    /// It was (or may have been): its reply, whatever it is, is final.
    Sent(Result<Value, RedisError>),
    /// The connection refused it on the spot: it is known dead, and the command never left.
    Refused,
}

use Handed::{Refused, Sent};

/// Polls a command once before waiting on it. A multiplexed connection hands commands to its
/// driver task through a channel; when that task has ended (the server closed the
/// connection), the command fails on its first poll, before anything is written: the one
/// failure that reached nothing (short of a write failing within the same microseconds), and
/// so the one that may be sent again.
async fn refused_at_once(command: impl Future<Output = Result<Value, RedisError>>) -> Handed {
    let mut command = pin!(command);
    let first = poll_fn(|cx| Poll::Ready(command.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(Err(err)) if is_broken_connection(&err) => Refused,
        Poll::Ready(reply) => Sent(reply),
        Poll::Pending => Sent(command.await),
    }
}

/// Lets another check probe when a probe's request is dropped mid-call.
struct ProbeGuard<'a> {
    breaker: &'a Breaker,
    admit: Admit,
    settled: bool,
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker.abandoned(self.admit);
        }
    }
}

/// An error that says the connection cannot carry another command.
fn is_broken_connection(err: &RedisError) -> bool {
    (err.is_connection_dropped() || err.is_io_error() || err.is_connection_refusal())
        && !err.is_timeout()
}

/// A failure of Redis itself (unreachable, too slow, overloaded), as opposed to a script's
/// error or a reply out of contract: what the circuit breaker counts.
fn is_outage(error: &Error) -> bool {
    match error {
        Error::Pool(_) | Error::Timeout(_) | Error::CircuitOpen(_) => true,
        Error::Redis(err) => {
            err.is_io_error()
                || err.is_connection_dropped()
                || err.is_connection_refusal()
                || err.is_timeout()
                || matches!(
                    err.kind(),
                    ErrorKind::Server(
                        ServerErrorKind::BusyLoading
                            | ServerErrorKind::TryAgain
                            | ServerErrorKind::ClusterDown
                            | ServerErrorKind::MasterDown
                    )
                )
                || err.code() == Some("BUSY")
        }
        _ => false,
    }
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, status) = self.link.status();
        f.debug_struct("RedisBackend")
            .field("kind", &kind)
            .field("pool", &status)
            .field("timeout", &self.timeout)
            .field("connected", &self.link.is_connected())
            .finish_non_exhaustive()
    }
}

/// The parts of a stack that one call can decide together: all of them on a single Redis; on
/// Redis Cluster, those whose keys hash to one slot, in the order of their first part.
#[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
fn slot_groups(parts: &[StackPart<'_>], cluster: bool) -> Vec<Vec<usize>> {
    #[cfg(feature = "cluster")]
    if cluster {
        let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let slot = masters::slot(part.key());
            match groups.iter_mut().find(|(of, _)| *of == slot) {
                Some((_, group)) => group.push(i),
                None => groups.push((slot, vec![i])),
            }
        }
        return groups.into_iter().map(|(_, group)| group).collect();
    }
    vec![(0..parts.len()).collect()]
}

/// One `SCAN` step from `cursor` over the keys `pattern` matches.
fn scan(cursor: u64, pattern: &str) -> deadpool_redis::redis::Cmd {
    let mut scan = deadpool_redis::redis::cmd("SCAN");
    scan.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(1000);
    scan
}

/// The `SCAN` pattern of a key's head, `{prefix}:{TAG}:`, the prefix literal and `tag` a
/// pattern of the tag's four hex digits.
fn head_pattern(prefix: &str, tag: &str) -> String {
    let mut pattern = escaped(prefix);
    pattern.push_str(":\\{");
    pattern.push_str(tag);
    pattern.push_str("\\}:");
    pattern
}

/// `text` as a `SCAN` pattern matches it literally. The library's keys under a prefix are
/// `{prefix}:{TAG}:...` (see `engine/keys.rs`): a pattern of the prefix then the hash tag never
/// matches the keys of another prefix that extends it (`app` and `app:v2`).
fn escaped(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 40);
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern
}

/// The time zone of a calendar quota in one, whose period's end the caller finds.
fn zone_of<'a>(program: &Program, opts: &'a [Opt]) -> Option<&'a str> {
    match program.algorithm {
        Some(Builtin::CalendarQuota) => algorithm::zone_name(opts),
        _ => None,
    }
}

/// The script's `cost` argument: `n`, `-n`, `+n` or `~n`. A take is sent as an integer, as before:
/// the hot path formats no text of its own.
fn cost_arg(cost: Charge) -> Opt {
    match cost {
        Charge::Take(n) => Opt::Int(i64::from(n)),
        Charge::Refund(n) => Opt::Text(format!("-{n}").into()),
        Charge::Force(n) => Opt::Text(format!("+{n}").into()),
        Charge::UpTo(n) => Opt::Text(format!("~{n}").into()),
    }
}

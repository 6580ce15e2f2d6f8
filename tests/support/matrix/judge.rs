//! The invariants the failures guide states, checked against every answer of a run and what
//! the store holds once it is over.

use std::time::Duration;

use plug_limit::FailurePolicy;

use super::deployment::{BATCH, CLIENT, ESTIMATE, USED};
use super::plan::{
    FAILURES, Incident, Mode, OPEN_FOR, Plan, SCHEDULING, TIMEOUT, Topology, recovery_bound,
};
use crate::Sent;

/// What a run saw, beyond its plan.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Every request sent, with its answer.
    pub sent: Vec<Sent>,
    /// When the incident began, from the start of the load.
    pub began: Duration,
    /// When it ended: the store known to serve again.
    pub ended: Duration,
    /// What the store held of each limit for the shared client once the run was over.
    pub held: Option<Vec<u64>>,
    /// The same for each request sent as a client of its own, in the order sent.
    pub own_keys: Vec<Option<Vec<u64>>>,
    /// The most requests inside a handler at once.
    pub most_at_once: usize,
    /// Keys of the shared client's the server evicted during the run.
    pub evicted: u64,
}

/// A run's verdict.
#[derive(Debug, Clone)]
pub struct Report {
    /// The run.
    pub plan: Plan,
    /// Each invariant broken, in words.
    pub violations: Vec<String>,
    /// Admissions (units) past the limit itself; within the allowance the guide states for
    /// the incident when there is no violation.
    pub past_limit: u64,
    /// The slowest answer, from its due time.
    pub worst_latency: Duration,
    /// From the incident's end to the last request answered by the failure policy; `None`
    /// where answers do not show it (`Memory` decides with headers).
    pub recovery: Option<Duration>,
    /// Requests sent.
    pub requests: usize,
}

/// How far apart the load's clock and the incident's may start: each is read as its task
/// first runs, microseconds apart.
const CLOCKS_APART: Duration = Duration::from_millis(1);

/// Whether the incident makes the store fail calls (not merely slow, or answering alike).
#[must_use]
pub fn fails_calls(incident: Incident) -> bool {
    match incident {
        Incident::Nothing | Incident::ScriptFlush | Incident::Eviction => false,
        // A new connection's three round trips (its handshake, then a script not cached yet:
        // `NOSCRIPT`, then `EVAL`) plus Redis's own time under the timeout: answered in time.
        Incident::Latency(delay) => delay * 6 + Duration::from_millis(15) >= TIMEOUT,
        _ => true,
    }
}

/// Whether the incident loses what the store counted: a fresh budget once.
fn loses_counts(incident: Incident) -> bool {
    matches!(
        incident,
        Incident::KillRestart
            | Incident::ReadOnly
            | Incident::ClusterMasterKilled
            | Incident::ReplicaPromoted
            | Incident::SentinelFailover
    )
}

/// Whether the store decided every admission of `plan` and kept what it counted: no count
/// lost or evicted, and no policy deciding in this process while calls fail.
fn store_kept(plan: &Plan, fails: bool) -> bool {
    !loses_counts(plan.incident)
        && plan.incident != Incident::Eviction
        && !(fails
            && matches!(
                plan.policy,
                FailurePolicy::Memory | FailurePolicy::LocalShare
            ))
}

/// The bound every answer of `plan` is within: the timeout (a waiting request's wait and
/// its last check on top; a `concurrency` request's time in its handler), plus scheduling.
#[must_use]
pub fn latency_bound(plan: &Plan) -> Duration {
    let mut bound = TIMEOUT + SCHEDULING;
    match plan.mode {
        Mode::Waiting => bound += plan.wait + TIMEOUT,
        Mode::Builtin("concurrency") => bound += Duration::from_millis(30),
        _ => {}
    }
    bound
}

/// Checks `seen` against the invariants of `plan`.
#[must_use]
pub fn judge(plan: &Plan, seen: &Observed) -> Report {
    let mut violations = Vec::new();
    let fails = fails_calls(plan.incident);
    let limit = u64::from(plan.limit);

    let mut admitted = 0_u64;
    let mut undecided = 0_u64;
    let mut last_undecided: Option<Duration> = None;
    for sent in &seen.sent {
        let answered = sent.at + sent.latency;
        let shared = sent.client == CLIENT;
        let local_share = plan.policy == FailurePolicy::LocalShare;
        match (sent.status.as_u16(), sent.limited) {
            (200, true) if shared => admitted += 1,
            (200 | 429, true) => {}
            // A batched key's request its instance could not serve in time, before the key's
            // first grant there: the limit's denial, with no numbers yet to give.
            (429, false) if plan.mode == Mode::Batches && !local_share => {}
            // `LocalShare` denies what its share does not cover with a bare 429.
            (200 | 503 | 429, false) if sent.status != 429 || local_share => {
                undecided += u64::from(shared);
                // Nothing passed or refused by the policy while the store answers in time.
                if !fails {
                    violations.push(format!(
                        "answered by the failure policy ({}, instance {}, in {:?}) at {:?}, the \
                         store answering",
                        sent.status, sent.instance, sent.latency, sent.at
                    ));
                } else if answered + CLOCKS_APART < seen.began {
                    violations.push(format!(
                        "answered by the failure policy ({}) at {answered:?}, before the \
                         incident began at {:?}",
                        sent.status, seen.began
                    ));
                } else if sent.at > seen.ended + recovery_bound(plan.incident) {
                    violations.push(format!(
                        "answered by the failure policy ({}, instance {}, in {:?}) at {:?}, \
                         {:?} after the incident ended (recovery bound {:?})",
                        sent.status,
                        sent.instance,
                        sent.latency,
                        sent.at,
                        sent.at - seen.ended,
                        recovery_bound(plan.incident)
                    ));
                }
                last_undecided = Some(last_undecided.map_or(sent.at, |last| last.max(sent.at)));
            }
            (status, limited) => violations.push(format!(
                "an answer out of contract: {status}, rate-limit headers {limited}"
            )),
        }
    }

    // Never admitted past the limit, but for the slack the guide states.
    let refill = match plan.mode {
        Mode::Waiting => {
            let run = plan.load_for + plan.wait + TIMEOUT * 2;
            (limit * run.as_millis() as u64).div_ceil(1_000) + 1
        }
        Mode::Builtin("token_bucket" | "gcra" | "leaky_bucket") => 1,
        _ => 0,
    };
    let mut slack = 0;
    if loses_counts(plan.incident) {
        slack += limit;
    }
    if plan.incident == Incident::Eviction {
        // Each eviction of the shared client's own keys forgets what they counted.
        slack += limit * seen.evicted;
    }
    if fails {
        match plan.policy {
            FailurePolicy::Memory => slack += limit * plan.instances as u64,
            FailurePolicy::LocalShare => slack += limit,
            _ => {}
        }
    }
    let concurrency = plan.mode == Mode::Builtin("concurrency");
    let measured = if concurrency {
        seen.most_at_once as u64
    } else {
        admitted
    };
    let past_limit = measured.saturating_sub(limit + refill);
    if measured > limit + refill + slack {
        violations.push(format!(
            "{measured} admitted{}, past the limit {limit} + refill {refill} + the incident's \
             slack {slack}",
            if concurrency { " at once" } else { "" }
        ));
    }

    // Counted once or not at all, and nothing left held.
    match &seen.held {
        None => violations.push("the store could not be read once the incident was over".into()),
        Some(held) => counted(plan, held, admitted, undecided, fails, &mut violations),
    }
    let own = seen.sent.iter().filter(|sent| sent.client != CLIENT);
    for (sent, held) in own.zip(&seen.own_keys) {
        match held {
            None => violations.push(format!("the key of {} could not be read", sent.client)),
            Some(held) => counted_once(plan, sent, held, fails, &mut violations),
        }
        // A fresh key's one request is admitted whenever the store answers: a limiter that
        // denied everything would break no other invariant.
        let answered = sent.at + sent.latency;
        let store_answers = !fails
            || answered + CLOCKS_APART < seen.began
            || sent.at > seen.ended + recovery_bound(plan.incident);
        if store_answers && !(sent.status == 200 && sent.limited) {
            violations.push(format!(
                "{}'s one request, a fresh key, answered {} (headers {}) at {:?}, the store \
                 answering",
                sent.client, sent.status, sent.limited, sent.at
            ));
        }
    }

    // No answer later than the timeout (a wait's bound on top).
    let worst_latency = seen
        .sent
        .iter()
        .map(|sent| sent.latency)
        .max()
        .unwrap_or_default();
    if worst_latency > latency_bound(plan) {
        violations.push(format!(
            "an answer {worst_latency:?} after its due time, past the bound {:?}",
            latency_bound(plan)
        ));
    }

    let recovery = (plan.policy != FailurePolicy::Memory)
        .then(|| last_undecided.map_or(Duration::ZERO, |last| last.saturating_sub(seen.ended)));
    Report {
        plan: plan.clone(),
        violations,
        past_limit,
        worst_latency,
        recovery,
        requests: seen.sent.len(),
    }
}

/// The store's counts against the answers: at most what the answers account for (admitted
/// units, plus what each request the policy answered may have counted), at least what was
/// admitted by the store, and nothing held once a `concurrency` run is over.
fn counted(
    plan: &Plan,
    held: &[u64],
    admitted: u64,
    undecided: u64,
    fails: bool,
    violations: &mut Vec<String>,
) {
    match plan.mode {
        // A refilling limit's count is its own schedule's; its admissions are bounded above.
        Mode::Waiting => return,
        Mode::Builtin("concurrency") => {
            if held.iter().any(|&units| units != 0) {
                violations.push(format!(
                    "units still held once every request ended and leases expired: {held:?}"
                ));
            }
            return;
        }
        _ => {}
    }
    let (per_admitted, per_undecided) = match plan.mode {
        // Admitted on the estimate, settled to what was used; a settle that failed leaves
        // the estimate charged.
        Mode::Settle => (u64::from(ESTIMATE), u64::from(ESTIMATE)),
        _ => (1, 1),
    };
    let mut most = admitted * per_admitted + undecided * per_undecided;
    if plan.mode == Mode::Batches && fails {
        // A reservation whose reply was lost keeps its units counted, never handed out: a
        // batch for each failed call, which the breaker bounds per instance (its failures in
        // a row, then a probe an interval; one more either side of the incident).
        let probes = (plan.incident_for.as_millis() / OPEN_FOR.as_millis()) as u64 + 2;
        let failed_calls = u64::from(FAILURES) + probes;
        most += u64::from(BATCH) * plan.instances as u64 * failed_calls;
    }
    let most = with_cluster_resends(plan, most);
    let least = match plan.mode {
        Mode::Settle => admitted * u64::from(USED),
        _ => admitted,
    };
    let store_decides_all = store_kept(plan, fails);
    for (index, &units) in held.iter().enumerate() {
        if units > most {
            violations.push(format!(
                "limit {index}: the store holds {units} units; the answers account for {most} \
                 at most ({admitted} admitted, {undecided} answered by the policy): counted twice"
            ));
        }
        if units < least && store_decides_all {
            violations.push(format!(
                "limit {index}: the store holds {units} units; {least} were admitted: an \
                 admission not counted"
            ));
        }
        // With every call answered in time, exactly what was admitted.
        if !fails && store_decides_all && units != least {
            violations.push(format!(
                "limit {index}: the store holds {units} units for {admitted} admitted, every \
                 call answered in time"
            ));
        }
    }
}

/// The most units `most` stands for once a cluster client's own resends are counted: on a
/// cluster the client resends by itself after a connection error, so each request may count
/// twice, never more.
fn with_cluster_resends(plan: &Plan, most: u64) -> u64 {
    if plan.topology() == Topology::Cluster {
        most * 2
    } else {
        most
    }
}

/// One request sent as a client of its own: its key holds what that one request was
/// charged, once or not at all (a settled request: what it used, or its estimate when the
/// settle failed; a batched one: what its batch kept when a give-back failed); an admitted
/// request's at least once, where the store decided it and kept its counts; a `concurrency`
/// unit nothing once the request ended.
fn counted_once(plan: &Plan, sent: &Sent, held: &[u64], fails: bool, violations: &mut Vec<String>) {
    if plan.mode == Mode::Waiting {
        // Its count drains within the second: what it held then is gone.
        return;
    }
    let admitted = sent.status.as_u16() == 200 && sent.limited;
    let (most, least) = match plan.mode {
        Mode::Builtin("concurrency") => (0, 0),
        Mode::Settle if fails => (u64::from(ESTIMATE), u64::from(USED)),
        Mode::Settle => (u64::from(USED), u64::from(USED)),
        Mode::Batches if fails => (u64::from(BATCH), 1),
        _ => (1, 1),
    };
    let most = with_cluster_resends(plan, most);
    let kept = store_kept(plan, fails);
    for (index, &units) in held.iter().enumerate() {
        if units > most {
            violations.push(format!(
                "limit {index}: {}'s one request ({}, headers {}) holds {units} units, {most} \
                 at most: counted twice",
                sent.client, sent.status, sent.limited
            ));
        }
        if admitted && kept && units < least {
            violations.push(format!(
                "limit {index}: {}'s one request, admitted, holds {units} units: not counted",
                sent.client
            ));
        }
        if !admitted && sent.limited && units != 0 && plan.mode != Mode::Builtin("concurrency") {
            violations.push(format!(
                "limit {index}: {}'s one request, denied, holds {units} units",
                sent.client
            ));
        }
    }
}

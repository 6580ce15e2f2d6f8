//! The shared scenarios run against every native twin, and the catalogue's own checks.

use super::*;

/// Evaluates the built-in named `limiter` (the twins' tests name them as the scripts do).
pub(super) fn evaluate(
    limiter: &str,
    opts: &[Opt],
    cost: u32,
    now_ms: i64,
    slot: &mut Option<Stored>,
) -> Result<Reply, String> {
    settle(limiter, opts, Charge::Take(cost), now_ms, slot)
}

/// [`evaluate`] with any charge: a take, a refund or a forced charge.
pub(super) fn settle(
    limiter: &str,
    opts: &[Opt],
    charge: Charge,
    now_ms: i64,
    slot: &mut Option<Stored>,
) -> Result<Reply, String> {
    let Some(algorithm) = Builtin::from_name(limiter) else {
        return Err(format!("{limiter}: not a built-in limiter"));
    };
    let read_ahead = ReadAhead::of(Some(algorithm), opts);
    let mut ahead_slot = slot.clone();
    let reply = algorithm.evaluate(opts, charge, now_ms, slot);
    if read_ahead.is_some() {
        // A limit that read its options when it was made decides as one read on each check.
        let ahead = algorithm.evaluate_leased(
            opts,
            read_ahead.as_ref(),
            charge,
            None,
            now_ms,
            &mut ahead_slot,
        );
        assert_eq!(
            format!("{ahead:?}"),
            format!("{reply:?}"),
            "{limiter} {opts:?}"
        );
        assert_eq!(
            format!("{ahead_slot:?}"),
            format!("{slot:?}"),
            "{limiter} {opts:?}"
        );
    }
    reply.map_err(String::from)
}

/// Options read ahead for one built-in are never read for another: the twin of the limiter
/// a check runs reads its own.
#[test]
fn options_read_ahead_for_another_built_in_are_not_read() {
    let opts = [Opt::Int(2), Opt::Int(60)];
    let other = ReadAhead::of(
        Some(Builtin::TokenBucket),
        &[Opt::Int(9), Opt::Int(1), Opt::Int(9)],
    );
    assert!(other.is_some());
    let mut slot = None;
    let mut allowed = Vec::new();
    for _ in 0..3 {
        let reply = Builtin::FixedWindow
            .evaluate_leased(
                &opts,
                other.as_ref(),
                Charge::Take(1),
                None,
                1_000,
                &mut slot,
            )
            .expect("a valid check");
        allowed.push(reply.allow);
    }
    // fixed_window's own limit of 2, not token_bucket's 9.
    assert_eq!(allowed, [true, true, false]);
}

/// A scenario's charge as the crate's own.
fn charge(cost: scenarios::Charge) -> Charge {
    match cost {
        scenarios::Charge::Take(n) => Charge::Take(n),
        scenarios::Charge::Refund(n) => Charge::Refund(n),
        scenarios::Charge::Force(n) => Charge::Force(n),
        scenarios::Charge::UpTo(n) => Charge::UpTo(n),
    }
}

/// An ARGV string as the opt that sends it.
fn opt(s: &'static str) -> Opt {
    match s.parse::<i64>() {
        Ok(n) if n.to_string() == s => Opt::Int(n),
        _ => Opt::Str(s),
    }
}

/// Runs `limiter`'s shared scenarios and refusals (`algorithm/scenarios.rs`, which
/// `tests/standalone/scripts.rs` runs against Redis) and checks every answer.
pub(super) fn run_scenarios(limiter: &str) {
    let start = scenarios::start(1_799_999_000_000);
    let answer = |opts: &[Opt], cost, now, slot: &mut Option<Stored>| {
        if slot.as_ref().is_some_and(|s| s.expires_at_ms <= now) {
            *slot = None;
        }
        match settle(limiter, opts, charge(cost), now, slot) {
            Ok(v) => scenarios::render(
                v.allow,
                &v.headers.texts(),
                v.granted,
                (limiter == "multi_window").then_some(i64::from(v.window)),
            ),
            Err(e) => format!("error {e}"),
        }
    };
    let mut ran = 0;
    for scenario in scenarios::SCENARIOS.iter().filter(|s| s.limiter == limiter) {
        let opts: Vec<Opt> = scenario.opts.iter().map(|s| opt(s)).collect();
        let mut slot = None;
        for (i, call) in scenario.calls.iter().enumerate() {
            let got = answer(&opts, call.cost, start + call.at_ms, &mut slot);
            assert_eq!(got, call.expect, "{} call {i}", scenario.name);
            ran += 1;
        }
    }
    let anchored = scenarios::ANCHORED
        .iter()
        .filter(|(_, s)| s.limiter == limiter);
    for (start, scenario) in anchored {
        let opts: Vec<Opt> = scenario.opts.iter().map(|s| opt(s)).collect();
        let mut slot = None;
        for (i, call) in scenario.calls.iter().enumerate() {
            let got = answer(&opts, call.cost, start + call.at_ms, &mut slot);
            assert_eq!(got, call.expect, "{} call {i}", scenario.name);
            ran += 1;
        }
    }
    for line in scenarios::REFUSED {
        let (name, opts, expect) = scenarios::refused(line);
        if name == limiter {
            let opts: Vec<Opt> = opts.into_iter().map(opt).collect();
            assert_eq!(
                answer(&opts, scenarios::Charge::Take(1), start, &mut None),
                expect,
                "{line}"
            );
            ran += 1;
        }
    }
    assert!(ran > 0, "no scenario for {limiter}");
}

#[test]
fn the_catalogue_is_in_declaration_order_and_names_round_trip() {
    let names: Vec<_> = Builtin::ALL.into_iter().map(Builtin::name).collect();
    assert_eq!(
        names,
        [
            "fixed_window",
            "token_bucket",
            "sliding_window",
            "sliding_log",
            "leaky_bucket",
            "gcra",
            "multi_window",
            "calendar_quota",
            "concurrency"
        ]
    );
    for (index, algorithm) in Builtin::ALL.into_iter().enumerate() {
        assert_eq!(algorithm as usize, index);
        assert_eq!(Builtin::from_name(algorithm.name()), Some(algorithm));
    }
    assert_eq!(Builtin::from_name("leaky"), None);
    assert_eq!(Builtin::FixedWindow.headers().len(), 3);
    assert_eq!(Builtin::Gcra.headers()[3], "retry-after");
}

#[test]
fn every_built_in_but_multi_window_has_a_fixed_arity() {
    assert_eq!(
        Builtin::TokenBucket.check_arity(2).map_err(String::from),
        Err("token_bucket: takes 3 options, found 2".to_owned())
    );
    assert_eq!(Builtin::SlidingLog.check_arity(2), Ok(()));
    assert_eq!(Builtin::MultiWindow.check_arity(0), Ok(()));
    let fixed: Vec<_> = Builtin::ALL
        .into_iter()
        .filter(|a| a.check_arity(0).is_ok())
        .collect();
    assert_eq!(fixed, [Builtin::MultiWindow]);
    let mut slot = None;
    assert_eq!(
        evaluate("leaky", &[], 1, 0, &mut slot),
        Err("leaky: not a built-in limiter".to_owned())
    );
}

#[test]
fn cost_and_now_are_checked_after_the_opts() {
    let mut slot = None;
    let opts = [Opt::Int(3), Opt::Int(60)];
    let too_late = evaluate("sliding_log", &opts, 1, 9_007_199_254_741, &mut slot);
    assert_eq!(
        too_late.unwrap_err(),
        "sliding_log: now must be <= 9007199254740, got '9007199254741'"
    );
    let negative = evaluate("sliding_window", &opts, 1, -1, &mut slot);
    assert_eq!(
        negative.unwrap_err(),
        "sliding_window: now must be a non-negative integer, got '-1'"
    );
    let costly = evaluate(
        "gcra",
        &[Opt::Int(3), Opt::Int(60), Opt::Int(3)],
        u32::MAX,
        0,
        &mut slot,
    );
    assert_eq!(
        costly.unwrap_err(),
        "gcra: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '4294967295'"
    );
    // Too few opts: the cost is read as the window, as the script reads its ARGV.
    let short = evaluate("leaky_bucket", &[Opt::Int(3)], 0, 0, &mut slot);
    assert_eq!(
        short.unwrap_err(),
        "leaky_bucket: window must be a positive integer, got '0'"
    );
    assert_eq!(slot, None);
}

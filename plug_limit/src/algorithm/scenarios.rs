//! Call sequences for every built-in limiter and the exact replies they must get: one table that
//! `tests/standalone/scripts.rs` runs against the Lua scripts on a real Redis, and the unit tests of
//! `plug_limit/src/algorithm` (which include this file) run against the Rust mirror, so both
//! are held to the same answers.
//!
//! Times are offsets from [`start`], a whole hour: sliding_window's windows are aligned on the
//! epoch, and every window here divides an hour, so the answers do not depend on which hour.

/// Where a sequence starts: the first whole hour at or after `now_ms`, so that simulated time
/// never runs behind the real time.
pub(crate) fn start(now_ms: i64) -> i64 {
    const HOUR: i64 = 3_600_000;
    (now_ms + HOUR - 1) / HOUR * HOUR
}

/// A limiter, its opts, and calls made one after the other on one key.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    pub(crate) limiter: &'static str,
    pub(crate) opts: &'static [&'static str],
    pub(crate) calls: &'static [Call],
}

/// One call: `at_ms` after the start, with `cost`, and its reply as [`render`] writes it, or
/// `"error <message without ERR>"`.
pub(crate) struct Call {
    pub(crate) at_ms: i64,
    pub(crate) cost: Charge,
    pub(crate) expect: &'static str,
}

/// A call's cost argument: the crate's `Charge`, which `tests/standalone/scripts.rs` (another
/// crate, which includes this file) cannot name.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Charge {
    /// `"n"`: takes n (0 peeks).
    Take(u32),
    /// `"-n"`: gives back up to n.
    Refund(u32),
    /// `"+n"`: takes n whatever the limit.
    Force(u32),
    /// `"~n"`: takes up to n, as many as the key has left (fixed_window, token_bucket).
    UpTo(u32),
}

impl Charge {
    /// The ARGV text.
    // Read by `tests/standalone/scripts.rs`, which sends the scenarios to Redis; the twins'
    // tests take the cost as it is.
    #[allow(dead_code)]
    pub(crate) fn arg(self) -> String {
        match self {
            Self::Take(n) => n.to_string(),
            Self::Refund(n) => format!("-{n}"),
            Self::Force(n) => format!("+{n}"),
            Self::UpTo(n) => format!("~{n}"),
        }
    }
}

const fn at(at_ms: i64, cost: u32, expect: &'static str) -> Call {
    Call {
        at_ms,
        cost: Charge::Take(cost),
        expect,
    }
}

/// A refund of `cost` at `at_ms`.
const fn back(at_ms: i64, cost: u32, expect: &'static str) -> Call {
    Call {
        at_ms,
        cost: Charge::Refund(cost),
        expect,
    }
}

/// A forced charge of `cost` at `at_ms`.
const fn force(at_ms: i64, cost: u32, expect: &'static str) -> Call {
    Call {
        at_ms,
        cost: Charge::Force(cost),
        expect,
    }
}

/// A batch of up to `cost` at `at_ms`.
const fn up(at_ms: i64, cost: u32, expect: &'static str) -> Call {
    Call {
        at_ms,
        cost: Charge::UpTo(cost),
        expect,
    }
}

/// A reply as one line: `"allow 3,60,2"`, a batch's `"allow 3,60,0 ~2 60000ms"` (the units
/// it granted and the milliseconds left of their window) and multi_window's
/// `"allow 2,10,1 @0"` (the window that decided), which their replies carry after the
/// headers.
pub(crate) fn render(
    allow: bool,
    headers: &[String],
    granted: Option<(u32, i64)>,
    window: Option<i64>,
) -> String {
    let decision = if allow { "allow" } else { "deny" };
    let mut text = format!("{decision} {}", headers.join(","));
    if let Some((granted, window_ms)) = granted {
        text.push_str(&format!(" ~{granted} {window_ms}ms"));
    }
    if let Some(window) = window {
        text.push_str(&format!(" @{window}"));
    }
    text
}

pub(crate) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "fixed_window grants a batch of what the window has left",
        limiter: "fixed_window",
        opts: &["5", "10"],
        calls: &[
            up(0, 3, "allow 5,10,2 ~3 10000ms"),
            up(1_000, 4, "allow 5,9,0 ~2 9000ms"),
            up(1_000, 1, "deny 5,9,0 ~0 9000ms"),
            at(1_000, 1, "deny 5,9,0"),
            back(2_000, 3, "allow 5,8,3"),
            up(2_000, 2_147_483_647, "allow 5,8,0 ~3 8000ms"),
            up(10_000, 2, "allow 5,10,3 ~2 10000ms"),
            at(10_500, 1, "allow 5,10,2"),
            force(11_000, 9, "deny 5,9,0"),
            up(11_000, 1, "deny 5,9,0 ~0 9000ms"),
            up(20_000, 7, "allow 5,10,0 ~5 10000ms"),
            up(
                20_000,
                0,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '~0'",
            ),
            up(
                20_000,
                2_147_483_648,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '~2147483648'",
            ),
        ],
    },
    Scenario {
        name: "token_bucket grants a batch of whole tokens within the window's remaining",
        limiter: "token_bucket",
        opts: &["5", "2", "3"],
        calls: &[
            up(
                0,
                2,
                "allow 5 5;w=2;burst=3;policy=token_bucket,2,3 ~2 2000ms",
            ),
            up(
                0,
                5,
                "allow 5 5;w=2;burst=3;policy=token_bucket,2,2,1 ~1 2000ms",
            ),
            up(
                500,
                1,
                "deny 5 5;w=2;burst=3;policy=token_bucket,2,2,1 ~0 1500ms",
            ),
            up(
                1_500,
                3,
                "allow 5 5;w=2;burst=3;policy=token_bucket,1,1,1 ~1 500ms",
            ),
            up(
                2_000,
                9,
                "allow 5 5;w=2;burst=3;policy=token_bucket,2,2,1 ~3 2000ms",
            ),
            back(2_000, 2, "allow 5 5;w=2;burst=3;policy=token_bucket,2,4"),
            up(
                2_000,
                1,
                "allow 5 5;w=2;burst=3;policy=token_bucket,2,3 ~1 2000ms",
            ),
            up(
                2_000,
                0,
                "error token_bucket: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '~0'",
            ),
        ],
    },
    Scenario {
        name: "token_bucket without refill grants a batch until the reset",
        limiter: "token_bucket",
        opts: &["2", "60", "2"],
        calls: &[
            up(
                0,
                5,
                "allow 2 2;w=60;burst=2;policy=token_bucket,60,0,60 ~2 60000ms",
            ),
            up(
                30_000,
                1,
                "deny 2 2;w=60;burst=2;policy=token_bucket,30,0,30 ~0 30000ms",
            ),
            at(
                30_000,
                1,
                "deny 2 2;w=60;burst=2;policy=token_bucket,30,0,30",
            ),
        ],
    },
    Scenario {
        name: "a limiter without batches refuses ~n",
        limiter: "sliding_window",
        opts: &["5", "10"],
        calls: &[up(
            0,
            2,
            "error sliding_window: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '~2'",
        )],
    },
    Scenario {
        name: "fixed_window counts down, peeks, undoes a denied cost and restarts",
        limiter: "fixed_window",
        opts: &["3", "60"],
        calls: &[
            at(0, 1, "allow 3,60,2"),
            at(0, 0, "allow 3,60,1"),
            at(1_000, 2, "allow 3,59,0"),
            at(1_000, 0, "deny 3,59,0"),
            at(1_500, 2, "deny 3,59,0"),
            at(2_000, 1, "deny 3,58,0"),
            at(59_499, 0, "deny 3,1,0"),
            at(59_600, 0, "deny 3,0,0"),
            at(60_000, 1, "allow 3,60,2"),
            at(60_000, 5, "deny 3,60,2"),
            at(60_000, 2, "allow 3,60,0"),
        ],
    },
    Scenario {
        name: "fixed_window never writes a cost above the limit",
        limiter: "fixed_window",
        opts: &["2", "10"],
        calls: &[
            at(0, 3, "deny 2,10,2"),
            at(0, 0, "allow 2,10,1"),
            at(0, 2, "allow 2,10,0"),
            at(
                0,
                2_147_483_648,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '2147483648'",
            ),
        ],
    },
    Scenario {
        name: "fixed_window canonicalises leading zeros",
        limiter: "fixed_window",
        opts: &["03", "060"],
        calls: &[at(0, 1, "allow 3,60,2")],
    },
    Scenario {
        name: "token_bucket takes costs, peeks and refills one token a second",
        limiter: "token_bucket",
        opts: &["5", "2", "3"],
        calls: &[
            at(0, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,2,4"),
            at(0, 0, "allow 5 5;w=2;burst=3;policy=token_bucket,2,3"),
            at(0, 2, "allow 5 5;w=2;burst=3;policy=token_bucket,2,2,1"),
            at(0, 1, "deny 5 5;w=2;burst=3;policy=token_bucket,2,2,1"),
            at(500, 2, "deny 5 5;w=2;burst=3;policy=token_bucket,2,2,2"),
            at(1_000, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,1,1,1"),
            at(1_000, 2, "deny 5 5;w=2;burst=3;policy=token_bucket,1,1,1"),
            at(2_000, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,2,4"),
            at(2_000, 4, "deny 5 5;w=2;burst=3;policy=token_bucket,2,4,2"),
        ],
    },
    Scenario {
        name: "token_bucket denies a new window a cost above the burst",
        limiter: "token_bucket",
        opts: &["5", "2", "3"],
        calls: &[
            at(0, 4, "deny 5 5;w=2;burst=3;policy=token_bucket,2,5,1"),
            at(0, 6, "deny 5 5;w=2;burst=3;policy=token_bucket,2,5,2"),
            at(0, 3, "allow 5 5;w=2;burst=3;policy=token_bucket,2,2,1"),
        ],
    },
    Scenario {
        name: "token_bucket without refill waits for the reset",
        limiter: "token_bucket",
        opts: &["2", "60", "2"],
        calls: &[
            at(0, 1, "allow 2 2;w=60;burst=2;policy=token_bucket,60,1"),
            at(0, 1, "allow 2 2;w=60;burst=2;policy=token_bucket,60,0,60"),
            at(0, 1, "deny 2 2;w=60;burst=2;policy=token_bucket,60,0,60"),
        ],
    },
    Scenario {
        name: "sliding_window weighs the previous window as it slides out",
        limiter: "sliding_window",
        opts: &["3", "10"],
        calls: &[
            at(0, 1, "allow 3,20,2"),
            at(0, 0, "allow 3,20,1"),
            at(5_000, 2, "allow 3,15,0"),
            at(5_000, 1, "deny 3,15,0,9"),
            at(12_000, 1, "deny 3,8,0,2"),
            at(14_000, 1, "allow 3,16,0"),
            at(14_000, 0, "deny 3,16,0,3"),
            at(30_000, 0, "allow 3,20,2"),
            at(30_000, 4, "deny 3,0,3,0"),
        ],
    },
    Scenario {
        name: "sliding_log waits for the entry that must leave",
        limiter: "sliding_log",
        opts: &["3", "10"],
        calls: &[
            at(0, 2, "allow 3,10,1"),
            at(1_000, 1, "allow 3,10,0"),
            at(2_000, 1, "deny 3,9,0,8"),
            at(2_000, 0, "deny 3,9,0,8"),
            at(9_999, 1, "deny 3,2,0,1"),
            at(10_000, 2, "allow 3,10,0"),
            at(10_500, 2, "deny 3,10,0,10"),
            at(11_000, 1, "allow 3,10,0"),
            at(11_000, 4, "deny 3,10,0,10"),
        ],
    },
    Scenario {
        name: "sliding_log logs every unit, many in one millisecond",
        limiter: "sliding_log",
        opts: &["5", "1"],
        calls: &[
            at(0, 1, "allow 5,1,4"),
            at(0, 1, "allow 5,1,3"),
            at(0, 1, "allow 5,1,2"),
            at(0, 2, "allow 5,1,0"),
            at(0, 1, "deny 5,1,0,1"),
            at(1_000, 5, "allow 5,1,0"),
        ],
    },
    Scenario {
        name: "sliding_log denies an empty log a cost above the limit",
        limiter: "sliding_log",
        opts: &["2", "5"],
        calls: &[at(0, 3, "deny 2,0,2,0"), at(0, 0, "allow 2,5,1")],
    },
    Scenario {
        name: "leaky_bucket leaks limit units per window, exactly",
        limiter: "leaky_bucket",
        opts: &["3", "1"],
        calls: &[
            at(0, 2, "allow 3,1,1"),
            at(0, 0, "allow 3,1,0"),
            at(0, 2, "deny 3,1,1,1"),
            at(333, 1, "allow 3,1,0"),
            at(334, 1, "allow 3,1,0"),
            at(334, 1, "deny 3,1,0,1"),
            at(1_333, 0, "allow 3,1,1"),
            at(1_334, 3, "allow 3,1,0"),
            at(1_334, 4, "deny 3,1,0,2"),
        ],
    },
    Scenario {
        name: "leaky_bucket tells how long until a unit has leaked",
        limiter: "leaky_bucket",
        opts: &["10", "60"],
        calls: &[
            at(0, 10, "allow 10,60,0"),
            at(6_000, 1, "allow 10,60,0"),
            at(6_000, 1, "deny 10,60,0,6"),
        ],
    },
    Scenario {
        name: "gcra admits a burst, then one per emission interval",
        limiter: "gcra",
        opts: &["10", "1", "3"],
        calls: &[
            at(0, 1, "allow 3,1,2"),
            at(0, 0, "allow 3,1,1"),
            at(0, 2, "allow 3,1,0"),
            at(0, 1, "deny 3,1,0,1"),
            at(100, 1, "allow 3,1,0"),
            at(250, 0, "allow 3,1,0"),
            at(250, 2, "deny 3,1,0,1"),
            at(400, 3, "allow 3,1,0"),
            at(700, 4, "deny 3,0,0,1"),
        ],
    },
    Scenario {
        name: "gcra resets and retries in whole seconds",
        limiter: "gcra",
        opts: &["2", "60", "2"],
        calls: &[
            at(0, 1, "allow 2,30,1"),
            at(0, 1, "allow 2,60,0"),
            at(10_000, 1, "deny 2,50,0,20"),
            at(30_000, 1, "allow 2,60,0"),
        ],
    },
    Scenario {
        name: "multi_window counts a denied request in no window",
        limiter: "multi_window",
        opts: &["2/10", "3/60"],
        calls: &[
            at(0, 1, "allow 2,10,1 @0"),
            at(0, 1, "allow 2,10,0 @0"),
            at(5_000, 1, "deny 2,5,0,5 @0"),
            // Had the denied call counted in the hour, this one would be denied too.
            at(10_000, 1, "allow 3,50,0 @1"),
            at(10_000, 1, "deny 3,50,0,50 @1"),
            at(10_000, 0, "deny 3,50,0,50 @1"),
            at(60_000, 2, "allow 2,10,0 @0"),
            at(60_000, 3, "deny 2,10,0,60 @0"),
        ],
    },
    Scenario {
        name: "multi_window breaks a tie of remaining by the longest reset",
        limiter: "multi_window",
        opts: &["5/10", "5/60"],
        calls: &[at(0, 1, "allow 5,60,4 @1")],
    },
    Scenario {
        name: "fixed_window refunds down to no key, forces past the limit",
        limiter: "fixed_window",
        opts: &["3", "10"],
        calls: &[
            back(0, 2, "allow 3,10,3"),
            at(0, 0, "allow 3,10,2"),
            at(0, 3, "allow 3,10,0"),
            back(1_000, 1, "allow 3,9,1"),
            back(1_000, 5, "allow 3,10,3"),
            at(1_000, 0, "allow 3,10,2"),
            at(2_000, 1, "allow 3,10,2"),
            force(3_000, 4, "deny 3,9,0"),
            at(3_000, 1, "deny 3,9,0"),
            back(4_000, 2, "allow 3,8,0"),
            at(9_999, 1, "deny 3,2,0"),
            force(10_000, 2, "deny 3,2,0"),
            force(10_000, 2_147_483_647, "deny 3,2,0"),
            force(10_000, 2_147_483_647, "deny 3,2,0"),
            force(10_000, 2_147_483_647, "deny 3,2,0"),
            back(
                19_000,
                4_294_967_293,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '-4294967293'",
            ),
            at(19_000, 1, "allow 3,10,2"),
            back(20_000, 1, "allow 3,10,3"),
            at(20_000, 0, "allow 3,10,2"),
        ],
    },
    Scenario {
        name: "a bad cost is refused alike in every form",
        limiter: "fixed_window",
        opts: &["3", "10"],
        calls: &[
            back(
                0,
                0,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '-0'",
            ),
            force(
                0,
                0,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '+0'",
            ),
            back(
                0,
                2_147_483_648,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '-2147483648'",
            ),
            force(
                0,
                4_294_967_295,
                "error fixed_window: cost must be an integer 0..2147483647, '-n', '+n' or '~n' with n 1..2147483647, got '+4294967295'",
            ),
        ],
    },
    Scenario {
        name: "token_bucket refunds up to a full bucket, forces into one bucket of debt",
        limiter: "token_bucket",
        opts: &["5", "2", "3"],
        calls: &[
            back(0, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,2,5"),
            at(0, 0, "allow 5 5;w=2;burst=3;policy=token_bucket,2,4"),
            at(0, 3, "allow 5 5;w=2;burst=3;policy=token_bucket,2,2,1"),
            back(0, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,2,3"),
            back(500, 5, "allow 5 5;w=2;burst=3;policy=token_bucket,2,5"),
            force(500, 4, "deny 5 5;w=2;burst=3;policy=token_bucket,2,1,2"),
            at(500, 0, "deny 5 5;w=2;burst=3;policy=token_bucket,2,1,2"),
            force(500, 10, "deny 5 5;w=2;burst=3;policy=token_bucket,2,0,2"),
            at(1_500, 1, "deny 5 5;w=2;burst=3;policy=token_bucket,1,0,1"),
            back(1_500, 2, "allow 5 5;w=2;burst=3;policy=token_bucket,1,0,1"),
            at(2_000, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,2,4"),
            force(4_000, 2, "allow 5 5;w=2;burst=3;policy=token_bucket,2,3"),
        ],
    },
    Scenario {
        name: "sliding_window refunds the current window, then the previous one",
        limiter: "sliding_window",
        opts: &["4", "10"],
        calls: &[
            back(0, 1, "allow 4,0,4"),
            at(0, 3, "allow 4,20,1"),
            back(1_000, 1, "allow 4,19,2"),
            force(2_000, 4, "deny 4,18,0,13"),
            at(2_000, 0, "deny 4,18,0,13"),
            at(12_000, 1, "deny 4,8,0,3"),
            back(12_000, 6, "allow 4,0,4"),
            at(12_000, 0, "allow 4,18,3"),
            back(13_000, 9, "allow 4,0,4"),
            at(13_000, 0, "allow 4,17,3"),
            force(25_000, 2_147_483_647, "deny 4,15,0,15"),
            force(25_000, 2_147_483_647, "deny 4,15,0,15"),
            force(25_000, 2_147_483_647, "deny 4,15,0,15"),
            at(44_999, 1, "allow 4,16,3"),
            at(45_000, 0, "allow 4,15,2"),
        ],
    },
    Scenario {
        name: "sliding_log refunds the newest entries, forces at most limit of them",
        limiter: "sliding_log",
        opts: &["3", "10"],
        calls: &[
            back(0, 1, "allow 3,0,3"),
            at(0, 1, "allow 3,10,2"),
            at(2_000, 2, "allow 3,10,0"),
            back(3_000, 1, "allow 3,9,1"),
            at(3_000, 0, "allow 3,10,0"),
            force(4_000, 1, "allow 3,10,0"),
            force(5_000, 1_000_000, "deny 3,10,0,10"),
            at(9_000, 1, "deny 3,6,0,6"),
            back(9_000, 2, "allow 3,6,2"),
            at(14_999, 1, "allow 3,10,1"),
            at(15_000, 0, "allow 3,10,1"),
            back(15_000, 9, "allow 3,0,3"),
            at(15_000, 0, "allow 3,10,2"),
        ],
    },
    Scenario {
        name: "leaky_bucket refunds down to an empty bucket, forces up to two capacities",
        limiter: "leaky_bucket",
        opts: &["4", "2"],
        calls: &[
            back(0, 1, "allow 4,0,4"),
            at(0, 3, "allow 4,2,1"),
            back(500, 1, "allow 4,1,3"),
            back(500, 9, "allow 4,0,4"),
            at(500, 0, "allow 4,1,3"),
            force(1_000, 6, "deny 4,3,0,2"),
            at(1_000, 0, "deny 4,3,0,2"),
            force(1_000, 2_147_483_647, "deny 4,4,0,3"),
            at(2_999, 1, "deny 4,3,0,1"),
            at(3_000, 1, "deny 4,2,0,1"),
        ],
    },
    Scenario {
        name: "gcra refunds its TAT back to now at most, forces it one burst ahead at most",
        limiter: "gcra",
        opts: &["4", "2", "2"],
        calls: &[
            back(0, 1, "allow 2,0,2"),
            at(0, 2, "allow 2,1,0"),
            back(0, 1, "allow 2,1,1"),
            at(0, 1, "allow 2,1,0"),
            back(100, 5, "allow 2,0,2"),
            at(100, 0, "allow 2,1,1"),
            force(100, 3, "deny 2,2,0,1"),
            at(100, 0, "deny 2,2,0,1"),
            force(100, 100, "deny 2,2,0,2"),
            at(1_099, 1, "deny 2,2,0,1"),
            at(1_100, 1, "deny 2,1,0,1"),
        ],
    },
    Scenario {
        name: "token_bucket forgets a window begun this millisecond once given back in full",
        limiter: "token_bucket",
        opts: &["5", "2", "3"],
        calls: &[
            at(0, 2, "allow 5 5;w=2;burst=3;policy=token_bucket,2,3"),
            back(0, 2, "allow 5 5;w=2;burst=3;policy=token_bucket,2,5"),
            // A new window from here: a reset of 2 s, not the 1 s left of one begun at 0.
            at(1_500, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,2,4"),
            // Given back a millisecond later, the window stays.
            back(1_501, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,2,5"),
            at(2_500, 1, "allow 5 5;w=2;burst=3;policy=token_bucket,1,4"),
        ],
    },
    Scenario {
        name: "token_bucket refunds up to what an untouched bucket holds, past its burst",
        limiter: "token_bucket",
        opts: &["5", "2", "2"],
        calls: &[
            at(0, 1, "allow 5 5;w=2;burst=2;policy=token_bucket,2,4"),
            // 1 + 1.512 refilled, less 1: 1.512 left, given back to 2.512, above the burst of 2.
            at(1_008, 1, "allow 5 5;w=2;burst=2;policy=token_bucket,1,3"),
            back(1_008, 1, "allow 5 5;w=2;burst=2;policy=token_bucket,1,4"),
            // 3.001 less 2 leaves 1.001: no retry-after, as if the take and refund never were.
            at(1_334, 2, "allow 5 5;w=2;burst=2;policy=token_bucket,1,2"),
            // Never above the untouched bucket: 2 + 3 x 1.4 s / 2 s = 4.1 at most.
            back(1_400, 5, "allow 5 5;w=2;burst=2;policy=token_bucket,1,5"),
            at(1_400, 4, "allow 5 5;w=2;burst=2;policy=token_bucket,1,1,1"),
            at(1_400, 1, "deny 5 5;w=2;burst=2;policy=token_bucket,1,1,1"),
        ],
    },
    Scenario {
        name: "multi_window forgets a window begun this millisecond once given back in full",
        limiter: "multi_window",
        opts: &["2/10", "5/60"],
        calls: &[
            at(0, 1, "allow 2,10,1 @0"),
            back(0, 1, "allow 2,10,2 @0"),
            // New windows from here: a reset of 10 s, not the 5 s left of one begun at 0.
            at(5_000, 1, "allow 2,10,1 @0"),
            // The 60 s window still counts one: only the 10 s one began now.
            at(15_000, 1, "allow 2,10,1 @0"),
            back(15_000, 1, "allow 2,10,2 @0"),
            at(20_000, 1, "allow 2,10,1 @0"),
        ],
    },
    Scenario {
        name: "multi_window refunds the windows that count, forces every window",
        limiter: "multi_window",
        opts: &["2/10", "5/60"],
        calls: &[
            back(0, 1, "allow 2,10,2 @0"),
            at(0, 2, "allow 2,10,0 @0"),
            back(1_000, 1, "allow 2,9,1 @0"),
            force(2_000, 3, "deny 2,8,0,8 @0"),
            at(2_000, 0, "deny 2,8,0,8 @0"),
            at(10_000, 1, "allow 5,50,0 @1"),
            back(10_000, 2, "allow 5,50,2 @1"),
            at(10_000, 0, "allow 5,50,1 @1"),
            force(20_000, 2_147_483_647, "deny 5,40,0,40 @1"),
            force(20_000, 2_147_483_647, "deny 5,40,0,40 @1"),
            force(20_000, 2_147_483_647, "deny 5,40,0,40 @1"),
            back(
                20_000,
                4_294_967_290,
                "error multi_window: cost must be an integer 0..2147483647, '-n' or '+n' with n 1..2147483647, got '-4294967290'",
            ),
        ],
    },
];

/// Scenarios of calendar_quota, whose answers depend on the date: each starts at its own
/// instant (ms since the epoch). The dates are in 2084, which has the calendar of 2028 (56
/// years on: the same weekdays, and a leap year), late enough that the scripts' expiries are
/// never in a real Redis' past.
pub(crate) const ANCHORED: &[(i64, Scenario)] = &[
    (
        // 2084-01-31T23:59:58-05:00
        3_600_219_598_000,
        Scenario {
            name: "calendar_quota renews a month at local midnight, and February 2084 has 29 days",
            limiter: "calendar_quota",
            opts: &["3", "month", "-300"],
            calls: &[
                at(0, 1, "allow 3,2,2"),
                at(0, 2, "allow 3,2,0"),
                at(0, 0, "deny 3,2,0,2"),
                at(1_001, 1, "deny 3,1,0,1"),
                at(1_999, 0, "deny 3,1,0,1"),
                // 2084-02-01T00:00:00-05:00: 29 days to March.
                at(2_000, 1, "allow 3,2505600,2"),
                at(2_000, 5, "deny 3,2505600,2,2505600"),
                at(2_500, 2, "allow 3,2505600,0"),
                at(2_500, 0, "deny 3,2505600,0,2505600"),
            ],
        },
    ),
    (
        // 2084-02-29T12:00:00+05:30, a Tuesday
        3_602_644_200_000,
        Scenario {
            name: "calendar_quota weeks start on Monday at local midnight",
            limiter: "calendar_quota",
            opts: &["2", "week", "330"],
            calls: &[
                at(0, 1, "allow 2,475200,1"),
                at(0, 0, "allow 2,475200,0"),
                at(0, 1, "allow 2,475200,0"),
                at(1_000, 1, "deny 2,475199,0,475199"),
                at(475_199_999, 1, "deny 2,1,0,1"),
                at(475_200_000, 2, "allow 2,604800,0"),
            ],
        },
    ),
    (
        // 2084-02-29T23:59:59+05:30
        3_602_687_399_000,
        Scenario {
            name: "calendar_quota days end at local midnight, the leap day too",
            limiter: "calendar_quota",
            opts: &["007", "day", "0330"],
            calls: &[
                at(0, 7, "allow 7,1,0"),
                at(999, 1, "deny 7,1,0,1"),
                at(1_000, 3, "allow 7,86400,4"),
                at(1_000, 8, "deny 7,86400,4,86400"),
            ],
        },
    ),
    (
        // 2084-03-01T00:00:00Z
        3_602_707_200_000,
        Scenario {
            name: "calendar_quota refunds within the period, forces past its limit",
            limiter: "calendar_quota",
            opts: &["3", "day", "0"],
            calls: &[
                back(0, 1, "allow 3,86400,3"),
                at(0, 2, "allow 3,86400,1"),
                back(1_000, 1, "allow 3,86399,2"),
                force(2_000, 5, "deny 3,86398,0,86398"),
                at(2_000, 0, "deny 3,86398,0,86398"),
                back(3_000, 2, "allow 3,86397,0"),
                at(3_000, 1, "deny 3,86397,0,86397"),
                back(4_000, 10, "allow 3,86396,3"),
                at(4_000, 0, "allow 3,86396,2"),
            ],
        },
    ),
];

/// Opts each script refuses, as `"<limiter> <opts...> => <words>"`: the script answers
/// `ERR <limiter>: <words>`.
pub(crate) const REFUSED: &[&str] = &[
    "fixed_window 0 60 => limit must be a positive integer, got '0'",
    "fixed_window 3 1.5 => window must be a positive integer, got '1.5'",
    "fixed_window 3 2147483648 => window must be <= 2147483647, got '2147483648'",
    "token_bucket 2 2 3 => burst must be <= limit, got '3'",
    "token_bucket 5 2 0 => burst must be >= 1, got '0'",
    "token_bucket 5 2 x => burst must be a positive integer, got 'x'",
    "sliding_window 3 0 => window must be a positive integer, got '0'",
    "sliding_log x 10 => limit must be a positive integer, got 'x'",
    "sliding_log 3 2147483648 => window must be <= 2147483647, got '2147483648'",
    "leaky_bucket -3 5 => limit must be a positive integer, got '-3'",
    "leaky_bucket 2147483647 5000 => window must be <= 9007199254740 / limit, got '5000'",
    "gcra 3 1 4 => burst must be <= limit, got '4'",
    "gcra 3 1 0 => burst must be a positive integer, got '0'",
    "multi_window 2/10 3/10 => opt 2 must not repeat the window of opt 1, got '3/10'",
    "multi_window 2/0 => opt 1 must be \"<limit>/<window>\" with positive integers, got '2/0'",
    "multi_window 2147483648/5 => opt 1 must have limit and window <= 2147483647, got '2147483648/5'",
    "multi_window 5 => opts must hold at least one \"<limit>/<window>\", got '5'",
    "multi_window 7 1/5 => opt 1 must be \"<limit>/<window>\" with positive integers, got '7'",
    "calendar_quota 0 month 0 => limit must be a positive integer, got '0'",
    "calendar_quota 5 year 0 => period must be day, week or month, got 'year'",
    "calendar_quota 5 Month 0 => period must be day, week or month, got 'Month'",
    "calendar_quota 5 7 0 => period must be day, week or month, got '7'",
    "calendar_quota 5 day 1440 => utc_offset_minutes must be an integer from -1439 to 1439, got '1440'",
    "calendar_quota 5 day -1440 => utc_offset_minutes must be an integer from -1439 to 1439, got '-1440'",
    "calendar_quota 5 day 1.5 => utc_offset_minutes must be an integer from -1439 to 1439, got '1.5'",
    "calendar_quota 5 day +60 => utc_offset_minutes must be an integer from -1439 to 1439, got '+60'",
    "calendar_quota 5 day UTC.5 => utc_offset_minutes must be an integer from -1439 to 1439 or an IANA time zone name, got 'UTC.5'",
];

/// A [`REFUSED`] line as the limiter, its opts and the whole error message.
pub(crate) fn refused(line: &'static str) -> (&'static str, Vec<&'static str>, String) {
    let (call, message) = line.split_once(" => ").expect("`=>` in a REFUSED line");
    let mut words = call.split(' ');
    let limiter = words.next().expect("a limiter");
    (
        limiter,
        words.collect(),
        format!("error {limiter}: {message}"),
    )
}

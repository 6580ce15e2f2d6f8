//! What an error quotes of a refused input is escaped: a CR/LF, a NUL or a right-to-left
//! override in a name cannot write a log line of its own. One hostile text through every path
//! that refuses an input by quoting it.

use plug_limit::{Limiter, Opt, PlugLimit, RateLimitLayer, Rules, RuntimeLimit, Script, Store};
use plug_limit_tests::RedisServer;

/// A line break, a NUL and a right-to-left override, after text that would read as a header.
const HOSTILE: &str = "x\r\nforged: yes\0\u{202e}gpj";
/// `HOSTILE` as every error quotes it.
const ESCAPED: &str = r"x\r\nforged: yes\0\u{202e}gpj";

/// The error quotes the hostile text escaped, and holds nothing a terminal or a log would
/// take for a line break or a direction.
#[track_caller]
fn quoted(error: &dyn std::fmt::Display) {
    let text = error.to_string();
    assert!(text.contains(ESCAPED), "{text:?}");
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "{text:?}"
    );
}

#[test]
fn a_built_in_option_is_quoted_escaped() {
    let zone = format!("Europe/{HOSTILE}");
    let refused = RuntimeLimit::new(
        "calendar_quota",
        [Opt::from(100), Opt::from("day"), Opt::from(zone)],
    )
    .unwrap_err();
    quoted(&refused);
    let refused =
        RuntimeLimit::new("fixed_window", [Opt::from(HOSTILE), Opt::from(60)]).unwrap_err();
    quoted(&refused);
}

#[test]
fn a_limiters_header_name_is_quoted_escaped() {
    let refused = PlugLimit::builder(Store::memory())
        .limiter("quota", Limiter::fixed_window().headers([HOSTILE]))
        .build()
        .unwrap_err();
    quoted(&refused);
}

#[test]
fn a_limiters_name_and_its_script_name_are_quoted_escaped() {
    let refused = PlugLimit::builder(Store::memory())
        .limiter(HOSTILE, Limiter::fixed_window())
        .build()
        .unwrap_err();
    quoted(&refused);
    let redis = RedisServer::start();
    let refused = PlugLimit::builder(redis.pool())
        .limiter("named", Limiter::script_named(HOSTILE))
        .build()
        .unwrap_err();
    quoted(&refused);
    let refused = PlugLimit::builder(redis.pool())
        .script(HOSTILE, Script::lua("return {'allow', {}}"))
        .script(HOSTILE, Script::lua("return {'allow', {}}"))
        .build()
        .unwrap_err();
    quoted(&refused);
}

#[test]
fn a_script_files_path_is_quoted_escaped() {
    let redis = RedisServer::start();
    let refused = PlugLimit::builder(redis.pool())
        .limiter(
            "from_file",
            Limiter::script_file(format!("/nonexistent/{HOSTILE}.lua")),
        )
        .build()
        .unwrap_err();
    quoted(&refused);
}

#[test]
fn a_rules_list_entry_is_quoted_escaped() {
    let refused = PlugLimit::builder(Store::memory())
        .rules(Rules::new().allow_cidrs([HOSTILE]))
        .build()
        .unwrap_err();
    quoted(&refused);
}

#[tokio::test]
async fn an_unknown_limiters_name_is_quoted_escaped() {
    let limits = PlugLimit::memory();
    let unknown = RuntimeLimit::new(HOSTILE, [1, 60]).unwrap();
    quoted(&limits.check(unknown.clone(), "k").await.unwrap_err());
    quoted(&RateLimitLayer::runtime(limits, unknown).unwrap_err());
}

#[tokio::test]
async fn a_scripts_decision_is_quoted_escaped() {
    let redis = RedisServer::start();
    let script = format!(
        "return {{'{}', {{}}}}",
        HOSTILE.replace('\0', "\\0").replace("\r\n", "\\r\\n")
    );
    let limits = PlugLimit::builder(redis.pool())
        .limiter("forger", Limiter::script(script))
        .build()
        .unwrap();
    let limit = RuntimeLimit::new("forger", Vec::<Opt>::new()).unwrap();
    let failed = limits.check(limit, "k").await.unwrap_err();
    quoted(&failed);
    assert!(matches!(failed, plug_limit::Error::Reply(_)), "{failed:?}");
}

/// A built-in registered under a name of its own reads its options in its script, which
/// refuses a bad one by quoting it in Redis's error reply: the error escapes and bounds that
/// reply as it does every quoted input, where it echoed a 100 kB option with its escape
/// sequences.
#[tokio::test]
async fn a_scripts_refusal_is_quoted_escaped_and_bounded() {
    let redis = RedisServer::start();
    let limits = PlugLimit::builder(redis.pool())
        .limiter("hot", Limiter::fixed_window())
        .build()
        .unwrap();
    let option = format!("\u{202e}\u{1b}[31m{}", "A".repeat(100_000));
    let limit = RuntimeLimit::new("hot", [Opt::from(option), Opt::from(60)]).unwrap();
    let failed = limits.check(limit, "k").await.unwrap_err();
    assert!(matches!(failed, plug_limit::Error::Redis(_)), "{failed:?}");
    let text = failed.to_string();
    assert!(text.len() < 700, "{} bytes", text.len());
    assert!(text.contains(r"got '\u{202e}\u{1b}[31mAAA"), "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "{text:?}"
    );
}

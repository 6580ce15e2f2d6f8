//! Invalid configuration is refused by `build()`, naming the field and the rule.

use std::time::Duration;

use plug_limit::{BuildError, CircuitBreaker, Config, Enabled, FailurePolicy, Limiter, PlugLimit};
use plug_limit_tests::dead_url;

fn builder() -> plug_limit::Builder {
    PlugLimit::builder(plug_limit_tests::pool(&dead_url()))
}

fn error(result: Result<PlugLimit, BuildError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn every_rule_names_its_field() {
    let cases: Vec<(Result<PlugLimit, BuildError>, &str)> = vec![
        (
            builder().prefix("").build(),
            "invalid `prefix`: must be non-empty and contain no whitespace, `{` or `}`",
        ),
        (
            builder().prefix("my app").build(),
            "invalid `prefix`: must be non-empty and contain no whitespace, `{` or `}`",
        ),
        (
            builder().prefix("app{1}").build(),
            "invalid `prefix`: must be non-empty and contain no whitespace, `{` or `}`",
        ),
        (
            builder()
                .circuit_breaker(CircuitBreaker::new(0, Duration::from_secs(1)))
                .build(),
            "invalid `circuit_breaker.failures`: must be at least 1",
        ),
        (
            builder()
                .circuit_breaker(CircuitBreaker::new(3, Duration::ZERO))
                .build(),
            "invalid `circuit_breaker.open_for`: must be greater than zero and at most 1 hour",
        ),
        (
            builder()
                .circuit_breaker(CircuitBreaker::new(3, Duration::MAX))
                .build(),
            "invalid `circuit_breaker.open_for`: must be greater than zero and at most 1 hour",
        ),
        (
            // Inherited, not only set on the limiter: memory cannot stand in for a script.
            builder()
                .on_failure(FailurePolicy::Memory)
                .limiter("custom", Limiter::script("return {'allow'}"))
                .build(),
            "invalid `limiters.custom`: `on_failure: memory` needs a built-in limiter: memory cannot run custom Lua scripts",
        ),
        (
            builder()
                .limiter(
                    "framing",
                    Limiter::script("return {'allow', {'0'}}").headers(["Content-Length"]),
                )
                .build(),
            "invalid `limiters.framing.headers[0]`: `content-length` frames the response or belongs to the connection; a limiter may not set it",
        ),
        (
            builder().timeout(Duration::ZERO).build(),
            "invalid `timeout`: must be greater than zero",
        ),
        (
            builder().enabled(Enabled::env("", true)).build(),
            "invalid `enabled.env`: must be a non-empty variable name without `=`",
        ),
        (
            builder()
                .limiter("fixed_window", Limiter::script("return 1"))
                .build(),
            "invalid `limiters.fixed_window`: is a built-in limiter's name; register this limiter under another name",
        ),
        (
            builder()
                .limiter("a", Limiter::script("return 1"))
                .limiter("a", Limiter::script("return 2"))
                .build(),
            "invalid `limiters.a`: is registered more than once",
        ),
        (
            builder()
                .limiter("has space", Limiter::script("return 1"))
                .build(),
            "invalid `limiters.has space`: a limiter name must be non-empty, without whitespace, `:`, control or invisible characters",
        ),
        (
            builder().limiter("empty", Limiter::script("  \n")).build(),
            "invalid `limiters.empty.script`: the Lua script is empty",
        ),
        (
            builder()
                .limiter(
                    "h",
                    Limiter::script("return 1").headers(["ok", "not a header"]),
                )
                .build(),
            "invalid `limiters.h.headers[1]`: `not a header` is not a valid header name",
        ),
    ];
    for (result, message) in cases {
        assert_eq!(error(result), message);
    }
}

#[test]
fn an_unreadable_script_file_names_the_field_and_path() {
    let message = error(
        builder()
            .limiter("f", Limiter::script_file("/nonexistent/quota.lua"))
            .build(),
    );
    assert_eq!(
        message,
        "cannot read `limiters.f.script_file` from /nonexistent/quota.lua: No such file or directory (os error 2)"
    );
}

#[test]
fn config_deserializes_and_is_validated() {
    let config: Config = serde_json::from_value(serde_json::json!({
        "enabled": { "env": "PLUG_LIMIT_ENABLED" },
        "prefix": "cfg",
        "timeout_ms": 100,
        "log_level": "debug",
        "on_failure": "closed",
        "limiters": {
            "quota": { "script": "return {'allow', {}}", "headers": ["x-quota"] }
        }
    }))
    .unwrap();
    let limits = builder().config(config).build().unwrap();
    let debug = format!("{limits:?}");
    assert!(debug.contains(r#"prefix: "cfg""#), "{debug}");
    assert!(debug.contains("timeout: 100ms"), "{debug}");
    assert!(debug.contains("on_failure: Closed"), "{debug}");
    assert!(
        debug.contains(r#"limiters: ["calendar_quota", "concurrency", "fixed_window", "gcra", "leaky_bucket", "multi_window", "quota", "sliding_log", "sliding_window", "token_bucket"]"#),
        "{debug}"
    );

    let both: Config = serde_json::from_value(serde_json::json!({
        "limiters": { "q": { "script": "return 1", "script_file": "q.lua" } }
    }))
    .unwrap();
    assert_eq!(
        error(builder().config(both).build()),
        "invalid `limiters.q`: exactly one of `script`, `script_file`, `script_name` and `builtin` is required"
    );

    let bad_url: Config = serde_json::from_value(serde_json::json!({
        "limiters": { "q": { "script": "return 1", "redis_url": "not a url" } }
    }))
    .unwrap();
    assert!(
        error(builder().config(bad_url).build()).starts_with("invalid `limiters.q.redis_url`: ")
    );

    let unknown = serde_json::from_value::<Config>(serde_json::json!({ "prefx": "typo" }));
    assert!(
        unknown
            .unwrap_err()
            .to_string()
            .starts_with("unknown field `prefx`")
    );
}

#[test]
fn a_prefix_is_at_most_64_bytes_in_code_and_in_a_config_file() {
    assert!(builder().prefix("p".repeat(64)).build().is_ok());
    assert_eq!(
        error(builder().prefix("p".repeat(65)).build()),
        "invalid `prefix`: must be at most 64 bytes, got 65 bytes"
    );
    // Bytes, not characters: every key carries the prefix's bytes.
    assert_eq!(
        error(builder().prefix("é".repeat(33)).build()),
        "invalid `prefix`: must be at most 64 bytes, got 66 bytes"
    );
    let config: Config =
        serde_json::from_value(serde_json::json!({ "prefix": "p".repeat(1 << 20) })).unwrap();
    assert_eq!(
        error(builder().config(config).build()),
        "invalid `prefix`: must be at most 64 bytes, got 1048576 bytes"
    );
}

/// A megabyte of input in each place an error quotes one: the error quotes its first 64
/// characters and its length, and still names the field and the rule.
#[test]
fn an_error_quotes_a_bounded_excerpt_of_the_input_it_refuses() {
    const MB: usize = 1 << 20;
    // What each error quotes: 64 characters, then the input's length.
    let head = |chars: String| format!("{chars}… (1048576 bytes)");

    let header: Config = serde_json::from_value(serde_json::json!({
        "limiters": { "q": { "script": "return 1", "headers": ["h ".repeat(MB / 2)] } }
    }))
    .unwrap();
    let limiter: Config = serde_json::from_value(serde_json::json!({
        "limiters": { " ".repeat(MB): { "script": "return 1" } }
    }))
    .unwrap();
    let builtin: Config = serde_json::from_value(serde_json::json!({
        "limiters": { "q": { "builtin": "b".repeat(MB) } }
    }))
    .unwrap();
    let cases = [
        (
            error(builder().config(header).build()),
            format!(
                "invalid `limiters.q.headers[0]`: `{}` is not a valid header name",
                head("h ".repeat(32))
            ),
        ),
        (
            error(builder().config(limiter).build()),
            format!(
                "invalid `limiters.{}`: a limiter name must be non-empty, without whitespace, `:`, control or invisible characters",
                head(" ".repeat(64))
            ),
        ),
        (
            error(builder().config(builtin).build()),
            format!(
                "invalid `limiters.q.builtin`: must be `fixed_window` or `token_bucket` (the \
                 built-ins that run under another name), got `{}`",
                head("b".repeat(64))
            ),
        ),
        (
            error(
                builder()
                    .rules(plug_limit::Rules::new().deny_cidrs(["c".repeat(MB)]))
                    .build(),
            ),
            format!(
                "invalid `deny_cidrs[0]`: `{}` is not a CIDR block or an IP address (e.g. `10.0.0.0/8`, `::1`)",
                head("c".repeat(64))
            ),
        ),
        (
            plug_limit::RuntimeLimit::new("fixed_window", ["9".repeat(MB), "60".to_owned()])
                .unwrap_err()
                .to_string(),
            format!(
                "invalid `opts`: fixed_window: limit must be <= 2147483647, got '{}'",
                head("9".repeat(64))
            ),
        ),
    ];
    for (message, expected) in cases {
        assert!(message.len() < 300, "{} bytes: {message}", message.len());
        assert_eq!(message, expected);
    }
}

#[tokio::test]
async fn an_unknown_limiters_long_name_is_quoted_by_its_excerpt() {
    let limits = PlugLimit::memory();
    let name = "u".repeat(1 << 20);
    let unknown = plug_limit::RuntimeLimit::new(name, [1, 60]).unwrap();
    let message = limits.check(&unknown, "k").await.unwrap_err().to_string();
    assert_eq!(
        message,
        format!(
            "unknown limiter `{}… (1048576 bytes)`; register it with `Builder::limiter`",
            "u".repeat(64)
        )
    );
}

/// `RateLimitLayer::runtime` refusing an unknown limiter quotes a long name by its excerpt, as
/// every refusal does, where it echoed a megabyte.
#[test]
fn a_runtime_layers_unknown_long_name_is_quoted_by_its_excerpt() {
    let limits = PlugLimit::memory();
    let name = "u".repeat(1 << 20);
    let unknown = plug_limit::RuntimeLimit::new(name, [1, 60]).unwrap();
    let refused = plug_limit::RateLimitLayer::runtime(limits, unknown).unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!(
            "invalid `limiter`: `{}… (1048576 bytes)` is not registered with this PlugLimit",
            "u".repeat(64)
        )
    );
}

/// A limiter's name is in every key it writes, as the prefix is: it has the prefix's bound,
/// refused at build by its excerpt, in code and in a configuration file alike, where a
/// megabyte name built and its first check wrote a megabyte key.
#[test]
fn a_limiter_name_has_the_prefixs_bound() {
    let long = "n".repeat(65);
    let refused = PlugLimit::builder(plug_limit::Store::memory())
        .limiter(long.clone(), plug_limit::Limiter::fixed_window())
        .build()
        .unwrap_err();
    let expected = format!(
        "invalid `limiters.{}… (65 bytes)`: a limiter name must be at most 64 bytes, got 65 bytes",
        "n".repeat(64)
    );
    assert_eq!(refused.to_string(), expected);
    let config: plug_limit::Config = serde_json::from_value(serde_json::json!({
        "limiters": { long: { "builtin": "fixed_window" } }
    }))
    .unwrap();
    let refused = PlugLimit::builder(plug_limit::Store::memory())
        .config(config)
        .build()
        .unwrap_err();
    assert_eq!(refused.to_string(), expected);
    let fits = "n".repeat(64);
    assert!(
        PlugLimit::builder(plug_limit::Store::memory())
            .limiter(fits, plug_limit::Limiter::fixed_window())
            .build()
            .is_ok()
    );
}

/// A setting whose unit a configuration file spells in its name is refused by that name
/// (`timeout_ms`, `circuit_breaker.open_for_ms`), and by the code's name when code set it
/// last, where a file's `timeout_ms = 0` was refused as `timeout`.
#[test]
fn a_setting_is_refused_by_the_name_that_set_it() {
    let file = |json: serde_json::Value| -> Config { serde_json::from_value(json).unwrap() };
    let zero_timeout = file(serde_json::json!({ "timeout_ms": 0 }));
    assert_eq!(
        error(builder().config(zero_timeout.clone()).build()),
        "invalid `timeout_ms`: must be greater than zero"
    );
    assert_eq!(
        error(
            builder()
                .config(zero_timeout)
                .timeout(Duration::ZERO)
                .build()
        ),
        "invalid `timeout`: must be greater than zero"
    );
    assert_eq!(
        error(builder().timeout(Duration::ZERO).build()),
        "invalid `timeout`: must be greater than zero"
    );
    let zero_open = file(serde_json::json!({
        "circuit_breaker": { "failures": 5, "open_for_ms": 0 }
    }));
    assert_eq!(
        error(builder().config(zero_open).build()),
        "invalid `circuit_breaker.open_for_ms`: must be greater than zero and at most 1 hour"
    );
    let zero_open = CircuitBreaker::new(5, Duration::ZERO);
    assert_eq!(
        error(builder().circuit_breaker(zero_open).build()),
        "invalid `circuit_breaker.open_for`: must be greater than zero and at most 1 hour"
    );
}

/// A built-in's number quoted as text is refused where the limit is made, in code and in a
/// file alike: the scripts would read `"600"` as 600, the typed limits and the attribute take
/// only integers.
#[test]
fn a_built_ins_number_written_as_text_is_refused() {
    use plug_limit::{Opt, RuntimeLimit};
    let refused =
        |limiter: &str, opts: Vec<Opt>| RuntimeLimit::new(limiter, opts).unwrap_err().to_string();
    assert_eq!(
        refused("token_bucket", vec![20.into(), "600".into(), 5.into()]),
        "invalid `opts`: token_bucket: window must be an integer, not a string, got '600'"
    );
    assert_eq!(
        refused("fixed_window", vec!["2".into(), 60.into()]),
        "invalid `opts`: fixed_window: limit must be an integer, not a string, got '2'"
    );
    assert_eq!(
        refused(
            "calendar_quota",
            vec![100.into(), "day".into(), "60".into()]
        ),
        "invalid `opts`: calendar_quota: utc_offset_minutes must be an integer, not a string, got '60'"
    );
    let from_file: Result<RuntimeLimit, _> =
        serde_json::from_str(r#"{ "limiter": "gcra", "opts": [10, 60, "5"] }"#);
    assert_eq!(
        from_file.unwrap_err().to_string(),
        "invalid `opts`: gcra: burst must be an integer, not a string, got '5'"
    );
    // Text where a built-in takes text, and any option of a custom limiter, stay as given.
    for (limiter, opts) in [
        (
            "calendar_quota",
            vec![Opt::from(100), "month".into(), "Europe/Berlin".into()],
        ),
        ("multi_window", vec!["5/1".into(), "100/60".into()]),
        ("my_script", vec!["600".into()]),
    ] {
        assert!(RuntimeLimit::new(limiter, opts).is_ok(), "{limiter}");
    }
}

/// A limiter's name is in every key and log line of its limiter: a control or invisible format
/// character is refused (it would read as something else there), a non-ASCII letter is not.
#[test]
fn a_limiter_name_holds_no_control_or_invisible_character() {
    for name in ["a\u{1b}[2Jb", "a\u{202e}b", "a\u{200b}b", "a\0b"] {
        let refused = PlugLimit::builder(plug_limit::Store::memory())
            .limiter(name, Limiter::fixed_window())
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            refused.ends_with(
                "a limiter name must be non-empty, without whitespace, `:`, control or invisible characters"
            ),
            "{refused}"
        );
        assert!(
            !refused.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{refused:?}"
        );
    }
    assert!(
        PlugLimit::builder(plug_limit::Store::memory())
            .limiter("límite", Limiter::fixed_window())
            .build()
            .is_ok()
    );
}

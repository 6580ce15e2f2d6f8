//! Unit tests of `validate`: every rule, with its exact message.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};

use super::*;
use crate::parse;

fn check(args: TokenStream, item: TokenStream) -> Result<Config, String> {
    let item: ItemFn = syn::parse2(item).map_err(|e| format!("bad test item: {e}"))?;
    config(parse::args(args), &item).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn limiter(args: TokenStream) -> Result<Limiter, String> {
    check(args, quote! { async fn handler() {} }).map(|config| config.limiter)
}

fn error(args: TokenStream) -> String {
    match limiter(args) {
        Ok(limiter) => format!("no error: {limiter:?}"),
        Err(error) => error,
    }
}

/// A built-in of integer options, as the attribute validates it.
fn built_in(builtin: Builtin, opts: &[i64]) -> Limiter {
    Limiter::Builtin {
        builtin,
        opts: opts.iter().copied().map(Opt::Int).collect(),
    }
}

fn cost(args: TokenStream) -> Result<Option<u32>, String> {
    check(args, quote! { async fn handler() {} }).map(|config| config.cost)
}

fn handler_error(item: TokenStream) -> String {
    match check(quote!(opts = [1, 1]), item) {
        Ok(_) => String::from("no error"),
        Err(error) => error,
    }
}

#[test]
fn built_in_limiters() {
    assert_eq!(
        limiter(quote!(opts = [10, 60])),
        Ok(built_in(Builtin::FixedWindow, &[10, 60]))
    );
    assert_eq!(
        limiter(quote!(limiter = "token_bucket", opts = [20, 600, 5])),
        Ok(built_in(Builtin::TokenBucket, &[20, 600, 5]))
    );
    assert_eq!(
        limiter(quote!(limiter = "token_bucket", opts = [5, 1, 5])),
        Ok(built_in(Builtin::TokenBucket, &[5, 1, 5]))
    );
    assert_eq!(
        limiter(quote!(limiter = "sliding_window", opts = [100, 60])),
        Ok(built_in(Builtin::SlidingWindow, &[100, 60]))
    );
    assert_eq!(
        limiter(quote!(limiter = "sliding_log", opts = [2147483647, 1])),
        Ok(built_in(Builtin::SlidingLog, &[2_147_483_647, 1]))
    );
    assert_eq!(
        limiter(quote!(limiter = "leaky_bucket", opts = [10, 60])),
        Ok(built_in(Builtin::LeakyBucket, &[10, 60]))
    );
    assert_eq!(
        limiter(quote!(limiter = "gcra", opts = [20, 60, 20])),
        Ok(built_in(Builtin::Gcra, &[20, 60, 20]))
    );
    assert_eq!(
        limiter(quote!(
            limiter = "multi_window",
            opts = ["1/5", "5/3600", "2147483647/2147483647"]
        )),
        Ok(Limiter::Builtin {
            builtin: Builtin::MultiWindow,
            opts: ["1/5", "5/3600", "2147483647/2147483647"]
                .map(|rate| Opt::Str(rate.to_owned()))
                .into(),
        })
    );
}

#[test]
fn custom_limiters_take_integers_and_strings() {
    assert_eq!(
        limiter(quote!(limiter = "quota", opts = [1000, -1, "monthly"])),
        Ok(Limiter::Custom {
            name: "quota".to_owned(),
            opts: vec![Opt::Int(1000), Opt::Int(-1), Opt::Str("monthly".to_owned())],
        })
    );
    assert_eq!(
        limiter(quote!(limiter = "plain", opts = [])),
        Ok(Limiter::Custom {
            name: "plain".to_owned(),
            opts: Vec::new(),
        })
    );
}

#[test]
fn key_and_scope_are_kept() {
    let Ok(config) = check(
        quote!(opts = [1, 1], key = my_key, scope = "search"),
        quote! { async fn handler() {} },
    ) else {
        unreachable!("valid arguments are refused")
    };
    assert!(config.key.is_some());
    assert_eq!(config.scope.as_deref(), Some("search"));
}

#[test]
fn missing_opts() {
    assert_eq!(
        error(quote!()),
        "missing `opts = [limit, window]` for `fixed_window`"
    );
    assert_eq!(
        error(quote!(limiter = "token_bucket")),
        "missing `opts = [limit, window, burst]` for `token_bucket`"
    );
    assert_eq!(
        error(quote!(limiter = "quota")),
        "missing `opts = [...]` for the `quota` limiter"
    );
    for name in ["sliding_window", "sliding_log", "leaky_bucket"] {
        assert_eq!(
            error(quote!(limiter = #name)),
            format!("missing `opts = [limit, window]` for `{name}`")
        );
    }
    assert_eq!(
        error(quote!(limiter = "gcra")),
        "missing `opts = [limit, window, burst]` for `gcra`"
    );
    assert_eq!(
        error(quote!(limiter = "multi_window")),
        "missing `opts = [\"<limit>/<window>\", ...]` for `multi_window`"
    );
}

#[test]
fn arity_of_built_in_limiters() {
    assert_eq!(
        error(quote!(limiter = "token_bucket", opts = [20, 600])),
        "`token_bucket` takes 3 options `[limit, window, burst]`, found 2"
    );
    assert_eq!(
        error(quote!(opts = [10, 60, 5])),
        "`fixed_window` takes 2 options `[limit, window]`, found 3"
    );
    for name in ["sliding_window", "sliding_log", "leaky_bucket"] {
        assert_eq!(
            error(quote!(limiter = #name, opts = [10])),
            format!("`{name}` takes 2 options `[limit, window]`, found 1")
        );
    }
    assert_eq!(
        error(quote!(limiter = "gcra", opts = [10, 60])),
        "`gcra` takes 3 options `[limit, window, burst]`, found 2"
    );
}

#[test]
fn options_of_the_new_limiters_are_positive_integers() {
    assert_eq!(
        error(quote!(limiter = "sliding_window", opts = [0, "60"])),
        "expected a positive integer for `limit`\nexpected a positive integer for `window`"
    );
    assert_eq!(
        error(quote!(limiter = "sliding_log", opts = [2147483648, 60])),
        "`limit` must be at most 2147483647"
    );
    assert_eq!(
        error(quote!(limiter = "leaky_bucket", opts = [10, -60])),
        "expected a positive integer for `window`"
    );
    assert_eq!(
        error(quote!(limiter = "gcra", opts = [10, 2147483648, 1.5])),
        "`window` must be at most 2147483647\nexpected a positive integer for `burst`"
    );
}

#[test]
fn leaky_bucket_keeps_its_level_exact() {
    assert_eq!(
        limiter(quote!(limiter = "leaky_bucket", opts = [12907, 697853820])),
        Ok(built_in(Builtin::LeakyBucket, &[12_907, 697_853_820]))
    );
    assert_eq!(
        error(quote!(limiter = "leaky_bucket", opts = [12907, 697853821])),
        "`leaky_bucket` needs `limit * window` at most 9007199254740, found 9007199267647"
    );
    assert_eq!(
        error(quote!(
            limiter = "leaky_bucket",
            opts = [2147483647, 2147483647]
        )),
        "`leaky_bucket` needs `limit * window` at most 9007199254740, found \
         4611686014132420609"
    );
}

#[test]
fn gcra_burst_follows_the_script_rules() {
    assert_eq!(
        error(quote!(limiter = "gcra", opts = [5, 60, 6])),
        "`burst` must be at most `limit` (5), found 6"
    );
    assert_eq!(
        error(quote!(limiter = "gcra", opts = [5, 60, 0])),
        "expected a positive integer for `burst`"
    );
}

#[test]
fn multi_window_rates_are_limit_slash_window_strings() {
    let expected = "`multi_window` limits are `\"<limit>/<window>\"` strings, e.g. `\"5/3600\"`";
    for rate in [
        quote!(5),
        quote!("5"),
        quote!("5/"),
        quote!("/60"),
        quote!("0/60"),
        quote!("5/0"),
        quote!("05/60"),
        quote!("5/060"),
        quote!("+5/60"),
        quote!("5 / 60"),
        quote!("5/60s"),
        quote!("5/60/2"),
        quote!("-5/60"),
        quote!("five/60"),
        quote!(RATE),
    ] {
        assert_eq!(
            error(quote!(limiter = "multi_window", opts = [#rate])),
            expected,
            "{rate}"
        );
    }
    assert_eq!(
        error(quote!(limiter = "multi_window", opts = ["2147483648/60"])),
        "`limit` must be at most 2147483647"
    );
    assert_eq!(
        error(quote!(
            limiter = "multi_window",
            opts = ["5/99999999999999999999"]
        )),
        "`window` must be at most 2147483647"
    );
}

#[test]
fn multi_window_needs_a_rate_and_distinct_windows() {
    assert_eq!(
        error(quote!(limiter = "multi_window", opts = [])),
        "`multi_window` takes 1 or more options `[\"<limit>/<window>\", ...]`, found 0"
    );
    assert_eq!(
        error(quote!(
            limiter = "multi_window",
            opts = ["1/60", "5/3600", "10/60"]
        )),
        "window `60` appears twice"
    );
    // Every bad rate is reported; a malformed one takes no part in the repeat check.
    assert_eq!(
        error(quote!(
            limiter = "multi_window",
            opts = ["1/60", "x/60", "2/60", 3, "4/60"]
        )),
        "`multi_window` limits are `\"<limit>/<window>\"` strings, e.g. `\"5/3600\"`\n\
         window `60` appears twice\n\
         `multi_window` limits are `\"<limit>/<window>\"` strings, e.g. `\"5/3600\"`\n\
         window `60` appears twice"
    );
}

#[test]
fn cost_defaults_to_the_trait_and_is_kept() {
    assert_eq!(cost(quote!(opts = [10, 60])), Ok(None));
    assert_eq!(cost(quote!(opts = [10, 60], cost = 3)), Ok(Some(3)));
    assert_eq!(
        cost(quote!(
            cost = 2147483647,
            limiter = "gcra",
            opts = [10, 60, 5]
        )),
        Ok(Some(2_147_483_647))
    );
    for (name, opts) in [
        ("fixed_window", quote!([10, 60])),
        ("token_bucket", quote!([10, 60, 5])),
        ("sliding_window", quote!([10, 60])),
        ("sliding_log", quote!([10, 60])),
        ("leaky_bucket", quote!([10, 60])),
        ("gcra", quote!([10, 60, 5])),
        ("multi_window", quote!(["10/60"])),
    ] {
        assert_eq!(
            cost(quote!(limiter = #name, opts = #opts, cost = 2)),
            Ok(Some(2)),
            "{name}"
        );
    }
}

#[test]
fn cost_is_a_positive_integer() {
    assert_eq!(
        error(quote!(opts = [10, 60], cost = 0)),
        "`cost` must be at least 1; a zero-cost request would never be limited"
    );
    assert_eq!(
        error(quote!(opts = [10, 60], cost = -2)),
        "`cost` must be at least 1, found -2"
    );
    assert_eq!(
        error(quote!(cost = -2, opts = [10, 60])),
        "`cost` must be at least 1, found -2"
    );
    assert_eq!(
        error(quote!(opts = [10, 60], cost = 2147483648)),
        "`cost` must be at most 2147483647"
    );
    assert_eq!(
        error(quote!(opts = [10, 60], cost = 99999999999999999999999)),
        "`cost` must be at most 2147483647"
    );
}

#[test]
fn a_cost_is_checked_by_its_value_whatever_the_limiter() {
    // A name outside the catalogue may be a built-in registered under a name of its own:
    // `Builder::build` refuses a cost for a custom script, knowing which names run one.
    let costly = check(
        quote!(limiter = "hot", opts = [1000, 60], cost = 5),
        quote! { async fn handler() {} },
    )
    .map(|config| config.cost);
    assert_eq!(costly, Ok(Some(5)));
    assert_eq!(
        error(quote!(limiter = "quota", opts = [], cost = 0)),
        "`cost` must be at least 1; a zero-cost request would never be limited"
    );
    // A `limiter` that cannot be read is not taken for a custom one.
    let errors = check(
        quote!(limiter = gcra, opts = [1, 1, 1], cost = 0),
        quote! { async fn handler() {} },
    );
    assert_eq!(
        errors.err().as_deref(),
        Some(
            "expected a string literal, as in `limiter = \"token_bucket\"`\n\
             `cost` must be at least 1; a zero-cost request would never be limited"
        )
    );
}

#[test]
fn built_in_options_are_positive_integers() {
    assert_eq!(
        error(quote!(opts = ["10", 0])),
        "expected a positive integer for `limit`\nexpected a positive integer for `window`"
    );
    assert_eq!(
        error(quote!(opts = [-1, 1.5])),
        "expected a positive integer for `limit`\nexpected a positive integer for `window`"
    );
    assert_eq!(
        error(quote!(opts = [LIMIT, 60])),
        "expected a positive integer for `limit`"
    );
    assert_eq!(
        error(quote!(opts = [2147483648, 99999999999])),
        "`limit` must be at most 2147483647\n`window` must be at most 2147483647"
    );
    assert_eq!(
        limiter(quote!(opts = [2147483647, 0x10])),
        Ok(built_in(Builtin::FixedWindow, &[2_147_483_647, 16]))
    );
}

#[test]
fn burst_follows_the_script_rules() {
    assert_eq!(
        error(quote!(limiter = "token_bucket", opts = [5, 60, 10])),
        "`burst` must be at most `limit` (5), found 10"
    );
    assert_eq!(
        error(quote!(limiter = "token_bucket", opts = [5, 60, 0])),
        "expected a positive integer for `burst`"
    );
}

#[test]
fn custom_options_are_literals() {
    assert_eq!(
        error(quote!(limiter = "quota", opts = [1.5, LIMIT, "ok", true])),
        "expected an integer or string literal\n\
         expected an integer or string literal\n\
         expected an integer or string literal"
    );
    assert_eq!(
        error(quote!(limiter = "quota", opts = [9223372036854775808])),
        "expected an integer that fits in an `i64`"
    );
}

#[test]
fn limiter_names_follow_the_builder_rule() {
    assert_eq!(
        error(quote!(limiter = "my quota", opts = [])),
        "invalid limiter name `my quota`; expected no whitespace, `:`, control or invisible characters"
    );
    assert_eq!(
        error(quote!(limiter = "", opts = [])),
        "expected a limiter name, found an empty string"
    );
}

#[test]
fn empty_scope() {
    assert_eq!(
        error(quote!(opts = [1, 1], scope = "")),
        "expected a non-empty `scope`"
    );
}

#[test]
fn handler_rules() {
    assert_eq!(
        handler_error(quote!(
            fn handler() {}
        )),
        "expected an `async fn`"
    );
    assert_eq!(
        handler_error(quote!(
            async fn handler(&self) {}
        )),
        "`#[rate_limit]` handlers cannot take `self`; expected a free `async fn`"
    );
    assert_eq!(
        handler_error(quote!(
            async fn handler<S>(state: State<S>) {}
        )),
        "`#[rate_limit]` handlers cannot be generic"
    );
    assert_eq!(
        handler_error(quote!(
            async fn handler(state: State<S>)
            where
                S: Clone,
            {
            }
        )),
        "`#[rate_limit]` handlers cannot be generic"
    );
    assert_eq!(
        handler_error(quote!(
            async fn handler(body: impl FromRequest<()>) {}
        )),
        "`#[rate_limit]` handlers cannot be generic"
    );
}

#[test]
fn fifteen_arguments_at_most() {
    let fifteen = quote!(
        async fn handler(
            a: A,
            b: B,
            c: C,
            d: D,
            e: E,
            f: F,
            g: G,
            h: H,
            i: I,
            j: J,
            k: K,
            l: L,
            m: M,
            n: N,
            o: O,
        ) {
        }
    );
    assert_eq!(handler_error(fifteen), "no error");
    let sixteen = quote!(
        async fn handler(
            a: A,
            b: B,
            c: C,
            d: D,
            e: E,
            f: F,
            g: G,
            h: H,
            i: I,
            j: J,
            k: K,
            l: L,
            m: M,
            n: N,
            o: O,
            p: P,
        ) {
        }
    );
    assert_eq!(
        handler_error(sixteen),
        "`#[rate_limit]` handlers take at most 15 arguments (axum's 16 extractors, less the \
         rate limit), found 16"
    );
}

#[test]
fn every_independent_mistake_is_reported() {
    let errors = check(
        quote!(
            limiter = "token_bucket",
            opts = [0, 60, 5],
            cost = 0,
            scope = "",
            bogus = 1
        ),
        quote!(
            fn handler<T>() {}
        ),
    );
    assert_eq!(
        errors.err().as_deref(),
        Some(
            "unknown argument `bogus`; expected `limiter`, `opts`, `cost`, `key`, `scope`, `settle` or `count_if`\n\
             expected a positive integer for `limit`\n\
             `cost` must be at least 1; a zero-cost request would never be limited\n\
             expected a non-empty `scope`\n\
             expected an `async fn`\n\
             `#[rate_limit]` handlers cannot be generic"
        )
    );
    // A malformed `limiter` skips the options, which would be checked against another
    // limiter, and nothing else.
    let errors = check(
        quote!(limiter = token_bucket, opts = [20, 600, 5], scope = ""),
        quote!(
            fn handler() {}
        ),
    );
    assert_eq!(
        errors.err().as_deref(),
        Some(
            "expected a string literal, as in `limiter = \"token_bucket\"`\n\
             expected a non-empty `scope`\n\
             expected an `async fn`"
        )
    );
    let errors = check(
        quote!(opts = 10, opts = [1, 1]),
        quote! { async fn handler() {} },
    );
    assert_eq!(
        errors.err().as_deref(),
        Some(
            "expected an array of options, as in `opts = [10, 60]`\n\
             `opts` specified more than once"
        )
    );
}

/// Every built-in of the catalogue is one here, its options shown as many as it takes.
#[test]
fn every_built_in_of_the_catalogue_is_known_by_its_options() {
    for builtin in Builtin::ALL {
        let opts = built_in_opts(builtin.name()).unwrap_or_default();
        let counted = (!opts.contains("...")).then(|| opts.split(',').count());
        assert_eq!(counted, builtin.arity(), "{}: {opts}", builtin.name());
    }
    assert_eq!(built_in_opts("echo"), None);
}

#[test]
fn count_if_is_for_built_ins_that_spend_their_units() {
    let counted = check(
        quote!(opts = [5, 900], count_if = auth::failed),
        quote! { async fn handler() {} },
    )
    .map(|config| {
        config
            .count_if
            .map(|path| path.to_token_stream().to_string())
    });
    assert_eq!(counted, Ok(Some("auth :: failed".to_owned())));
    assert_eq!(
        error(quote!(
            limiter = "concurrency",
            opts = [3, 60],
            count_if = failed
        )),
        "`count_if` does not apply to `concurrency`: its units come back when each response ends"
    );
    // Refused at build for a custom script (`LimiterUse::takes`), not here.
    assert!(
        check(
            quote!(limiter = "quota", opts = [3], count_if = failed),
            quote! { async fn handler() {} }
        )
        .is_ok()
    );
    let settles = check(
        quote!(opts = [5, 900], cost = 50, settle),
        quote! { async fn handler() {} },
    )
    .map(|config| (config.cost, config.settle));
    assert_eq!(settles, Ok((Some(50), true)));
    assert!(
        check(
            quote!(limiter = "quota", opts = [3], settle),
            quote! { async fn handler() {} }
        )
        .is_ok()
    );
    assert_eq!(
        error(quote!(opts = [3, 60], settle = true)),
        "`settle` is a flag: write `settle`, with no value"
    );
    assert_eq!(
        error(quote!(opts = [3, 60], count_if = |s| true)),
        "expected the path of a `fn(StatusCode) -> bool`, as in `count_if = failed_login`"
    );
}

#[test]
fn concurrency_takes_a_limit_and_a_lease() {
    assert_eq!(
        limiter(quote!(limiter = "concurrency", opts = [3, 600])),
        Ok(built_in(Builtin::Concurrency, &[3, 600]))
    );
    assert_eq!(
        error(quote!(limiter = "concurrency", opts = [3])),
        "`concurrency` takes 2 options `[limit, lease]`, found 1"
    );
    assert_eq!(
        error(quote!(limiter = "concurrency", opts = [3, 0])),
        "expected a positive integer for `lease`"
    );
}

#[test]
fn calendar_quota_takes_a_limit_a_period_and_an_offset() {
    assert_eq!(
        limiter(quote!(
            limiter = "calendar_quota",
            opts = [10000, "month", -300]
        )),
        Ok(Limiter::Builtin {
            builtin: Builtin::CalendarQuota,
            opts: vec![
                Opt::Int(10_000),
                Opt::Str("month".to_owned()),
                Opt::Int(-300)
            ],
        })
    );
    assert_eq!(
        limiter(quote!(limiter = "calendar_quota", opts = [5, "week", 1439])),
        Ok(Limiter::Builtin {
            builtin: Builtin::CalendarQuota,
            opts: vec![Opt::Int(5), Opt::Str("week".to_owned()), Opt::Int(1439)],
        })
    );
    assert_eq!(
        error(quote!(limiter = "calendar_quota", opts = [10, "day"])),
        "`calendar_quota` takes 3 options `[limit, period, utc_offset_minutes]`, found 2"
    );
    assert_eq!(
        error(quote!(limiter = "calendar_quota", opts = [0, "year", 1440])),
        "expected a positive integer for `limit`\nexpected `\"day\"`, `\"week\"` or \
         `\"month\"` for `period`\nexpected an integer from -1439 to 1439 for \
         `utc_offset_minutes`"
    );
    assert_eq!(
        limiter(quote!(
            limiter = "calendar_quota",
            opts = [10, "day", "Asia/Kathmandu"]
        )),
        Ok(Limiter::Builtin {
            builtin: Builtin::CalendarQuota,
            opts: vec![
                Opt::Int(10),
                Opt::Str("day".to_owned()),
                Opt::Str("Asia/Kathmandu".to_owned())
            ],
        })
    );
    assert_eq!(
        error(quote!(
            limiter = "calendar_quota",
            opts = [10, "day", "Europe/Berln"]
        )),
        "expected an IANA time zone name (such as `\"Europe/Berlin\"`) for \
         `utc_offset_minutes`, found `\"Europe/Berln\"`"
    );
    assert_eq!(
        error(quote!(limiter = "calendar_quota", opts = [10, "day", "0"])),
        "expected an integer from -1439 to 1439 for `utc_offset_minutes`"
    );
    assert_eq!(
        cost(quote!(
            limiter = "calendar_quota",
            opts = [10, "day", 0],
            cost = 3
        )),
        Ok(Some(3))
    );
}

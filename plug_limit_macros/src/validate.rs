//! Meaning: the limiter and its options, and whether the item can be an axum handler. The
//! rules the built-in Lua scripts check at run time are checked here, at compile time.

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, ExprArray, ExprLit, ExprUnary, FnArg, ItemFn, Lit, LitStr, Type, UnOp};

use crate::errors::Errors;
use crate::parse::{Arg, Args, Cost};

/// axum implements `Handler` for up to 16 extractors, and the expansion adds one.
const MAX_ARGUMENTS: usize = 15;

/// The largest option or cost the built-in scripts accept: every value stays exact in Lua's
/// doubles and valid for `EXPIRE`.
const MAX_OPTION: u32 = i32::MAX as u32;

/// The largest `limit * window` of `lua/leaky_bucket.lua`, which keeps the bucket's level in
/// unit-milliseconds: 2^53 / 1000, so the level stays an exact integer in Lua's doubles.
const MAX_LEAKY_PRODUCT: u64 = 9_007_199_254_740;

/// A validated `#[rate_limit]`.
pub(crate) struct Config {
    pub(crate) limiter: Limiter,
    /// `None` leaves the `Limit` trait's default, 1.
    pub(crate) cost: Option<u32>,
    pub(crate) key: Option<Expr>,
    pub(crate) scope: Option<String>,
}

/// The limiter and its options, in the order of the script's `ARGV`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Limiter {
    FixedWindow { limit: u32, window: u32 },
    TokenBucket { limit: u32, window: u32, burst: u32 },
    SlidingWindow { limit: u32, window: u32 },
    SlidingLog { limit: u32, window: u32 },
    LeakyBucket { limit: u32, window: u32 },
    Gcra { limit: u32, window: u32, burst: u32 },
    MultiWindow { rates: Vec<Rate> },
    Custom { name: String, opts: Vec<Opt> },
}

/// One `"<limit>/<window>"` of `multi_window`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Rate {
    pub(crate) limit: u32,
    pub(crate) window: u32,
}

/// One option of a custom limiter.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opt {
    Int(i64),
    Str(String),
}

const FIXED_WINDOW: &str = "fixed_window";
const TOKEN_BUCKET: &str = "token_bucket";
const SLIDING_WINDOW: &str = "sliding_window";
const SLIDING_LOG: &str = "sliding_log";
const LEAKY_BUCKET: &str = "leaky_bucket";
const GCRA: &str = "gcra";
const MULTI_WINDOW: &str = "multi_window";

/// The options a built-in limiter takes, as its messages show them; `None` for any other
/// name, which is a custom limiter.
fn built_in_opts(name: &str) -> Option<&'static str> {
    match name {
        FIXED_WINDOW | SLIDING_WINDOW | SLIDING_LOG | LEAKY_BUCKET => Some("[limit, window]"),
        TOKEN_BUCKET | GCRA => Some("[limit, window, burst]"),
        MULTI_WINDOW => Some("[\"<limit>/<window>\", ...]"),
        _ => None,
    }
}

/// Checks the arguments and the item together, so one compile reports every mistake: a
/// malformed argument still lets the others, and the item, be checked.
pub(crate) fn config((args, mut errors): (Args, Errors), item: &ItemFn) -> syn::Result<Config> {
    let limiter = limiter(&args.limiter, &args.opts, &mut errors);
    let cost = match &args.cost {
        Arg::Given(cost) => errors.push(cost_for(cost, &args.limiter)),
        Arg::Absent | Arg::Malformed => None,
    };
    let scope = match &args.scope {
        Arg::Given(scope) => errors.push(non_empty_scope(scope)),
        Arg::Absent | Arg::Malformed => None,
    };
    let key = match args.key {
        Arg::Given(key) => Some(key),
        Arg::Absent | Arg::Malformed => None,
    };
    errors.push(handler(item));
    errors.finish_with(limiter.map(|limiter| Config {
        limiter,
        cost,
        key,
        scope,
    }))
}

fn limiter(name: &Arg<LitStr>, opts: &Arg<ExprArray>, errors: &mut Errors) -> Option<Limiter> {
    let name = match name {
        Arg::Absent => FIXED_WINDOW.to_owned(),
        // Checking the options against the default limiter would only add a misleading error.
        Arg::Malformed => return None,
        Arg::Given(lit) => {
            errors.push(limiter_name(lit));
            lit.value()
        }
    };
    match opts {
        Arg::Absent => {
            errors.add(missing_opts(&name));
            None
        }
        Arg::Malformed => None,
        Arg::Given(opts) => errors.push(match name.as_str() {
            FIXED_WINDOW => limit_window(FIXED_WINDOW, opts)
                .map(|[limit, window]| Limiter::FixedWindow { limit, window }),
            TOKEN_BUCKET => limit_window_burst(TOKEN_BUCKET, opts).map(|[limit, window, burst]| {
                Limiter::TokenBucket {
                    limit,
                    window,
                    burst,
                }
            }),
            SLIDING_WINDOW => limit_window(SLIDING_WINDOW, opts)
                .map(|[limit, window]| Limiter::SlidingWindow { limit, window }),
            SLIDING_LOG => limit_window(SLIDING_LOG, opts)
                .map(|[limit, window]| Limiter::SlidingLog { limit, window }),
            LEAKY_BUCKET => leaky_bucket(opts),
            GCRA => limit_window_burst(GCRA, opts).map(|[limit, window, burst]| Limiter::Gcra {
                limit,
                window,
                burst,
            }),
            MULTI_WINDOW => multi_window(opts),
            _ => custom(name, opts),
        }),
    }
}

fn missing_opts(name: &str) -> syn::Error {
    let message = match built_in_opts(name) {
        Some(opts) => format!("missing `opts = {opts}` for `{name}`"),
        None => format!("missing `opts = [...]` for the `{name}` limiter"),
    };
    syn::Error::new(Span::call_site(), message)
}

fn limit_window(limiter: &str, opts: &ExprArray) -> syn::Result<[u32; 2]> {
    positive(limiter, opts, ["limit", "window"])
}

/// The rules `lua/token_bucket.lua` and `lua/gcra.lua` check, so that options they would
/// refuse never compile: `burst` is at least 1 like every option, and at most `limit`.
fn limit_window_burst(limiter: &str, opts: &ExprArray) -> syn::Result<[u32; 3]> {
    let [limit, window, burst] = positive(limiter, opts, ["limit", "window", "burst"])?;
    if burst > limit {
        let span = opts.elems.last().map_or_else(|| opts.span(), Spanned::span);
        return Err(syn::Error::new(
            span,
            format!("`burst` must be at most `limit` ({limit}), found {burst}"),
        ));
    }
    Ok([limit, window, burst])
}

fn leaky_bucket(opts: &ExprArray) -> syn::Result<Limiter> {
    let [limit, window] = limit_window(LEAKY_BUCKET, opts)?;
    let product = u64::from(limit) * u64::from(window);
    if product > MAX_LEAKY_PRODUCT {
        return Err(syn::Error::new_spanned(
            opts,
            format!(
                "`{LEAKY_BUCKET}` needs `limit * window` at most {MAX_LEAKY_PRODUCT}, found \
                 {product}"
            ),
        ));
    }
    Ok(Limiter::LeakyBucket { limit, window })
}

/// The rules `lua/multi_window.lua` checks: one or more rates, no window twice.
fn multi_window(opts: &ExprArray) -> syn::Result<Limiter> {
    if opts.elems.is_empty() {
        return Err(syn::Error::new_spanned(
            opts,
            format!(
                "`{MULTI_WINDOW}` takes 1 or more options `[\"<limit>/<window>\", ...]`, found 0"
            ),
        ));
    }
    let mut errors = Errors::default();
    let mut rates: Vec<Rate> = Vec::with_capacity(opts.elems.len());
    for opt in &opts.elems {
        let Some(rate) = errors.push(rate(opt)) else {
            continue;
        };
        if rates.iter().any(|seen| seen.window == rate.window) {
            errors.add(syn::Error::new_spanned(
                opt,
                format!("window `{}` appears twice", rate.window),
            ));
        } else {
            rates.push(rate);
        }
    }
    errors.finish(Limiter::MultiWindow { rates })
}

/// One `"<limit>/<window>"`, in the script's form: canonical digits, so that the string the
/// script receives is the one written here.
fn rate(opt: &Expr) -> syn::Result<Rate> {
    let expected = || {
        syn::Error::new_spanned(
            opt,
            format!(
                "`{MULTI_WINDOW}` limits are `\"<limit>/<window>\"` strings, e.g. `\"5/3600\"`"
            ),
        )
    };
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = opt
    else {
        return Err(expected());
    };
    let value = lit.value();
    let Some((limit, window)) = value.split_once('/') else {
        return Err(expected());
    };
    let canonical = |digits: &str| {
        !digits.starts_with('0') && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    if !canonical(limit) || !canonical(window) {
        return Err(expected());
    }
    let bounded = |name: &str, digits: &str| match digits.parse::<u32>() {
        Ok(value) if value <= MAX_OPTION => Ok(value),
        _ => Err(syn::Error::new_spanned(
            opt,
            format!("`{name}` must be at most {MAX_OPTION}"),
        )),
    };
    Ok(Rate {
        limit: bounded("limit", limit)?,
        window: bounded("window", window)?,
    })
}

/// `cost` is an `ARGV` entry after the options, which only the built-in scripts read.
fn cost_for(cost: &Cost, limiter: &Arg<LitStr>) -> syn::Result<u32> {
    if let Arg::Given(name) = limiter
        && built_in_opts(&name.value()).is_none()
    {
        let mut argument = cost.name.to_token_stream();
        cost.value.to_tokens(&mut argument);
        return Err(syn::Error::new_spanned(
            argument,
            "`cost` needs a built-in limiter: a custom script gets `ARGV = opts`",
        ));
    }
    let value = &cost.value;
    if cost.digits.starts_with('-') {
        return Err(syn::Error::new_spanned(
            value,
            format!("`cost` must be at least 1, found {}", cost.digits),
        ));
    }
    match cost.digits.parse::<u32>() {
        Ok(0) => Err(syn::Error::new_spanned(
            value,
            "`cost` must be at least 1; a zero-cost request would never be limited",
        )),
        Ok(cost) if cost <= MAX_OPTION => Ok(cost),
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`cost` must be at most {MAX_OPTION}"),
        )),
    }
}

fn custom(name: String, opts: &ExprArray) -> syn::Result<Limiter> {
    let mut errors = Errors::default();
    let opts = opts
        .elems
        .iter()
        .filter_map(|opt| errors.push(custom_opt(opt)))
        .collect();
    errors.finish(Limiter::Custom { name, opts })
}

/// A custom limiter's name follows the rule `Builder::limiter` enforces, so that a name the
/// builder would refuse is refused here first.
fn limiter_name(lit: &LitStr) -> syn::Result<()> {
    let name = lit.value();
    if name.is_empty() {
        return Err(syn::Error::new_spanned(
            lit,
            "expected a limiter name, found an empty string",
        ));
    }
    if name.contains(|c: char| c.is_whitespace() || c == ':') {
        return Err(syn::Error::new_spanned(
            lit,
            format!("invalid limiter name `{name}`; expected no whitespace or `:`"),
        ));
    }
    Ok(())
}

/// The options of a built-in limiter: exactly `N` integers in `1..=2147483647`.
fn positive<const N: usize>(
    limiter: &str,
    opts: &ExprArray,
    names: [&str; N],
) -> syn::Result<[u32; N]> {
    if opts.elems.len() != N {
        return Err(syn::Error::new_spanned(
            opts,
            format!(
                "`{limiter}` takes {N} options `[{}]`, found {}",
                names.join(", "),
                opts.elems.len()
            ),
        ));
    }
    let mut errors = Errors::default();
    let mut values = [0; N];
    for ((value, name), opt) in values.iter_mut().zip(names).zip(&opts.elems) {
        if let Some(parsed) = errors.push(positive_opt(name, opt)) {
            *value = parsed;
        }
    }
    errors.finish(values)
}

fn positive_opt(name: &str, opt: &Expr) -> syn::Result<u32> {
    let expected =
        || syn::Error::new_spanned(opt, format!("expected a positive integer for `{name}`"));
    let Expr::Lit(ExprLit {
        lit: Lit::Int(int), ..
    }) = opt
    else {
        return Err(expected());
    };
    match int.base10_parse::<u32>() {
        Ok(0) => Err(expected()),
        Ok(value) if value <= MAX_OPTION => Ok(value),
        _ => Err(syn::Error::new_spanned(
            opt,
            format!("`{name}` must be at most {MAX_OPTION}"),
        )),
    }
}

fn custom_opt(opt: &Expr) -> syn::Result<Opt> {
    let (negative, lit) = match opt {
        Expr::Lit(ExprLit { lit, .. }) => (false, lit),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(ExprLit {
                lit: lit @ Lit::Int(_),
                ..
            }) => (true, lit),
            _ => return Err(not_a_literal(opt)),
        },
        _ => return Err(not_a_literal(opt)),
    };
    match lit {
        Lit::Str(s) => Ok(Opt::Str(s.value())),
        Lit::Int(int) => {
            let digits = if negative {
                format!("-{}", int.base10_digits())
            } else {
                int.base10_digits().to_owned()
            };
            digits.parse::<i64>().map(Opt::Int).map_err(|_| {
                syn::Error::new_spanned(opt, "expected an integer that fits in an `i64`")
            })
        }
        _ => Err(not_a_literal(opt)),
    }
}

fn not_a_literal(opt: &Expr) -> syn::Error {
    syn::Error::new_spanned(opt, "expected an integer or string literal")
}

fn non_empty_scope(scope: &LitStr) -> syn::Result<String> {
    let value = scope.value();
    if value.is_empty() {
        return Err(syn::Error::new_spanned(
            scope,
            "expected a non-empty `scope`",
        ));
    }
    Ok(value)
}

/// Whether the item can become an axum handler once the rate-limit argument is added.
pub(crate) fn handler(item: &ItemFn) -> syn::Result<()> {
    let sig = &item.sig;
    let mut errors = Errors::default();
    if sig.asyncness.is_none() {
        errors.add(syn::Error::new_spanned(
            sig.fn_token,
            "expected an `async fn`",
        ));
    }
    if let Some(receiver) = sig.receiver() {
        errors.add(syn::Error::new_spanned(
            receiver,
            "`#[rate_limit]` handlers cannot take `self`; expected a free `async fn`",
        ));
    }
    if !sig.generics.params.is_empty() {
        errors.add(generic(&sig.generics));
    } else if let Some(where_clause) = &sig.generics.where_clause {
        errors.add(generic(where_clause));
    }
    for arg in &sig.inputs {
        if let FnArg::Typed(typed) = arg
            && let Type::ImplTrait(impl_trait) = &*typed.ty
        {
            errors.add(generic(impl_trait));
        }
    }
    if let Some(extra) = sig.inputs.iter().nth(MAX_ARGUMENTS) {
        errors.add(syn::Error::new_spanned(
            extra,
            format!(
                "`#[rate_limit]` handlers take at most {MAX_ARGUMENTS} arguments (axum's 16 \
                 extractors, less the rate limit), found {}",
                sig.inputs.len()
            ),
        ));
    }
    errors.finish(())
}

fn generic(tokens: impl quote::ToTokens) -> syn::Error {
    syn::Error::new_spanned(tokens, "`#[rate_limit]` handlers cannot be generic")
}

#[cfg(test)]
mod tests {
    use proc_macro2::TokenStream;
    use quote::quote;

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
            Ok(Limiter::FixedWindow {
                limit: 10,
                window: 60
            })
        );
        assert_eq!(
            limiter(quote!(limiter = "token_bucket", opts = [20, 600, 5])),
            Ok(Limiter::TokenBucket {
                limit: 20,
                window: 600,
                burst: 5
            })
        );
        assert_eq!(
            limiter(quote!(limiter = "token_bucket", opts = [5, 1, 5])),
            Ok(Limiter::TokenBucket {
                limit: 5,
                window: 1,
                burst: 5
            })
        );
        assert_eq!(
            limiter(quote!(limiter = "sliding_window", opts = [100, 60])),
            Ok(Limiter::SlidingWindow {
                limit: 100,
                window: 60
            })
        );
        assert_eq!(
            limiter(quote!(limiter = "sliding_log", opts = [2147483647, 1])),
            Ok(Limiter::SlidingLog {
                limit: 2_147_483_647,
                window: 1
            })
        );
        assert_eq!(
            limiter(quote!(limiter = "leaky_bucket", opts = [10, 60])),
            Ok(Limiter::LeakyBucket {
                limit: 10,
                window: 60
            })
        );
        assert_eq!(
            limiter(quote!(limiter = "gcra", opts = [20, 60, 20])),
            Ok(Limiter::Gcra {
                limit: 20,
                window: 60,
                burst: 20
            })
        );
        assert_eq!(
            limiter(quote!(
                limiter = "multi_window",
                opts = ["1/5", "5/3600", "2147483647/2147483647"]
            )),
            Ok(Limiter::MultiWindow {
                rates: vec![
                    Rate {
                        limit: 1,
                        window: 5
                    },
                    Rate {
                        limit: 5,
                        window: 3600
                    },
                    Rate {
                        limit: 2_147_483_647,
                        window: 2_147_483_647
                    },
                ]
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
            Ok(Limiter::LeakyBucket {
                limit: 12_907,
                window: 697_853_820
            })
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
        let expected =
            "`multi_window` limits are `\"<limit>/<window>\"` strings, e.g. `\"5/3600\"`";
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
    fn cost_needs_a_built_in_limiter() {
        assert_eq!(
            error(quote!(
                limiter = "quota",
                opts = [1000, "monthly"],
                cost = 5
            )),
            "`cost` needs a built-in limiter: a custom script gets `ARGV = opts`"
        );
        // Whatever its value: a custom script never reads it.
        assert_eq!(
            error(quote!(limiter = "quota", opts = [], cost = 0)),
            "`cost` needs a built-in limiter: a custom script gets `ARGV = opts`"
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
            Ok(Limiter::FixedWindow {
                limit: 2_147_483_647,
                window: 16
            })
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
            "invalid limiter name `my quota`; expected no whitespace or `:`"
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
                "unknown argument `bogus`; expected `limiter`, `opts`, `cost`, `key` or `scope`\n\
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
}

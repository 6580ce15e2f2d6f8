//! Meaning: the limiter and its options, and whether the item can be an axum handler. The
//! rules the built-in Lua scripts check at run time are checked here, at compile time.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, ExprArray, ExprLit, ExprUnary, FnArg, ItemFn, Lit, LitStr, Type, UnOp};

use crate::errors::Errors;
use crate::parse::{Arg, Args};

/// axum implements `Handler` for up to 16 extractors, and the expansion adds one.
const MAX_ARGUMENTS: usize = 15;

/// The largest option the built-in scripts accept: every value stays exact in Lua's doubles
/// and valid for `EXPIRE`.
const MAX_OPTION: u32 = i32::MAX as u32;

/// A validated `#[rate_limit]`.
pub(crate) struct Config {
    pub(crate) limiter: Limiter,
    pub(crate) key: Option<Expr>,
    pub(crate) scope: Option<String>,
}

/// The limiter and its options, in the order of the script's `ARGV`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Limiter {
    FixedWindow { limit: u32, window: u32 },
    TokenBucket { limit: u32, window: u32, burst: u32 },
    Custom { name: String, opts: Vec<Opt> },
}

/// One option of a custom limiter.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opt {
    Int(i64),
    Str(String),
}

const FIXED_WINDOW: &str = "fixed_window";
const TOKEN_BUCKET: &str = "token_bucket";

/// Checks the arguments and the item together, so one compile reports every mistake: a
/// malformed argument still lets the others, and the item, be checked.
pub(crate) fn config((args, mut errors): (Args, Errors), item: &ItemFn) -> syn::Result<Config> {
    let limiter = limiter(&args.limiter, &args.opts, &mut errors);
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
            FIXED_WINDOW => fixed_window(opts),
            TOKEN_BUCKET => token_bucket(opts),
            _ => custom(name, opts),
        }),
    }
}

fn missing_opts(name: &str) -> syn::Error {
    let message = match name {
        FIXED_WINDOW => format!("missing `opts = [limit, window]` for `{FIXED_WINDOW}`"),
        TOKEN_BUCKET => format!("missing `opts = [limit, window, burst]` for `{TOKEN_BUCKET}`"),
        custom => format!("missing `opts = [...]` for the `{custom}` limiter"),
    };
    syn::Error::new(Span::call_site(), message)
}

fn fixed_window(opts: &ExprArray) -> syn::Result<Limiter> {
    let [limit, window] = positive(FIXED_WINDOW, opts, ["limit", "window"])?;
    Ok(Limiter::FixedWindow { limit, window })
}

/// The rules `lua/token_bucket.lua` checks, so that a bucket it would refuse never compiles.
fn token_bucket(opts: &ExprArray) -> syn::Result<Limiter> {
    let [limit, window, burst] = positive(TOKEN_BUCKET, opts, ["limit", "window", "burst"])?;
    if burst > limit {
        let span = opts.elems.last().map_or_else(|| opts.span(), Spanned::span);
        return Err(syn::Error::new(
            span,
            format!("`burst` must be at most `limit` ({limit}), found {burst}"),
        ));
    }
    Ok(Limiter::TokenBucket {
        limit,
        window,
        burst,
    })
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
                "unknown argument `bogus`; expected `limiter`, `opts`, `key` or `scope`\n\
                 expected a positive integer for `limit`\n\
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

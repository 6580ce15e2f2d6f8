//! Meaning: the limiter and its options, and whether the item can be an axum handler. The
//! rules the built-in Lua scripts check at run time are checked here, at compile time, by the
//! rules of `plug_limit_options`, worded for the attribute.

use plug_limit_options::{Builtin, MAX, MAX_LEAKY_PRODUCT, MAX_UTC_OFFSET, Rule};
use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, ExprArray, ExprLit, ExprUnary, FnArg, ItemFn, Lit, LitStr, Type, UnOp};

use crate::errors::Errors;
use crate::parse::{Arg, Args, Cost};

/// axum implements `Handler` for up to 16 extractors, and the expansion adds one.
const MAX_ARGUMENTS: usize = 15;

/// A validated `#[rate_limit]`.
pub(crate) struct Config {
    pub(crate) limiter: Limiter,
    /// `None` leaves the `Limit` trait's default, 1.
    pub(crate) cost: Option<u32>,
    pub(crate) key: Option<Expr>,
    pub(crate) scope: Option<String>,
    pub(crate) skip: Option<syn::Path>,
    pub(crate) count_if: Option<syn::Path>,
    /// `settle`: the cost is an estimate, settled to what the handler reports.
    pub(crate) settle: bool,
}

impl Config {
    /// Whether it holds a lease until the response ends (`concurrency`), which a stack's one
    /// call cannot.
    pub(crate) fn leases(&self) -> bool {
        matches!(&self.limiter, Limiter::Custom { name, .. }
            if Builtin::from_name(name).is_some_and(Builtin::leases))
    }
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

/// The default limiter.
const FIXED_WINDOW: &str = Builtin::FixedWindow.name();

/// The options a built-in limiter takes, as its messages show them; `None` for any other
/// name, which is a custom limiter.
fn built_in_opts(name: &str) -> Option<&'static str> {
    Builtin::from_name(name).map(Builtin::shown)
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
    let skip = match args.skip {
        Arg::Given(skip) => Some(skip),
        Arg::Absent | Arg::Malformed => None,
    };
    let count_if = match args.count_if {
        Arg::Given(count_if) => errors.push(settles_after("count_if", count_if, &args.limiter)),
        Arg::Absent | Arg::Malformed => None,
    };
    let settle = match args.settle {
        Arg::Given(settle) => errors
            .push(settles_after("settle", settle, &args.limiter))
            .is_some(),
        Arg::Absent | Arg::Malformed => false,
    };
    errors.push(handler(item));
    errors.finish_with(limiter.map(|limiter| Config {
        limiter,
        cost,
        key,
        scope,
        skip,
        count_if,
        settle,
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
        Arg::Given(opts) => errors.push(match Builtin::from_name(&name) {
            Some(builtin @ Builtin::FixedWindow) => positive(builtin, opts)
                .map(|[limit, window]| Limiter::FixedWindow { limit, window }),
            Some(builtin @ Builtin::TokenBucket) => {
                limit_window_burst(builtin, opts).map(|[limit, window, burst]| {
                    Limiter::TokenBucket {
                        limit,
                        window,
                        burst,
                    }
                })
            }
            Some(builtin @ Builtin::SlidingWindow) => positive(builtin, opts)
                .map(|[limit, window]| Limiter::SlidingWindow { limit, window }),
            Some(builtin @ Builtin::SlidingLog) => {
                positive(builtin, opts).map(|[limit, window]| Limiter::SlidingLog { limit, window })
            }
            Some(builtin @ Builtin::LeakyBucket) => leaky_bucket(builtin, opts),
            Some(builtin @ Builtin::Gcra) => {
                limit_window_burst(builtin, opts).map(|[limit, window, burst]| Limiter::Gcra {
                    limit,
                    window,
                    burst,
                })
            }
            Some(builtin @ Builtin::MultiWindow) => multi_window(builtin, opts),
            Some(builtin @ Builtin::CalendarQuota) => calendar_quota(builtin, opts),
            // Travels as the options it is written with, like `calendar_quota`.
            Some(builtin @ Builtin::Concurrency) => {
                positive(builtin, opts).map(|[limit, lease]| Limiter::Custom {
                    name: builtin.name().to_owned(),
                    opts: vec![Opt::Int(i64::from(limit)), Opt::Int(i64::from(lease))],
                })
            }
            None => custom(name, opts),
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

/// The rules `lua/token_bucket.lua` and `lua/gcra.lua` check, so that options they would
/// refuse never compile: `burst` is at least 1 like every option, and at most `limit`.
fn limit_window_burst(builtin: Builtin, opts: &ExprArray) -> syn::Result<[u32; 3]> {
    let [limit, window, burst] = positive(builtin, opts)?;
    if plug_limit_options::burst(u64::from(burst), u64::from(limit)).is_err() {
        let span = opts.elems.last().map_or_else(|| opts.span(), Spanned::span);
        return Err(syn::Error::new(
            span,
            format!("`burst` must be at most `limit` ({limit}), found {burst}"),
        ));
    }
    Ok([limit, window, burst])
}

fn leaky_bucket(builtin: Builtin, opts: &ExprArray) -> syn::Result<Limiter> {
    let [limit, window] = positive(builtin, opts)?;
    if plug_limit_options::leaky(u64::from(limit), u64::from(window)).is_err() {
        let product = u64::from(limit) * u64::from(window);
        return Err(syn::Error::new_spanned(
            opts,
            format!(
                "`{}` needs `limit * window` at most {MAX_LEAKY_PRODUCT}, found {product}",
                builtin.name()
            ),
        ));
    }
    Ok(Limiter::LeakyBucket { limit, window })
}

/// The rules `lua/multi_window.lua` checks: one or more rates, no window twice.
fn multi_window(builtin: Builtin, opts: &ExprArray) -> syn::Result<Limiter> {
    if opts.elems.is_empty() {
        return Err(syn::Error::new_spanned(
            opts,
            format!(
                "`{}` takes 1 or more options `{}`, found 0",
                builtin.name(),
                builtin.shown()
            ),
        ));
    }
    let mut errors = Errors::default();
    let mut rates: Vec<Rate> = Vec::with_capacity(opts.elems.len());
    for opt in &opts.elems {
        let Some(rate) = errors.push(rate(builtin, opt)) else {
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

/// The rules `lua/calendar_quota.lua` checks. Its options are not all positive integers, so
/// it travels as the options it is written with: the expansion of a limiter it has no variant
/// for.
fn calendar_quota(builtin: Builtin, opts: &ExprArray) -> syn::Result<Limiter> {
    let elems: Vec<&Expr> = opts.elems.iter().collect();
    let [limit, period_opt, offset_opt] = elems[..] else {
        return Err(wrong_count(builtin, opts));
    };
    let mut errors = Errors::default();
    let limit = errors.push(positive_opt("limit", limit));
    let period = errors.push(calendar_period(period_opt));
    let offset = errors.push(utc_offset(offset_opt));
    let opts = match (limit, period, offset) {
        (Some(limit), Some(period), Some(offset)) => Some(vec![
            Opt::Int(i64::from(limit)),
            Opt::Str(period),
            Opt::Int(offset),
        ]),
        _ => None,
    };
    errors.finish_with(opts.map(|opts| Limiter::Custom {
        name: builtin.name().to_owned(),
        opts,
    }))
}

fn calendar_period(opt: &Expr) -> syn::Result<String> {
    if let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = opt
        && plug_limit_options::period(&lit.value()).is_ok()
    {
        return Ok(lit.value());
    }
    Err(syn::Error::new_spanned(
        opt,
        "expected `\"day\"`, `\"week\"` or `\"month\"` for `period`",
    ))
}

fn utc_offset(opt: &Expr) -> syn::Result<i64> {
    match custom_opt(opt) {
        Ok(Opt::Int(n)) if plug_limit_options::utc_offset(n).is_ok() => Ok(n),
        _ => Err(syn::Error::new_spanned(
            opt,
            format!(
                "expected an integer from -{MAX_UTC_OFFSET} to {MAX_UTC_OFFSET} for \
                 `utc_offset_minutes`"
            ),
        )),
    }
}

/// One `"<limit>/<window>"`, in the script's form: canonical digits, so that the string the
/// script receives is the one written here.
fn rate(builtin: Builtin, opt: &Expr) -> syn::Result<Rate> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = opt
    else {
        return Err(not_a_rate(builtin, opt));
    };
    match plug_limit_options::rate(&lit.value()) {
        Ok((limit, window)) => Ok(Rate { limit, window }),
        Err(Rule::RateBound(name)) => Err(syn::Error::new_spanned(
            opt,
            format!("`{name}` must be at most {MAX}"),
        )),
        Err(_) => Err(not_a_rate(builtin, opt)),
    }
}

fn not_a_rate(builtin: Builtin, opt: &Expr) -> syn::Error {
    syn::Error::new_spanned(
        opt,
        format!(
            "`{}` limits are `\"<limit>/<window>\"` strings, e.g. `\"5/3600\"`",
            builtin.name()
        ),
    )
}

/// `cost` is an `ARGV` entry after the options, which only the built-in scripts read.
/// `count_if` and `settle` charge after the response what the admission reserved: built-ins
/// only (a custom script takes no refund), and not `concurrency`, whose units come back anyway.
fn settles_after(argument: &str, path: syn::Path, limiter: &Arg<LitStr>) -> syn::Result<syn::Path> {
    let name = match limiter {
        Arg::Given(name) => name.value(),
        Arg::Absent => FIXED_WINDOW.to_owned(),
        Arg::Malformed => return Ok(path),
    };
    if Builtin::from_name(&name).is_some_and(Builtin::leases) {
        return Err(syn::Error::new_spanned(
            path,
            format!(
                "`{argument}` does not apply to `concurrency`: its units come back when each \
                 response ends"
            ),
        ));
    }
    if built_in_opts(&name).is_none() {
        return Err(syn::Error::new_spanned(
            path,
            format!("`{argument}` needs a built-in limiter: a custom script takes no refund"),
        ));
    }
    Ok(path)
}

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
        Ok(cost) if cost <= MAX => Ok(cost),
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`cost` must be at most {MAX}"),
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

/// The options of a built-in limiter whose options are all counts (or a burst, checked after):
/// exactly `N` integers in `1..=2147483647`, named by the catalogue.
fn positive<const N: usize>(builtin: Builtin, opts: &ExprArray) -> syn::Result<[u32; N]> {
    if opts.elems.len() != N {
        return Err(wrong_count(builtin, opts));
    }
    let mut errors = Errors::default();
    let mut values = [0; N];
    for ((value, param), opt) in values.iter_mut().zip(builtin.params()).zip(&opts.elems) {
        if let Some(parsed) = errors.push(positive_opt(param.name, opt)) {
            *value = parsed;
        }
    }
    errors.finish(values)
}

/// A built-in's options, other than as many as it takes.
fn wrong_count(builtin: Builtin, opts: &ExprArray) -> syn::Error {
    syn::Error::new_spanned(
        opts,
        format!(
            "`{}` takes {} options `{}`, found {}",
            builtin.name(),
            builtin.params().len(),
            builtin.shown(),
            opts.elems.len()
        ),
    )
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
    let too_large = || syn::Error::new_spanned(opt, format!("`{name}` must be at most {MAX}"));
    let value = int.base10_parse::<u32>().map_err(|_| too_large())?;
    match plug_limit_options::count(u64::from(value)) {
        Ok(()) => Ok(value),
        Err(Rule::PositiveInteger) => Err(expected()),
        Err(_) => Err(too_large()),
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
mod tests;

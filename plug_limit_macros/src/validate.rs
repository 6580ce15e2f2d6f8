//! Meaning: the limiter and its options, and whether the item can be an axum handler. The
//! rules the built-in Lua scripts check at run time are checked here, at compile time, by the
//! rules of `plug_limit_options`, worded for the attribute.

use jiff::tz::TimeZone;
use plug_limit_options::{Builtin, Kind, MAX, MAX_LEAKY_PRODUCT, MAX_UTC_OFFSET, Param, Rule};
use proc_macro2::Span;
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
    pub(crate) count_if: Option<syn::Path>,
    /// `settle`: the cost is an estimate, settled to what the handler reports.
    pub(crate) settle: bool,
}

impl Config {
    /// Whether it holds a lease until the response ends (`concurrency`), which a stack's one
    /// call cannot.
    pub(crate) fn leases(&self) -> bool {
        matches!(self.limiter, Limiter::Builtin { builtin, .. } if builtin.leases())
    }
}

/// The limiter and its options, in the order of the script's `ARGV`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Limiter {
    /// A built-in, its options checked by the catalogue's rules (multi_window's rates as their
    /// canonical text).
    Builtin { builtin: Builtin, opts: Vec<Opt> },
    /// Any other name: a limiter the application registers.
    Custom { name: String, opts: Vec<Opt> },
}

/// One option, as the expansion writes it.
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
        Arg::Given(cost) => errors.push(cost_for(cost)),
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
            Some(builtin) if builtin.arity().is_none() => multi_window(builtin, opts),
            Some(builtin) => built_in(builtin, opts),
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

/// A built-in's options (a fixed number of them), each by its kind's rule, then the rules
/// between them (a burst at most the limit, leaky_bucket's `limit * window`): one compile
/// reports every option's mistake.
fn built_in(builtin: Builtin, opts: &ExprArray) -> syn::Result<Limiter> {
    let params = builtin.params();
    if opts.elems.len() != params.len() {
        return Err(wrong_count(builtin, opts));
    }
    let mut errors = Errors::default();
    let values: Vec<Option<Opt>> = params
        .iter()
        .zip(&opts.elems)
        .map(|(param, opt)| errors.push(option(param, opt)))
        .collect();
    let values = errors.finish_with(values.into_iter().collect::<Option<Vec<Opt>>>())?;
    let int = |position: usize| match values.get(position) {
        Some(Opt::Int(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    };
    for (position, (param, opt)) in params.iter().zip(&opts.elems).enumerate() {
        let (limit, value) = (int(0), int(position));
        match param.kind {
            Kind::Burst if plug_limit_options::burst(value, limit).is_err() => {
                return Err(syn::Error::new_spanned(
                    opt,
                    format!(
                        "`{}` must be at most `limit` ({limit}), found {value}",
                        param.name
                    ),
                ));
            }
            Kind::LeakyWindow if plug_limit_options::leaky(limit, value).is_err() => {
                return Err(syn::Error::new_spanned(
                    opts,
                    format!(
                        "`{}` needs `limit * window` at most {MAX_LEAKY_PRODUCT}, found {}",
                        builtin.name(),
                        limit * value
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(Limiter::Builtin {
        builtin,
        opts: values,
    })
}

/// One option of a built-in, by its kind's rule.
fn option(param: &Param, opt: &Expr) -> syn::Result<Opt> {
    match param.kind {
        Kind::Count | Kind::Burst | Kind::LeakyWindow => {
            positive_opt(param.name, opt).map(|n| Opt::Int(i64::from(n)))
        }
        Kind::Period => calendar_period(opt).map(Opt::Str),
        Kind::UtcOffset => utc_offset(opt),
        // Rates are multi_window's, read by `multi_window`.
        Kind::Rate => Err(syn::Error::new_spanned(opt, "expected a rate")),
    }
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
    let mut rates: Vec<(u32, u32)> = Vec::with_capacity(opts.elems.len());
    for opt in &opts.elems {
        let Some((limit, window)) = errors.push(rate(builtin, opt)) else {
            continue;
        };
        if rates.iter().any(|(_, seen)| *seen == window) {
            errors.add(syn::Error::new_spanned(
                opt,
                format!("window `{window}` appears twice"),
            ));
        } else {
            rates.push((limit, window));
        }
    }
    let opts = rates
        .into_iter()
        .map(|(limit, window)| Opt::Str(format!("{limit}/{window}")))
        .collect();
    errors.finish(Limiter::Builtin { builtin, opts })
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

/// calendar_quota's third option: minutes from UTC, or the name of a time zone the tz
/// database (the one plug_limit bundles, through jiff) knows.
fn utc_offset(opt: &Expr) -> syn::Result<Opt> {
    match custom_opt(opt) {
        Ok(Opt::Int(n)) if plug_limit_options::utc_offset(n).is_ok() => Ok(Opt::Int(n)),
        Ok(Opt::Str(name)) if plug_limit_options::is_zone_form(&name) => {
            if plug_limit_options::zone_name(&name).is_ok() && TimeZone::get(&name).is_ok() {
                return Ok(Opt::Str(name));
            }
            Err(syn::Error::new_spanned(
                opt,
                format!(
                    "expected an IANA time zone name (such as `\"Europe/Berlin\"`) for \
                     `utc_offset_minutes`, found `\"{}\"`",
                    plug_limit_options::excerpt(&name)
                ),
            ))
        }
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
fn rate(builtin: Builtin, opt: &Expr) -> syn::Result<(u32, u32)> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = opt
    else {
        return Err(not_a_rate(builtin, opt));
    };
    match plug_limit_options::rate(&lit.value()) {
        Ok(rate) => Ok(rate),
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
/// only (a custom script takes no refund, which `Builder::build` checks, knowing which names
/// run one), and not `concurrency`, whose units come back anyway.
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
    // A name outside the catalogue may be a built-in registered under a name of its own:
    // `Builder::build` refuses it for a custom script (`LimiterUse::takes`).
    Ok(path)
}

/// A cost's value. For any limiter: a name outside the catalogue may be a built-in registered
/// under a name of its own, and `Builder::build` refuses a cost for a custom script.
fn cost_for(cost: &Cost) -> syn::Result<u32> {
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
    if !name.chars().all(plug_limit_options::limiter_name_char) {
        return Err(syn::Error::new_spanned(
            lit,
            format!(
                "invalid limiter name `{}`; expected no whitespace, `:`, control or invisible characters",
                plug_limit_options::excerpt(&name)
            ),
        ));
    }
    Ok(())
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

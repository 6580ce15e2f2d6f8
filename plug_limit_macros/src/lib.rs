//! Procedural macros for `plug_limit`: the `#[rate_limit]` handler attribute.
//!
//! Use it as `plug_limit::rate_limit`; the expansion names `::plug_limit` paths, so this crate
//! is not meant to be used on its own.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod errors;
mod expand;
mod parse;
mod stack;
mod validate;

use proc_macro::TokenStream;
use quote::quote;

/// Rate-limits an axum handler.
///
/// The limit is checked before the handler runs. Once it is reached the request is rejected
/// (by default `429 Too Many Requests` with the rate-limit headers) and the handler does not
/// run; otherwise the `x-ratelimit-*` headers are added to whatever the handler returns, an
/// `Err` included. The `PlugLimit` comes from the router state, which needs
/// `PlugLimit: FromRef<State>` (a `PlugLimit` field and `#[derive(FromRef)]`).
///
/// ```
/// use axum::{extract::FromRef, routing::get, Router};
/// use plug_limit::{rate_limit, PlugLimit};
///
/// #[derive(Clone, FromRef)]
/// struct AppState {
///     limits: PlugLimit,
/// }
///
/// // 10 requests a minute per client: the fixed window limiter is the default.
/// #[rate_limit(opts = [10, 60])]
/// async fn search() -> &'static str {
///     "results"
/// }
///
/// // Bursts of 5, at most 20 requests per 10 minutes.
/// #[rate_limit(limiter = "token_bucket", opts = [20, 600, 5])]
/// async fn export() -> &'static str {
///     "exported"
/// }
///
/// fn app(limits: PlugLimit) -> Router {
///     Router::new()
///         .route("/search", get(search))
///         .route("/export", get(export))
///         .with_state(AppState { limits })
/// }
/// # let _ = app;
/// ```
///
/// # Arguments
///
/// | argument | default | what it sets |
/// |---|---|---|
/// | `limiter = "<name>"` | `"fixed_window"` | the limiter: a built-in (`fixed_window`, `token_bucket`, `sliding_window`, `sliding_log`, `leaky_bucket`, `gcra`, `multi_window`, `calendar_quota`, `concurrency`; see below), or one registered with `Builder::limiter` |
/// | `opts = [..]` | required | the limiter's options, in the order of its script's `ARGV` |
/// | `cost = <integer>` | `1` | how many units one request to this handler consumes; built-in limiters only (a limiter outside the catalogue may be one under a name of its own: `Builder::build` refuses a custom script's) |
/// | `key = <extractor>` | the limiter's key, else the `PlugLimit`'s | who a request is counted against: a `KeyExtractor` |
/// | `scope = "<name>"` | the matched route, as for `RateLimited<L>` | the budget the requests count against |
/// | `settle` | off | the `cost` is an estimate, reserved at admission; once the response ends, the request is charged what the handler reported through `Usage` instead; built-in limiters but `concurrency` only |
/// | `count_if = <path>` | every response counts | a `fn(StatusCode) -> bool`: a response for which it is `false` gets its request's cost back once it is sent (count failed logins only, or no 5xx); built-in limiters but `concurrency` only |
///
/// ## `limiter` and `opts`
///
/// The numbers the built-in limiters take are integers from 1 to 2147483647 (`window` is in
/// seconds), and the rules their scripts (`lua/<name>.lua`) check at run time are checked at
/// compile time:
///
/// - `fixed_window`: `[limit, window]`, at most `limit` requests per `window` seconds, the
///   count restarting with each window.
/// - `token_bucket`: `[limit, window, burst]`, bursts of up to `burst` requests, at most
///   `limit` per `window` seconds; `burst` is between 1 and `limit`.
/// - `sliding_window`: `[limit, window]`, about `limit` requests in any `window` seconds,
///   estimated from the counts of the current and the previous window.
/// - `sliding_log`: `[limit, window]`, at most `limit` requests in any `window` seconds,
///   exactly: Redis keeps one entry per request in the window.
/// - `leaky_bucket`: `[limit, window]`, a bucket of `limit` requests that leaks `limit` per
///   `window` seconds; `limit * window` is at most 9007199254740.
/// - `gcra`: `[limit, window, burst]`, `limit` requests per `window` seconds evenly spaced,
///   with bursts of up to `burst`; `burst` is between 1 and `limit`, and
///   `x-ratelimit-limit` is the burst.
/// - `multi_window`: `["<limit>/<window>", ...]`, several fixed windows at once: one or more
///   strings, each window different. A request must fit in every window and counts in each.
/// - `calendar_quota`: `[limit, period, utc_offset_minutes]`, at most `limit` units per
///   calendar `"day"`, `"week"` or `"month"` at an offset from UTC from -1439 to 1439 minutes,
///   or in an IANA time zone (`"Europe/Berlin"`, checked at compile time against the tz
///   database plug_limit bundles).
/// - `concurrency`: `[limit, lease]`, at most `limit` requests in flight; each holds a lease
///   until its response body ends, or for `lease` seconds at most. It cannot be stacked.
///
/// ```
/// use plug_limit::rate_limit;
///
/// // One request every 5 seconds, and 100 an hour.
/// #[rate_limit(limiter = "multi_window", opts = ["1/5", "100/3600"])]
/// async fn send_code() -> &'static str {
///     "sent"
/// }
///
/// // 10 requests a second on average, in bursts of at most 20.
/// #[rate_limit(limiter = "gcra", opts = [600, 60, 20])]
/// async fn quote() -> &'static str {
///     "quoted"
/// }
/// ```
///
/// A custom limiter takes integer and string literals, handed to its Lua script as `ARGV`:
///
/// ```no_run
/// use axum::{extract::FromRef, routing::post, Router};
/// use plug_limit::{rate_limit, BuildError, Limiter, PlugLimit};
///
/// #[derive(Clone, FromRef)]
/// struct AppState {
///     limits: PlugLimit,
/// }
///
/// #[rate_limit(limiter = "quota", opts = [1000, "monthly"])]
/// async fn upload() -> &'static str {
///     "stored"
/// }
///
/// const QUOTA: &str = "-- KEYS[1]: the key, ARGV: [1000, 'monthly']
///     return {'allow', {ARGV[1], ARGV[2]}}";
///
/// fn app(pool: deadpool_redis::Pool) -> Result<Router, BuildError> {
///     let limits = PlugLimit::builder(pool)
///         .limiter("quota", Limiter::script(QUOTA).headers(["x-quota", "x-quota-period"]))
///         .build()?;
///     Ok(Router::new()
///         .route("/upload", post(upload))
///         .with_state(AppState { limits }))
/// }
/// # let _ = app;
/// ```
///
/// A limiter that is neither built in nor registered is refused when the application starts:
/// `Builder::build` returns an error naming the handler and the limiter (unless
/// `Builder::check_handlers(false)`), and `PlugLimit::redis`, which registers only the
/// built-ins, logs it as a warning. It never waits for the handler's first request.
///
/// ## `cost`
///
/// A request to the handler consumes `cost` units of its budget instead of one, so that
/// expensive handlers run out sooner: with a budget of 100 and `cost = 10`, ten requests pass.
/// It is an integer from 1 to 2147483647, and needs a built-in limiter, whose script reads it
/// after the options; a custom script gets only its `opts`.
///
/// ```
/// use plug_limit::rate_limit;
///
/// // A report counts as 10 of the client's 100 requests a minute.
/// #[rate_limit(opts = [100, 60], cost = 10, scope = "api")]
/// async fn report() -> &'static str {
///     "report"
/// }
///
/// #[rate_limit(opts = [100, 60], scope = "api")]
/// async fn status() -> &'static str {
///     "ok"
/// }
/// ```
///
/// ## `key`
///
/// Any `KeyExtractor` that can be a constant: the constructors of `plug_limit::key`, or the
/// path of a function `fn(&Parts) -> Result<K, KeyError>`.
///
/// ```
/// use axum::http::request::Parts;
/// use plug_limit::{key, rate_limit};
/// use plug_limit::key::KeyError;
///
/// // One budget per API key.
/// #[rate_limit(opts = [100, 3600], key = key::header("x-api-key"))]
/// async fn api() -> &'static str {
///     "data"
/// }
///
/// fn tenant(parts: &Parts) -> Result<String, KeyError> {
///     parts
///         .uri
///         .host()
///         .map(str::to_owned)
///         .ok_or_else(|| KeyError::new("request has no host"))
/// }
///
/// // One budget per tenant.
/// #[rate_limit(opts = [1000, 3600], key = tenant)]
/// async fn report() -> &'static str {
///     "report"
/// }
/// ```
///
/// ## `scope`
///
/// Each route has a budget of its own, named after its matched route (`/users/{id}`, not the
/// path asked for), as with `RateLimited<L>` and `RateLimitLayer`: a handler mounted on two
/// routes counts each apart. Routes share one only when their handlers name the same scope:
///
/// ```
/// use plug_limit::rate_limit;
///
/// // Five attempts a minute per client across both ways to log in.
/// #[rate_limit(opts = [5, 60], scope = "login")]
/// async fn login_form() -> &'static str {
///     "welcome"
/// }
///
/// #[rate_limit(opts = [5, 60], scope = "login")]
/// async fn login_api() -> &'static str {
///     "token"
/// }
/// ```
///
/// The scope is part of every key of the limit, so changing a route's pattern without a
/// `scope` starts its budget afresh; moving or renaming its handler does not. Two ways of
/// limiting one route with the same limiter and options (this attribute and a
/// `RateLimitLayer`, or a `RateLimited<L>`) count one budget, as they count one limit; a
/// request no route matched (a fallback, a `nest_service`) counts under the scope `*`, one
/// budget for every such handler of a limit: name a scope to keep them apart. To let some requests through uncounted (health checks,
/// monitoring), give the handle or the limiter `Rules` with a `skip` predicate.
///
/// # Handlers
///
/// The handler stays as written: any extractors (`State`, `Path`, `Json` last, ...), `return`
/// and `?`, and any return type that implements `IntoResponse`: plain types, `Result`,
/// `impl IntoResponse`, tuples.
///
/// ```
/// use axum::{extract::{FromRef, Path, State}, http::StatusCode, routing::put, Json, Router};
/// use plug_limit::{rate_limit, PlugLimit};
///
/// #[derive(Clone, FromRef)]
/// struct AppState {
///     limits: PlugLimit,
///     names: Vec<String>,
/// }
///
/// #[rate_limit(limiter = "token_bucket", opts = [20, 600, 5])]
/// async fn rename(
///     State(names): State<Vec<String>>,
///     Path(id): Path<usize>,
///     Json(name): Json<String>,
/// ) -> Result<Json<String>, (StatusCode, &'static str)> {
///     let old = names.get(id).ok_or((StatusCode::NOT_FOUND, "no such name"))?;
///     if name.is_empty() {
///         return Err((StatusCode::UNPROCESSABLE_ENTITY, "empty name"));
///     }
///     Ok(Json(format!("{old} -> {name}")))
/// }
///
/// fn app(state: AppState) -> Router {
///     Router::new().route("/names/{id}", put(rename)).with_state(state)
/// }
/// # let _ = app;
/// ```
///
/// It must be an `async fn` without `self` or generics, with at most 15 arguments: the
/// attribute adds one, and axum handlers take at most 16.
///
/// ## With `#[axum::debug_handler]`
///
/// Put `#[rate_limit]` first, so that `debug_handler` checks the handler as axum will call
/// it. The other order does not compile: `debug_handler` would check a call with one argument
/// too few. Without a `State` argument, `debug_handler` cannot infer the state the rate limit
/// needs; name it:
///
/// ```
/// use axum::{debug_handler, extract::FromRef};
/// use plug_limit::{rate_limit, PlugLimit};
///
/// #[derive(Clone, FromRef)]
/// struct AppState {
///     limits: PlugLimit,
/// }
///
/// #[rate_limit(opts = [10, 60])]
/// #[debug_handler(state = AppState)]
/// async fn checked() -> &'static str {
///     "checked"
/// }
/// ```
///
/// The same holds for other attributes that read the arguments, such as
/// `#[tracing::instrument]`, except that they go *above* `#[rate_limit]` to see the arguments
/// as written.
///
/// # Stacking
///
/// Several `#[rate_limit]` attributes on one handler (up to six) are one stack: the limits are
/// checked at once, in one backend call that consumes from every limit only if every limit
/// allows (see `plug_limit::Limits`). Each attribute takes the arguments above; a
/// `concurrency` limit cannot be stacked. A limit of the stack with `count_if` or
/// `settle` is settled by its own script once the response ends, as it is alone; the limits
/// that `settle` share the handler's one `Usage`, so they must have one `cost`.
///
/// ```
/// use plug_limit::{key, rate_limit};
///
/// // Per client, per tenant and for everyone: one round trip to Redis.
/// #[rate_limit(limiter = "token_bucket", opts = [10, 1, 5])]
/// #[rate_limit(opts = [1000, 86400], key = key::header("x-tenant"), scope = "tenant")]
/// #[rate_limit(opts = [5000, 60], key = key::global(), scope = "everyone")]
/// async fn search() -> &'static str {
///     "results"
/// }
/// ```
///
/// The first attribute expands them all, as `RateLimited<(A, B, C)>`.
///
/// # Expansion
///
/// The attribute generates a hidden type implementing `Limit` (the limiter, its options, the
/// key and the scope), adds a `RateLimited` of that type as the first argument, and moves the
/// body into an inner function with the original signature:
///
/// ```text
/// struct __rate_limit_search {}
/// impl plug_limit::Limit for __rate_limit_search { /* LIMITER, OPTS, COST, SCOPE, KEY */ }
///
/// async fn search(limited: RateLimited<__rate_limit_search>, /* the arguments */) -> Response {
///     async fn search(/* the arguments as written */) -> &'static str { "results" }
///     (limited, search(/* .. */).await).into_response()
/// }
/// ```
///
/// So the handler takes one more argument than written: test it through the `Router`, as
/// axum recommends, rather than by calling it.
///
/// # Errors
///
/// Mistakes are compile errors, all reported at once and pointing at the argument at fault:
/// an unknown or repeated argument, missing `opts`, the wrong number of options for a built-in
/// limiter, an option that is not a positive integer, a `burst` above `limit`, a
/// `leaky_bucket` whose `limit * window` is too large, a `multi_window` limit that is not
/// `"<limit>/<window>"` or repeats a window, a `cost` of 0 or with a custom limiter, a
/// function that is not `async`, takes `self`, is generic or has too many arguments.
///
/// ```compile_fail
/// # use plug_limit::rate_limit;
/// // `burst` must be at most `limit` (5), found 10
/// #[rate_limit(limiter = "token_bucket", opts = [5, 60, 10])]
/// async fn handler() {}
/// ```
#[proc_macro_attribute]
pub fn rate_limit(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match try_expand(args.into(), item.clone()) {
        Ok(tokens) => tokens.into(),
        Err(error) => {
            // The function as written comes with the errors, so that its callers and the IDE
            // see no second, misleading error about a missing item.
            let error = error.into_compile_error();
            quote!(#item #error).into()
        }
    }
}

fn try_expand(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> syn::Result<proc_macro2::TokenStream> {
    let mut item: syn::ItemFn = syn::parse2(item)?;
    let siblings = stack::take_siblings(&mut item)?;
    let (args, errors) = parse::args(args);
    if let Some((_, span)) = siblings.get(stack::MAX_LIMITS - 1) {
        return Err(syn::Error::new(
            *span,
            format!(
                "at most {} `#[rate_limit]` attributes stack on one handler, found {}",
                stack::MAX_LIMITS,
                siblings.len() + 1
            ),
        ));
    }
    let mut configs = vec![validate::config((args, errors), &item)];
    for (args, _) in siblings {
        let (args, errors) = parse::args(args);
        configs.push(validate::config((args, errors), &item));
    }
    // Every attribute's errors at once.
    let mut errors = errors::Errors::default();
    let configs: Vec<_> = configs
        .into_iter()
        .filter_map(|config| errors.push(config))
        .collect();
    let configs = errors.finish(configs)?;
    if configs.len() > 1 && configs.iter().any(validate::Config::leases) {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "a `concurrency` limit cannot be stacked: a stack is one call, and its lease \
             outlives it",
        ));
    }
    let mut settling = configs
        .iter()
        .filter(|config| config.settle)
        .map(|config| config.cost.unwrap_or(1));
    if let Some(first) = settling.next()
        && settling.any(|cost| cost != first)
    {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "the limits of a stack that `settle` are settled to one `Usage`: give them one `cost`",
        ));
    }
    Ok(expand::handler(&configs, item))
}

// The README's examples compile as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

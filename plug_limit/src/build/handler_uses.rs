//! The limiters this program's `#[rate_limit]` handlers name, checked when a
//! [`PlugLimit`](crate::PlugLimit) is built rather than at a handler's first request.

use crate::algorithm::Builtin;
use plug_limit_options::excerpt;

use crate::error::BuildError;

/// A `#[rate_limit]` handler naming a limiter that is not built in. Every such handler submits
/// one (through `inventory`), so a [`PlugLimit`](crate::PlugLimit) missing the limiter is
/// refused when it is built.
#[derive(Debug)]
pub struct LimiterUse {
    /// The limiter's name.
    pub limiter: &'static str,
    /// The handler's path, e.g. `app::routes::login`.
    pub handler: &'static str,
    /// The limiter is one of several stacked on the handler: it must be able to stack.
    pub stacked: bool,
    /// The first argument the handler gives it that only a built-in takes (`cost`,
    /// `count_if`, `settle`), or `""`: a custom script takes no cost and no refund.
    pub takes: &'static str,
}

inventory::collect!(LimiterUse);

/// The first handler in this program whose limiter `is_registered` does not know.
pub(crate) fn check_limiters(is_registered: impl Fn(&str) -> bool) -> Result<(), BuildError> {
    first_refused(inventory::iter::<LimiterUse>, |used| {
        (!is_registered(used.limiter)).then(|| {
            format!(
                "handler `{}` uses limiter `{}`, which is not registered",
                used.handler,
                excerpt(used.limiter)
            )
        })
    })
}

/// The first handler in this program that stacks a limiter which `cannot_stack` says cannot
/// be stacked, and why.
pub(crate) fn check_stacked(
    cannot_stack: impl Fn(&str) -> Option<&'static str>,
) -> Result<(), BuildError> {
    first_refused(inventory::iter::<LimiterUse>, |used| {
        let why = cannot_stack(used.limiter).filter(|_| used.stacked)?;
        Some(format!(
            "handler `{}` stacks limiter `{}`, which {why}",
            used.handler,
            excerpt(used.limiter)
        ))
    })
}

/// The first handler in this program that gives a limiter which `is_custom` says runs a
/// custom script what only a built-in takes.
pub(crate) fn check_takes(is_custom: impl Fn(&str) -> bool) -> Result<(), BuildError> {
    first_refused(inventory::iter::<LimiterUse>, |used| {
        taken(used, &is_custom)
    })
}

/// Why `used` gives a custom script what only a built-in takes, if it does.
fn taken(used: &LimiterUse, is_custom: &impl Fn(&str) -> bool) -> Option<String> {
    (!used.takes.is_empty() && is_custom(used.limiter)).then(|| {
        format!(
            "handler `{}` gives limiter `{}` a `{}`, which a custom script does not take: only built-in limiters do",
            used.handler,
            excerpt(used.limiter),
            used.takes
        )
    })
}

/// The first of `uses` that `refuse` words a refusal of, by limiter name then handler path
/// (so the error is the same on every run), as the error of its limiter's field.
fn first_refused<'a>(
    uses: impl IntoIterator<Item = &'a LimiterUse>,
    refuse: impl Fn(&LimiterUse) -> Option<String>,
) -> Result<(), BuildError> {
    let refused = uses
        .into_iter()
        .filter_map(|used| Some((used, refuse(used)?)))
        .min_by_key(|(used, _)| (used.limiter, used.handler));
    match refused {
        None => Ok(()),
        Some((used, rule)) => Err(BuildError::invalid(
            format!("limiters.{}", excerpt(used.limiter)),
            rule,
        )),
    }
}

/// Warns, once for the first of them, when a `#[rate_limit]` handler of this program uses a
/// limiter that is not built in: the check of the constructors with the default settings,
/// which have no error to return and register no custom limiter.
pub(crate) fn warn_unless_builtin() {
    if let Err(error) = check_limiters(|name| Builtin::from_name(name).is_some()) {
        tracing::warn!(
            target: "plug_limit",
            "{error}: a PlugLimit made with the default settings knows only the built-in limiters; register the others with PlugLimit::builder, or serve that handler with another PlugLimit"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn used(limiter: &'static str, takes: &'static str) -> LimiterUse {
        LimiterUse {
            limiter,
            handler: "app::handler",
            stacked: false,
            takes,
        }
    }

    /// A custom script given a cost or a refund is refused; a built-in under a name of its
    /// own, and a custom script given neither, are not.
    #[test]
    fn only_a_custom_script_given_a_cost_or_a_refund_is_refused() {
        let is_custom = |name: &str| name == "quota";
        let uses = [
            used("hot", "cost"),
            used("quota", ""),
            used("quota", "settle"),
        ];
        assert_eq!(
            first_refused(&uses, |used| taken(used, &is_custom))
                .unwrap_err()
                .to_string(),
            "invalid `limiters.quota`: handler `app::handler` gives limiter `quota` a `settle`, which a custom script does not take: only built-in limiters do"
        );
        assert!(first_refused(&uses[..2], |used| taken(used, &is_custom)).is_ok());
    }
}

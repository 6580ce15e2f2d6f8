//! `#[rate_limit(resolver = R)]`: the handler's limit is the one the `ResolveLimit` type `R`
//! chooses per request, so no other argument describes it.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::{ItemFn, Path};

use crate::errors::Errors;
use crate::parse::{Arg, Args};

/// The resolver, once no argument it excludes is given and the item can be a handler; `None`
/// when the attribute names no resolver.
pub(crate) fn config(args: &Args, errors: &mut Errors, item: &ItemFn) -> Option<syn::Result<Path>> {
    let resolver = match &args.resolver {
        Arg::Given(resolver) => resolver,
        Arg::Absent => return None,
        // Reported already; checking the rest as a limiter's arguments would only add errors.
        Arg::Malformed => return Some(std::mem::take(errors).finish_with(None)),
    };
    let excluded = [
        ("limiter", args.limiter.given(|lit| lit.span())),
        ("opts", args.opts.given(|opts| opts.span())),
        ("cost", args.cost.given(|cost| cost.name.span())),
        ("key", args.key.given(|key| key.span())),
        ("scope", args.scope.given(|scope| scope.span())),
        ("skip", args.skip.given(|skip| skip.span())),
        ("count_if", args.count_if.given(|count_if| count_if.span())),
        ("settle", args.settle.given(|settle| settle.span())),
    ];
    for (name, span) in excluded {
        if let Some(span) = span {
            errors.add(syn::Error::new(
                span,
                format!(
                    "`{name}` cannot be used with `resolver`: the `RuntimeLimit` the resolver \
                     returns sets the limiter, options, cost, key, scope and what counts, and `None` \
                     leaves a request unlimited"
                ),
            ));
        }
    }
    errors.push(crate::validate::handler(item));
    let errors = std::mem::take(errors);
    Some(errors.finish(resolver.clone()))
}

/// The extractor of a handler limited by `resolver`.
pub(crate) fn limited_ty(resolver: &Path) -> TokenStream {
    // Spanned on the path: a type that is not a `ResolveLimit` of the state is reported there.
    let resolved = quote_spanned!(resolver.span()=> ::plug_limit::Resolved<#resolver>);
    quote_spanned!(Span::call_site()=> ::plug_limit::RateLimited<#resolved>)
}

impl<T> Arg<T> {
    /// Where a given argument is, for an error about it.
    fn given(&self, span: impl FnOnce(&T) -> Span) -> Option<Span> {
        match self {
            Self::Given(value) => Some(span(value)),
            Self::Absent | Self::Malformed => None,
        }
    }
}

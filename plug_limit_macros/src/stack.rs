//! Stacked `#[rate_limit]` attributes: the first to expand takes the others off the handler, so
//! that every limit is checked at once, as one `RateLimited<(A, B, ..)>`.

use proc_macro2::TokenStream;
use syn::{Attribute, ItemFn, Meta};

/// The most limits one stack holds (the `Limits` tuples of the runtime crate).
pub(crate) const MAX_LIMITS: usize = 6;

/// Takes the other `#[rate_limit]` attributes off `item` and returns their arguments, in order.
/// An attribute counts when its path is `rate_limit` or `plug_limit::rate_limit` (with or
/// without a leading `::`): another crate's `rate_limit` is left alone.
pub(crate) fn take_siblings(
    item: &mut ItemFn,
) -> syn::Result<Vec<(TokenStream, proc_macro2::Span)>> {
    let mut siblings = Vec::new();
    let mut kept = Vec::with_capacity(item.attrs.len());
    for attr in std::mem::take(&mut item.attrs) {
        if is_rate_limit(&attr) {
            // The path's span: an attribute's own covers its `#` alone on stable.
            let span = syn::spanned::Spanned::span(attr.path());
            let args = match attr.meta {
                Meta::Path(_) => TokenStream::new(),
                Meta::List(list) => list.tokens,
                Meta::NameValue(_) => {
                    return Err(syn::Error::new(
                        span,
                        "expected `#[rate_limit(..)]` with its arguments in parentheses",
                    ));
                }
            };
            siblings.push((args, span));
        } else {
            kept.push(attr);
        }
    }
    item.attrs = kept;
    Ok(siblings)
}

fn is_rate_limit(attr: &Attribute) -> bool {
    let segments: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect();
    matches!(
        segments.as_slice(),
        [name] if name == "rate_limit"
    ) || matches!(
        segments.as_slice(),
        [krate, name] if krate == "plug_limit" && name == "rate_limit"
    )
}

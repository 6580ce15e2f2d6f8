//! Code generation from a validated [`Config`]; infallible.
//!
//! ```text
//! #[rate_limit(opts = [10, 60])]
//! async fn search(Query(q): Query<Q>) -> Json<R> { body }
//! ```
//!
//! becomes
//!
//! ```text
//! struct __rate_limit_search {}
//! impl Limit for __rate_limit_search { LIMITER, OPTS, COST, SCOPE, KEY, SKIP }
//!
//! async fn search(limited: RateLimited<__rate_limit_search>, arg0: Query<Q>) -> Response {
//!     async fn search(Query(q): Query<Q>) -> Json<R> { body }
//!     respond(limited, search(arg0).await)
//! }
//! ```
//!
//! The body stays in an inner fn with the original signature, so `return`, `?`, argument
//! patterns and `impl IntoResponse` mean exactly what they did; the outer fn only adds the
//! extractor in first position (always legal: it reads the request parts, not the body) and
//! the headers to whatever the inner fn returns.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{AttrStyle, Attribute, FnArg, ItemFn, ReturnType, Visibility};

use crate::validate::{Config, Limiter, Opt};

/// The handler under `configs`: one limit, or several stacked (checked at once).
pub(crate) fn handler(configs: &[Config], item: ItemFn) -> TokenStream {
    let ident = &item.sig.ident;
    let name = ident.unraw().to_string();
    let handler_path = quote!(::core::concat!(::core::module_path!(), "::", #name));
    let cfgs = cfgs(&item.attrs);
    let mut markers = Vec::with_capacity(configs.len());
    let mut items = TokenStream::new();
    for (i, config) in configs.iter().enumerate() {
        let marker = match i {
            0 => format_ident!("__rate_limit_{}", name, span = Span::call_site()),
            // A digit first: no handler's own marker can be named so.
            i => format_ident!("__rate_limit_{}_{}", i, name, span = Span::call_site()),
        };
        // As visible as the handler, whose signature names it.
        let limit = limit(config, &item.vis, &marker);
        let registration = registration(config, &handler_path, configs.len() > 1);
        items.extend(quote! {
            #(#cfgs)*
            #limit
            #(#cfgs)*
            #registration
        });
        markers.push(marker);
    }
    // Spanned on the attribute: a state without `PlugLimit: FromRef<S>` is reported there.
    let limited_ty = match markers.as_slice() {
        [marker] => quote_spanned!(Span::call_site()=> ::plug_limit::RateLimited<#marker>),
        markers => quote_spanned!(Span::call_site()=> ::plug_limit::RateLimited<(#(#markers,)*)>),
    };
    wrap(item, &limited_ty, &items)
}

/// The handler's `cfg` attributes: a handler compiled out takes its limit with it, as the key
/// expression may name items that exist only under the same `cfg`.
fn cfgs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
        .collect()
}

/// The handler taking `limited_ty` first and adding its headers to the response, after
/// `items` (its limit, if any).
pub(crate) fn wrap(item: ItemFn, limited_ty: &TokenStream, items: &TokenStream) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
        ..
    } = item;
    let (inner_attrs, outer_attrs): (Vec<Attribute>, Vec<Attribute>) = attrs
        .into_iter()
        .partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));
    let ident = &sig.ident;

    // Generated names are hygienic (`mixed_site`): user code cannot see or shadow them.
    let limited = Ident::new("__plug_limit_limited", Span::mixed_site());
    let (args, types): (Vec<Ident>, Vec<&syn::Type>) = sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(typed) => Some(&*typed.ty),
            FnArg::Receiver(_) => None,
        })
        .enumerate()
        .map(|(i, ty)| {
            (
                format_ident!("__plug_limit_arg{}", i, span = Span::mixed_site()),
                ty,
            )
        })
        .unzip();
    // Spanned on the return type: a type that is not `IntoResponse` is reported there.
    let output_span = match &sig.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => ident.span(),
    };
    let respond = quote_spanned! {output_span=>
        ::plug_limit::__private::respond(#limited, #ident(#(#args),*).await)
    };
    let stmts = &block.stmts;

    quote! {
        #items
        #(#outer_attrs)*
        #vis async fn #ident(
            #limited: #limited_ty,
            #(#args: #types),*
        ) -> ::plug_limit::__private::Response {
            #sig {
                #(#inner_attrs)*
                #(#stmts)*
            }
            #respond
        }
    }
}

/// The hidden marker type and its `Limit` implementation.
fn limit(config: &Config, vis: &Visibility, marker: &Ident) -> TokenStream {
    let limiter = config.limiter.name();
    let opts = config.limiter.opts();
    let cost = config.cost.map(|cost| {
        let cost = Literal::u32_unsuffixed(cost);
        quote!(const COST: u32 = #cost;)
    });
    // Without a scope of its own, the matched route's, as `RateLimited<L>` and the layer
    // count: a handler's path would start a fresh budget whenever it moved module.
    let scope = config.scope.as_ref().map(|scope| {
        quote! {
            const SCOPE: ::core::option::Option<&'static str> =
                ::core::option::Option::Some(#scope);
        }
    });
    let key = config.key.as_ref().map(|expr| {
        // Spanned on the expression: one that is not a `KeyExtractor` is reported there.
        quote_spanned! {expr.span()=>
            const KEY: ::core::option::Option<&'static dyn ::plug_limit::key::KeyExtractor> =
                ::core::option::Option::Some(&#expr);
        }
    });
    let count_if = config.count_if.as_ref().map(|path| {
        // Spanned on the path: a function of another signature is reported there.
        quote_spanned! {path.span()=>
            const COUNT_IF: ::core::option::Option<fn(::plug_limit::__private::StatusCode) -> bool> =
                ::core::option::Option::Some(#path);
        }
    });
    let settle = config.settle.then(|| {
        quote!(
            const SETTLE: bool = true;
        )
    });
    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types, unreachable_pub)]
        #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::marker::Copy)]
        #vis struct #marker {}

        impl ::plug_limit::Limit for #marker {
            const LIMITER: &'static str = #limiter;
            const OPTS: &'static [::plug_limit::Opt] = &[#(#opts),*];
            #cost
            #scope
            #key
            #count_if
            #settle
        }
    }
}

/// For a limiter that is not built in: the record that lets `Builder::build` refuse a
/// `PlugLimit` in which it is not registered, in which it cannot stack (`stacked`), or in which
/// it runs a custom script that does not take what the handler gives it (`takes`: a cost, a
/// refund), which only the registry knows (a built-in may be registered under a name of its
/// own).
fn registration(config: &Config, handler_path: &TokenStream, stacked: bool) -> Option<TokenStream> {
    let Limiter::Custom { name, .. } = &config.limiter else {
        return None;
    };
    let takes = [
        (config.cost.is_some(), "cost"),
        (config.count_if.is_some(), "count_if"),
        (config.settle, "settle"),
    ]
    .into_iter()
    .find_map(|(given, argument)| given.then_some(argument))
    .unwrap_or_default();
    Some(quote! {
        ::plug_limit::__private::inventory::submit! {
            ::plug_limit::__private::LimiterUse {
                limiter: #name,
                handler: #handler_path,
                stacked: #stacked,
                takes: #takes,
            }
        }
    })
}

impl Limiter {
    fn name(&self) -> &str {
        match self {
            Self::Builtin { builtin, .. } => builtin.name(),
            Self::Custom { name, .. } => name,
        }
    }

    fn opts(&self) -> Vec<TokenStream> {
        let (Self::Builtin { opts, .. } | Self::Custom { opts, .. }) = self;
        opts.iter()
            .map(|opt| match opt {
                Opt::Int(n) => {
                    let n = Literal::i64_unsuffixed(*n);
                    quote!(::plug_limit::Opt::Int(#n))
                }
                Opt::Str(s) => quote!(::plug_limit::Opt::Str(#s)),
            })
            .collect()
    }
}

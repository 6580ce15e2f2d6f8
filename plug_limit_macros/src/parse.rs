//! Syntax: the attribute's `key = value` arguments, kept as syn nodes so that every later error
//! can point at the part of the input it is about.

use proc_macro2::TokenStream;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprArray, Lit, LitStr, Meta, Path, Token};

use crate::errors::Errors;

/// The arguments as written, each checked for its form only.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) limiter: Arg<LitStr>,
    pub(crate) opts: Arg<ExprArray>,
    pub(crate) cost: Arg<Cost>,
    pub(crate) key: Arg<Expr>,
    pub(crate) scope: Arg<LitStr>,
    pub(crate) count_if: Arg<Path>,
    /// `settle`, a bare flag: the path, for errors about it.
    pub(crate) settle: Arg<Path>,
}

/// `cost = <integer>`: its value, reported on where it is out of bounds.
pub(crate) struct Cost {
    pub(crate) value: Expr,
    /// The value's base-10 digits, with a leading `-` if negative.
    pub(crate) digits: String,
}

/// One argument. A malformed one has been reported already; later checks that depend on it
/// are skipped rather than reported again with a default standing in for it.
#[derive(Default)]
pub(crate) enum Arg<T> {
    #[default]
    Absent,
    Malformed,
    Given(T),
}

/// Parses `limiter = "..", opts = [..], cost = .., key = .., scope = "..",
/// count_if = .., settle`, reporting every unknown,
/// duplicate or malformed argument at once, along with what could be read.
pub(crate) fn args(tokens: TokenStream) -> (Args, Errors) {
    let mut errors = Errors::default();
    let Some(metas) = errors.push(Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens))
    else {
        let unreadable = Args {
            limiter: Arg::Malformed,
            opts: Arg::Malformed,
            cost: Arg::Malformed,
            key: Arg::Malformed,
            scope: Arg::Malformed,
            count_if: Arg::Malformed,
            settle: Arg::Malformed,
        };
        return (unreadable, errors);
    };
    let mut args = Args::default();
    for meta in metas {
        errors.push(args.set(meta));
    }
    (args, errors)
}

impl Args {
    fn set(&mut self, meta: Meta) -> syn::Result<()> {
        let name = name(meta.path());
        match name.as_str() {
            "limiter" => set(&mut self.limiter, meta, string("limiter", "token_bucket")),
            "opts" => set(&mut self.opts, meta, |value| match value {
                Expr::Array(array) => Ok(array),
                other => Err(syn::Error::new_spanned(
                    other,
                    "expected an array of options, as in `opts = [10, 60]`",
                )),
            }),
            "cost" => set(&mut self.cost, meta, |value| {
                let digits = integer(&value).ok_or_else(|| {
                    syn::Error::new_spanned(&value, "expected an integer literal, as in `cost = 3`")
                })?;
                Ok(Cost { value, digits })
            }),
            "key" => set(&mut self.key, meta, Ok),
            "scope" => set(&mut self.scope, meta, string("scope", "search")),
            "count_if" => set(&mut self.count_if, meta, |value| match value {
                Expr::Path(path) if path.qself.is_none() => Ok(path.path),
                other => Err(syn::Error::new_spanned(
                    other,
                    "expected the path of a `fn(StatusCode) -> bool`, as in \
                     `count_if = failed_login`",
                )),
            }),
            "settle" => match meta {
                Meta::Path(path) if matches!(self.settle, Arg::Absent) => {
                    self.settle = Arg::Given(path);
                    Ok(())
                }
                Meta::Path(path) => Err(syn::Error::new_spanned(
                    path,
                    "`settle` specified more than once",
                )),
                other => {
                    self.settle = Arg::Malformed;
                    Err(syn::Error::new_spanned(
                        other,
                        "`settle` is a flag: write `settle`, with no value",
                    ))
                }
            },
            _ => Err(syn::Error::new_spanned(
                meta.path(),
                format!(
                    "unknown argument `{name}`; expected {}",
                    plug_limit_options::attribute_arguments()
                ),
            )),
        }
    }
}

/// Stores the value of `name = value` in `slot`, refusing a second one and any other form.
fn set<T>(
    slot: &mut Arg<T>,
    meta: Meta,
    value: impl FnOnce(Expr) -> syn::Result<T>,
) -> syn::Result<()> {
    let path = meta.path().clone();
    let name = name(&path);
    if !matches!(slot, Arg::Absent) {
        return Err(syn::Error::new_spanned(
            path,
            format!("`{name}` specified more than once"),
        ));
    }
    let Meta::NameValue(pair) = meta else {
        *slot = Arg::Malformed;
        let form = match name.as_str() {
            "limiter" | "scope" => format!("{name} = \"...\""),
            "opts" => format!("{name} = [...]"),
            _ => format!("{name} = ..."),
        };
        return Err(syn::Error::new_spanned(path, format!("expected `{form}`")));
    };
    match value(pair.value) {
        Ok(value) => *slot = Arg::Given(value),
        Err(error) => {
            *slot = Arg::Malformed;
            return Err(error);
        }
    }
    Ok(())
}

/// A parser for an argument whose value must be a string literal.
fn string(name: &'static str, example: &'static str) -> impl FnOnce(Expr) -> syn::Result<LitStr> {
    move |value| match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(lit),
        other => Err(syn::Error::new_spanned(
            other,
            format!("expected a string literal, as in `{name} = \"{example}\"`"),
        )),
    }
}

/// The digits of an integer literal. A negative one is still an integer, for `validate` to
/// refuse by its value: syn reads `-1` as one literal at the end of the arguments and as a
/// negation elsewhere, and both should get the same error.
fn integer(value: &Expr) -> Option<String> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(int), ..
        }) => Some(int.base10_digits().to_owned()),
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(int), ..
            }) => Some(format!("-{}", int.base10_digits())),
            _ => None,
        },
        _ => None,
    }
}

fn name(path: &Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    fn error(tokens: TokenStream) -> String {
        match args(tokens).1.finish(()) {
            Ok(()) => String::from("no error"),
            Err(errors) => errors
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn parses_every_argument() {
        let (parsed, errors) = args(quote!(
            limiter = "token_bucket",
            opts = [20, 600, 5],
            cost = 3,
            key = plug_limit::key::header("x-api-key"),
            scope = "search",
        ));
        assert!(errors.finish(()).is_ok());
        assert!(matches!(parsed.limiter, Arg::Given(l) if l.value() == "token_bucket"));
        assert!(matches!(parsed.opts, Arg::Given(o) if o.elems.len() == 3));
        assert!(matches!(parsed.cost, Arg::Given(c) if c.digits == "3"));
        assert!(matches!(parsed.key, Arg::Given(_)));
        assert!(matches!(parsed.scope, Arg::Given(s) if s.value() == "search"));
    }

    /// The catalogue's list of arguments is the parser's: each it names is known here (an
    /// argument parsed but not listed would be missing from the docs the list holds).
    #[test]
    fn every_listed_argument_is_parsed_and_no_other() {
        let given = quote!(
            limiter = "token_bucket",
            opts = [20, 600, 5],
            cost = 3,
            key = plug_limit::key::global(),
            scope = "search",
            settle,
            count_if = failed,
        );
        let (parsed, errors) = args(given.clone());
        assert!(errors.finish(()).is_ok());
        let set = [
            matches!(parsed.limiter, Arg::Given(_)),
            matches!(parsed.opts, Arg::Given(_)),
            matches!(parsed.cost, Arg::Given(_)),
            matches!(parsed.key, Arg::Given(_)),
            matches!(parsed.scope, Arg::Given(_)),
            matches!(parsed.settle, Arg::Given(_)),
            matches!(parsed.count_if, Arg::Given(_)),
        ];
        assert_eq!(set, [true; 7]);
        let written: Vec<String> = given
            .to_string()
            .split(',')
            .filter_map(|arg| arg.split_whitespace().next().map(str::to_owned))
            .filter(|name| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
            .collect();
        assert_eq!(written, plug_limit_options::ATTRIBUTE_ARGUMENTS);
    }

    #[test]
    fn no_arguments_is_not_a_syntax_error() {
        assert_eq!(error(quote!()), "no error");
    }

    #[test]
    fn unknown_argument() {
        assert_eq!(
            error(quote!(limit = 5, opts = [1, 2])),
            "unknown argument `limit`; expected `limiter`, `opts`, `cost`, `key`, `scope`, `settle` or `count_if`"
        );
    }

    #[test]
    fn duplicate_argument() {
        assert_eq!(
            error(quote!(opts = [1, 2], opts = [3, 4])),
            "`opts` specified more than once"
        );
        assert_eq!(
            error(quote!(cost = 2, opts = [1, 2], cost = 3)),
            "`cost` specified more than once"
        );
    }

    #[test]
    fn argument_without_a_value() {
        assert_eq!(error(quote!(opts)), "expected `opts = [...]`");
        assert_eq!(error(quote!(key)), "expected `key = ...`");
        assert_eq!(error(quote!(cost)), "expected `cost = ...`");
        assert_eq!(error(quote!(limiter(x))), "expected `limiter = \"...\"`");
    }

    #[test]
    fn values_of_the_wrong_kind() {
        assert_eq!(
            error(quote!(limiter = fixed_window)),
            "expected a string literal, as in `limiter = \"token_bucket\"`"
        );
        assert_eq!(
            error(quote!(opts = 10)),
            "expected an array of options, as in `opts = [10, 60]`"
        );
        assert_eq!(
            error(quote!(scope = 1)),
            "expected a string literal, as in `scope = \"search\"`"
        );
        for cost in [quote!(cost = "3"), quote!(cost = 1.5), quote!(cost = COST)] {
            assert_eq!(error(cost), "expected an integer literal, as in `cost = 3`");
        }
    }

    #[test]
    fn a_negative_cost_is_an_integer_wherever_it_is() {
        for tokens in [
            quote!(opts = [1, 2], cost = -1),
            quote!(cost = -1, opts = [1, 2]),
        ] {
            let (parsed, errors) = args(tokens);
            assert!(errors.finish(()).is_ok());
            assert!(matches!(parsed.cost, Arg::Given(c) if c.digits == "-1"));
        }
    }

    #[test]
    fn unreadable_arguments() {
        assert_eq!(error(quote!(opts = [1, 2] limiter)), "expected `,`");
    }

    #[test]
    fn every_mistake_is_reported() {
        assert_eq!(
            error(quote!(limiter = 1, foo = 2, opts = [1], opts = [2])),
            "expected a string literal, as in `limiter = \"token_bucket\"`\n\
             unknown argument `foo`; expected `limiter`, `opts`, `cost`, `key`, `scope`, `settle` or `count_if`\n\
             `opts` specified more than once"
        );
    }
}

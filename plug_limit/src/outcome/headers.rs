//! An outcome's rate-limit headers: ready-made from a script's reply, or a native twin's values
//! made into header values only when something reads them.
//!
//! A twin answers numbers. Formatting them, checking them as header values and collecting them
//! with their names was a fifth of a memory check, paid even when no header is sent (a handler
//! that drops its extractor, a layer configured without headers). [`Headers::unmade`] keeps the
//! numbers; the first read makes the values once, and a response takes them without the
//! intermediate list.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::algorithm::{Field, Fields};

/// `n` as a header value, in one allocation of its exact size: `HeaderValue::from(n)` keeps
/// spare capacity, which costs its buffer a second allocation and a shared count.
pub(crate) fn number<N: itoa::Integer>(n: N) -> HeaderValue
where
    HeaderValue: From<N>,
{
    // Decimal digits are always a valid value; the fallback only keeps this free of panics.
    HeaderValue::try_from(itoa::Buffer::new().format(n).to_owned())
        .unwrap_or_else(|_| HeaderValue::from(n))
}

/// `field` as a header value; `None` for text a header cannot carry.
fn value(field: &Field) -> Option<HeaderValue> {
    match field {
        Field::Int(n) => Some(number(*n)),
        Field::Text(text) => HeaderValue::from_str(text).ok(),
    }
}

/// A limiter's header names: a built-in's own, or names it was registered with. Cloning either
/// touches no shared count for the built-in's own, which every check of it clones.
#[derive(Debug, Clone)]
pub(crate) enum Names {
    Builtin(&'static [HeaderName]),
    Declared(Arc<[HeaderName]>),
}

impl Deref for Names {
    type Target = [HeaderName];

    fn deref(&self) -> &[HeaderName] {
        match self {
            Self::Builtin(names) => names,
            Self::Declared(names) => names,
        }
    }
}

/// An outcome's headers, made at most once.
///
/// The unmade side is boxed: an outcome is moved through every layer of a check and its
/// response, and inline it would triple the outcome's size; one allocation costs less than
/// those copies.
#[derive(Clone)]
pub(crate) enum Headers {
    /// Made already (a script's reply, a hand-built outcome, or an edited one).
    Made(Vec<(HeaderName, HeaderValue)>),
    /// A twin's values under their names, made when first read.
    Unmade(Box<Unmade>),
}

#[derive(Clone)]
pub(crate) struct Unmade {
    names: Names,
    fields: Fields,
    made: OnceLock<Vec<(HeaderName, HeaderValue)>>,
}

impl Headers {
    /// Headers made already (a script's reply, a hand-built outcome).
    pub(crate) fn made(headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        Self::Made(headers)
    }

    /// A twin's values under `names`, made when first read. The caller has checked that there
    /// is a name for every value and that every value is valid ([`Field::is_valid`]).
    pub(crate) fn unmade(names: Names, fields: Fields) -> Self {
        debug_assert!(
            fields.len() <= names.len() && fields.iter().all(Field::is_valid),
            "unchecked header values",
        );
        Self::Unmade(Box::new(Unmade {
            names,
            fields,
            made: OnceLock::new(),
        }))
    }

    /// The headers, made now if they were not.
    pub(crate) fn get(&self) -> &[(HeaderName, HeaderValue)] {
        match self {
            Self::Made(made) => made,
            Self::Unmade(unmade) => unmade
                .made
                .get_or_init(|| pairs(&unmade.names, &unmade.fields).collect()),
        }
    }

    /// Changes the headers in place (made first if they were not).
    pub(crate) fn edit(&mut self, edit: impl FnOnce(&mut Vec<(HeaderName, HeaderValue)>)) {
        if let Self::Unmade(unmade) = self {
            let made = unmade
                .made
                .take()
                .unwrap_or_else(|| pairs(&unmade.names, &unmade.fields).collect());
            *self = Self::Made(made);
        }
        if let Self::Made(made) = self {
            edit(made);
        }
    }

    /// Sets each header in `map`, replacing what it held under the name.
    pub(crate) fn insert_into(self, map: &mut HeaderMap) {
        let made = match self {
            Self::Made(made) => made,
            Self::Unmade(unmade) => {
                let Unmade {
                    names,
                    fields,
                    made,
                } = *unmade;
                let Some(made) = made.into_inner() else {
                    for (name, value) in pairs(&names, &fields) {
                        map.insert(name, value);
                    }
                    return;
                };
                made
            }
        };
        for (name, value) in made {
            map.insert(name, value);
        }
    }
}

/// The values made, each under its name.
fn pairs<'a>(
    names: &'a [HeaderName],
    fields: &'a [Field],
) -> impl Iterator<Item = (HeaderName, HeaderValue)> + 'a {
    names
        .iter()
        .zip(fields)
        .filter_map(|(name, field)| Some((name.clone(), value(field)?)))
}

impl PartialEq for Headers {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static NAMES: [HeaderName; 2] = [
        HeaderName::from_static("x-a"),
        HeaderName::from_static("x-b"),
    ];

    #[test]
    fn unmade_values_read_as_the_made_ones() {
        let fields = Fields::from([Field::Int(-3), Field::Text("7 7;w=1".into())]);
        let unmade = Headers::unmade(Names::Builtin(&NAMES), fields);
        // Never read before it is sent: its values go straight to the map.
        let sent_unread = unmade.clone();
        let made = Headers::made(vec![
            (NAMES[0].clone(), HeaderValue::from_static("-3")),
            (NAMES[1].clone(), HeaderValue::from_static("7 7;w=1")),
        ]);
        assert_eq!(unmade.get(), made.get());
        let (mut from_unmade, mut from_made) = (HeaderMap::new(), HeaderMap::new());
        sent_unread.insert_into(&mut from_unmade);
        made.insert_into(&mut from_made);
        assert_eq!(from_unmade, from_made);
        assert_eq!(from_unmade["x-b"], "7 7;w=1");
    }

    #[test]
    fn changed_in_place_they_stay_changed() {
        let fields = Fields::from([Field::Int(1), Field::Int(2)]);
        let mut headers = Headers::unmade(Names::Builtin(&NAMES), fields);
        headers.edit(|made| {
            made.pop();
        });
        assert_eq!(headers.get().len(), 1);
        let mut map = HeaderMap::new();
        headers.insert_into(&mut map);
        assert_eq!(map.len(), 1);
        assert_eq!(map["x-a"], "1");
    }

    #[test]
    fn numbers_read_as_their_digits() {
        assert_eq!(number(0_i64), "0");
        assert_eq!(number(-42_i64), "-42");
        assert_eq!(number(u64::MAX), "18446744073709551615");
    }

    #[test]
    fn fields_compare_as_their_texts() {
        let mut fields = Fields::from([Field::Int(10)]);
        fields.push(Field::Text("0".into()));
        assert_eq!(fields, ["10", "0"]);
        assert_ne!(fields, ["10"]);
        assert_eq!(fields.texts(), ["10", "0"]);
        assert!(!Field::Text("a\nb".into()).is_valid());
    }
}

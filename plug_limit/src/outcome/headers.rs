//! An outcome's rate-limit headers: ready-made (a custom script's reply, a hand-built outcome),
//! or a built-in's [`Report`] made into header values only when something reads them.
//!
//! A built-in answers numbers. Formatting them, checking them as header values and collecting
//! them with their names was a fifth of a memory check, paid even when no header is sent (a
//! handler that drops its extractor, a layer configured without headers). [`Headers::Reported`]
//! keeps the numbers (and, in the draft-10 style, the fields' items); the first read makes the
//! values once, and a response takes them without the intermediate list.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::ietf::Items;
use crate::algorithm::{Field, Report};

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
        Field::TokenBucketPolicy { .. } => HeaderValue::try_from(field.to_string()).ok(),
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
/// The reported side is boxed: an outcome is moved through every layer of a check and its
/// response, and inline it would triple the outcome's size; one allocation costs less than
/// those copies.
#[derive(Clone)]
pub(crate) enum Headers {
    /// Made already (a custom script's reply, a hand-built outcome, or an edited one).
    Made(Vec<(HeaderName, HeaderValue)>),
    /// A built-in's numbers, made into headers when first read.
    Reported(Box<Reported>),
}

/// A built-in's report and how it is to be written.
#[derive(Clone)]
pub(crate) struct Reported {
    pub(crate) report: Report,
    /// The names of the report's values, in reply order.
    names: Names,
    /// In the draft-10 style, the fields' items (every limit's, for a stack).
    pub(crate) draft10: Option<Box<Items>>,
    /// A boxed slice, not a `Vec`: the word it saves keeps the whole no larger than what a
    /// check moves by registers rather than by `memcpy`.
    made: OnceLock<Box<[(HeaderName, HeaderValue)]>>,
}

impl Reported {
    /// Seconds until a denied request may pass, as the response says it.
    pub(crate) fn retry_after(&self) -> Option<i64> {
        self.report.retry_after()
    }

    /// The report as it reads `passed` whole seconds later: every wait counted down.
    pub(crate) fn count_down(&mut self, passed: i64) {
        self.report.count_down(passed);
        if let Some(items) = &mut self.draft10 {
            items.count_down(passed);
        }
        self.made = OnceLock::new();
    }

    /// The headers, in the style set: the draft-10 fields and `retry-after`, or the report's
    /// values under their names.
    fn render(&self) -> Box<[(HeaderName, HeaderValue)]> {
        if let Some(fields) = self.draft10.as_deref().and_then(Items::render) {
            let mut headers = Vec::with_capacity(3);
            headers.extend(fields);
            headers.extend(self.retry_after().map(|secs| (RETRY_AFTER, number(secs))));
            return headers.into_boxed_slice();
        }
        let values = self.report.values();
        let mut headers = Vec::with_capacity(values.len());
        for (position, field) in values.iter().enumerate() {
            // The one value a built-in's names may lack, sent as `retry-after` whatever they
            // are: the retry-after fixed_window's denial gains (`Report::retry_after_reset`).
            let added = position == 3 && self.report.retry_after_added();
            let name = match self.names.get(position) {
                Some(name) if !added => name,
                _ => &RETRY_AFTER,
            };
            if let Some(value) = value(field) {
                headers.push((name.clone(), value));
            }
        }
        headers.into_boxed_slice()
    }
}

impl Headers {
    /// Headers made already (a custom script's reply, a hand-built outcome).
    pub(crate) fn made(headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        Self::Made(headers)
    }

    /// A built-in's `report`, its values under `names`, made when first read. The caller has
    /// checked that there is a name for every value and that every value is valid
    /// ([`Field::is_valid`]).
    pub(crate) fn reported(names: Names, report: Report) -> Self {
        debug_assert!(
            report.values().len() <= names.len() && report.limit().is_valid(),
            "unchecked header values",
        );
        Self::Reported(Box::new(Reported {
            report,
            names,
            draft10: None,
            made: OnceLock::new(),
        }))
    }

    /// Takes `sent` as the headers of a report read from them, until the report changes.
    pub(crate) fn set_sent(&mut self, sent: Vec<(HeaderName, HeaderValue)>) {
        if let Self::Reported(reported) = self {
            reported.made = OnceLock::from(sent.into_boxed_slice());
        }
    }

    /// The built-in's report and how it is written; `None` for headers made already.
    pub(crate) fn as_reported(&self) -> Option<&Reported> {
        match self {
            Self::Reported(reported) => Some(reported),
            Self::Made(_) => None,
        }
    }

    /// [`as_reported`](Self::as_reported), to change: the headers are made again when next
    /// read.
    pub(crate) fn as_reported_mut(&mut self) -> Option<&mut Reported> {
        match self {
            Self::Reported(reported) => {
                reported.made = OnceLock::new();
                Some(reported)
            }
            Self::Made(_) => None,
        }
    }

    /// The headers, made now if they were not.
    pub(crate) fn get(&self) -> &[(HeaderName, HeaderValue)] {
        match self {
            Self::Made(made) => made,
            Self::Reported(reported) => reported.made.get_or_init(|| reported.render()),
        }
    }

    /// Sets each header in `map`, replacing what it held under the name.
    pub(crate) fn insert_into(self, map: &mut HeaderMap) {
        let made = match self {
            Self::Made(made) => made,
            Self::Reported(mut reported) => match reported.made.take() {
                Some(made) => made.into_vec(),
                None => reported.render().into_vec(),
            },
        };
        for (name, value) in made {
            map.insert(name, value);
        }
    }
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

    static NAMES: [HeaderName; 4] = [
        HeaderName::from_static("x-a"),
        HeaderName::from_static("x-b"),
        HeaderName::from_static("x-c"),
        HeaderName::from_static("x-d"),
    ];

    fn report(limit: Field, values: [i64; 2], retry_after: Option<i64>) -> Report {
        let mut all = vec![limit, Field::Int(values[0]), Field::Int(values[1])];
        all.extend(retry_after.map(Field::Int));
        Report::from_values(&all, 0).unwrap()
    }

    #[test]
    fn reported_values_read_as_the_made_ones() {
        let reported = Headers::reported(
            Names::Builtin(&NAMES),
            report(Field::from("7 7;w=1".to_owned()), [-3, 0], Some(4)),
        );
        // Never read before it is sent: its values go straight to the map.
        let sent_unread = reported.clone();
        let made = Headers::made(vec![
            (NAMES[0].clone(), HeaderValue::from_static("7 7;w=1")),
            (NAMES[1].clone(), HeaderValue::from_static("-3")),
            (NAMES[2].clone(), HeaderValue::from_static("0")),
            (NAMES[3].clone(), HeaderValue::from_static("4")),
        ]);
        assert_eq!(reported.get(), made.get());
        let (mut from_reported, mut from_made) = (HeaderMap::new(), HeaderMap::new());
        sent_unread.insert_into(&mut from_reported);
        made.insert_into(&mut from_made);
        assert_eq!(from_reported, from_made);
        assert_eq!(from_reported["x-a"], "7 7;w=1");
    }

    #[test]
    fn a_reset_that_is_the_retry_after_is_sent_as_both() {
        let mut headers = Headers::reported(
            Names::Builtin(&NAMES[..3]),
            report(Field::Int(5), [30, 0], None),
        );
        headers
            .as_reported_mut()
            .unwrap()
            .report
            .retry_after_reset();
        let texts: Vec<_> = headers
            .get()
            .iter()
            .map(|(name, value)| format!("{name}={}", value.to_str().unwrap()))
            .collect();
        assert_eq!(texts, ["x-a=5", "x-b=30", "x-c=0", "retry-after=30"]);
        let reported = headers.as_reported_mut().unwrap();
        reported.count_down(12);
        assert_eq!(reported.retry_after(), Some(18));
        assert_eq!(headers.get()[3].1, "18");
        // Four declared names: the added value is still `retry-after`, not the fourth name.
        let mut four =
            Headers::reported(Names::Builtin(&NAMES), report(Field::Int(5), [30, 0], None));
        four.as_reported_mut().unwrap().report.retry_after_reset();
        assert_eq!(four.get()[3].0, RETRY_AFTER);
    }

    #[test]
    fn numbers_read_as_their_digits() {
        assert_eq!(number(0_i64), "0");
        assert_eq!(number(-42_i64), "-42");
        assert_eq!(number(u64::MAX), "18446744073709551615");
    }
}

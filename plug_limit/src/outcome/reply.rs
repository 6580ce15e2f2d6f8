//! The script contract's reply, `{"allow"|"deny", {header values...}, extra...}`, parsed into
//! an [`Outcome`]: anything out of contract is an error, never a decision.

use axum::body::Bytes;
use deadpool_redis::redis::Value;
use http::{HeaderName, HeaderValue};
use plug_limit_options::excerpt;

use super::{Decision, Names, Outcome, number};
use crate::algorithm::{Builtin, Field, Fields, Report};
use crate::error::ReplyError;

/// Parses a script reply: `{"allow"|"deny", {header values...}, extra...}`.
///
/// Header values map to `declared` names in order; a `{name, value}` pair sets its own
/// name. `"block"` is accepted as the older spelling of `"deny"`.
pub(crate) fn parse_reply(reply: Value, declared: &[HeaderName]) -> Result<Outcome, ReplyError> {
    let (decision, values, extra) = envelope(reply)?;
    let headers = headers(values, declared)?;
    Ok(Outcome::with_extra(decision, headers, extra.collect()))
}

/// A reply's decision, its header values, and the extra values after them.
fn envelope(reply: Value) -> Result<(Decision, Vec<Value>, std::vec::IntoIter<Value>), ReplyError> {
    let Value::Array(items) = reply else {
        return Err(ReplyError::NotAnArray(kind(&reply)));
    };
    let mut items = items.into_iter();
    let decision = match items.next() {
        Some(Value::BulkString(word)) => decision(&word)?,
        Some(Value::SimpleString(word)) if word == "allow" => Decision::Allow,
        Some(Value::SimpleString(word)) if word == "deny" || word == "block" => Decision::Deny,
        Some(other) => {
            let other = format!("{other:?}");
            return Err(ReplyError::UnknownDecision(excerpt(&other).into_owned()));
        }
        None => return Err(ReplyError::Empty),
    };
    let values = match items.next() {
        Some(Value::Array(values)) => values,
        None => Vec::new(),
        Some(other) => return Err(ReplyError::HeadersNotAnArray(kind(&other))),
    };
    Ok((decision, values, items))
}

/// Parses a built-in's reply, `{"allow"|"deny", {limit, reset, remaining[, retry_after]},
/// extra...}`, into its [`Report`], once, as it arrives: every value after the limit is a
/// number, or the reply is out of contract. multi_window's first extra value is the window that
/// decided, which the report holds; the rest (a batch's grant) stay extra values.
pub(crate) fn parse_builtin(
    reply: Value,
    algorithm: Builtin,
    names: &Names,
) -> Result<Outcome, ReplyError> {
    let (decision, values, extra) = envelope(reply)?;
    let mut read = Read::new(names, values.len());
    for (position, value) in values.into_iter().enumerate() {
        read.push(position, || match value {
            Value::Int(n) => Ok((Field::Int(n), number(n))),
            value => {
                let bytes = Bytes::from(text(value, position)?);
                Ok((
                    builtin_field(&bytes, position)?,
                    shared_value(bytes, position)?,
                ))
            }
        })?;
    }
    let mut extra: Vec<Value> = extra.collect();
    let window = if algorithm == Builtin::MultiWindow && !extra.is_empty() {
        match extra.remove(0) {
            Value::Int(window) => u32::try_from(window).ok(),
            _ => None,
        }
        .ok_or_else(|| bad_window(read.fields.len()))?
    } else {
        0
    };
    read.outcome(decision, window, extra)
}

/// A built-in's values as they are read: the report's fields, and the header values sent as
/// they came.
struct Read<'a> {
    names: &'a Names,
    fields: Fields,
    sent: Vec<(HeaderName, HeaderValue)>,
}

impl<'a> Read<'a> {
    fn new(names: &'a Names, len: usize) -> Self {
        Self {
            names,
            fields: Fields::default(),
            sent: Vec::with_capacity(len),
        }
    }

    /// The value at `position`, as `read` reads it once a name is declared for it; a built-in
    /// answers at most four.
    fn push(
        &mut self,
        position: usize,
        read: impl FnOnce() -> Result<(Field, HeaderValue), ReplyError>,
    ) -> Result<(), ReplyError> {
        let name = declared_name(self.names, position)?.clone();
        let (field, value) = read()?;
        self.fields.push_checked(field).ok_or(past(position))?;
        self.sent.push((name, value));
        Ok(())
    }

    /// The outcome of the values read, `window` having decided: its report, sent as it came
    /// until it changes.
    fn outcome(
        self,
        decision: Decision,
        window: u32,
        extra: Vec<Value>,
    ) -> Result<Outcome, ReplyError> {
        let report = Report::from_fields(self.fields, window).map_err(|position| {
            ReplyError::InvalidHeaderValue {
                position,
                found: "not the built-in's number",
            }
        })?;
        Ok(Outcome::reported(decision, self.names.clone(), report, extra).sent_as(self.sent))
    }
}

/// A window that decided out of contract.
fn bad_window(position: usize) -> ReplyError {
    ReplyError::InvalidHeaderValue {
        position,
        found: "not the window that decided",
    }
}

/// A value past the most a built-in answers.
fn past(position: usize) -> ReplyError {
    ReplyError::InvalidHeaderValue {
        position,
        found: "past the values a built-in answers",
    }
}

/// One value of a built-in's reply: a number when it is one (a canonical decimal integer, as
/// `string.format('%d')` writes it), else its text (token_bucket's policy).
fn builtin_field(bytes: &[u8], position: usize) -> Result<Field, ReplyError> {
    let invalid = || ReplyError::InvalidHeaderValue {
        position,
        found: "bytes not allowed in a header",
    };
    if let Some(n) = canonical_integer(bytes) {
        return Ok(Field::Int(n));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| invalid())?;
    let field = Field::from(text.to_owned());
    if field.is_valid() {
        Ok(field)
    } else {
        Err(invalid())
    }
}

/// `bytes` as the integer they write, when they write it as `%d` would: no sign but a leading
/// `-`, no leading zero, within `i64`.
fn canonical_integer(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, bytes),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    // Read in one pass, every reply value of every check: counted toward the negative, so
    // that `i64::MIN` reads too; past the range, not an integer of `%d`'s.
    let mut n: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_sub(i64::from(digit))?;
    }
    if negative { Some(n) } else { n.checked_neg() }
}

/// Between the records of a stack's packed reply (ASCII record separator).
const RECORD: u8 = 0x1e;
/// Before each header value of a packed record (ASCII unit separator).
const UNIT: u8 = 0x1f;
/// Before the window that decided, in a multi_window's record (ASCII group separator).
const WINDOW: u8 = 0x1d;

/// Splits the stack script's reply (`lua/stack.lua`): one string, each run limit's reply a
/// record, `decision` then each header value after a 0x1F (and multi_window's deciding window
/// after a 0x1D), the records separated by 0x1E. No header value can hold any of these bytes,
/// so the split is exact; each record is then checked as [`parse_builtin`] checks a reply.
pub(crate) fn packed_records(reply: Value) -> Result<impl Iterator<Item = Bytes>, ReplyError> {
    let Value::BulkString(packed) = reply else {
        return Err(ReplyError::NotPacked(kind(&reply)));
    };
    // One buffer for the whole reply: every record is a view of it, without a copy.
    let packed = Bytes::from(packed);
    let mut at = 0;
    Ok(std::iter::from_fn(move || {
        if at > packed.len() {
            return None;
        }
        let end = packed[at..]
            .iter()
            .position(|&b| b == RECORD)
            .map_or(packed.len(), |i| at + i);
        let record = packed.slice(at..end);
        at = end + 1;
        Some(record)
    }))
}

/// One record of a stack's packed reply (see [`packed_records`]) as the [`Outcome`] its
/// limit's own reply would parse to, its values under `names` in order.
pub(crate) fn parse_record(record: &Bytes, names: &Names) -> Result<Outcome, ReplyError> {
    let (record, window) = match record.iter().position(|&b| b == WINDOW) {
        Some(at) => {
            let window = canonical_integer(&record[at + 1..])
                .and_then(|window| u32::try_from(window).ok())
                .ok_or_else(|| bad_window(0))?;
            (record.slice(..at), window)
        }
        None => (record.clone(), 0),
    };
    let mut values = record.split(|&b| b == UNIT);
    let decision = match values.next() {
        Some(b"") | None => return Err(ReplyError::Empty),
        Some(word) => decision(word)?,
    };
    let mut read = Read::new(names, names.len());
    for (position, value) in values.enumerate() {
        read.push(position, || {
            let field = builtin_field(value, position)?;
            // Every value is a view of the reply's one buffer, without a copy.
            Ok((field, shared_value(record.slice_ref(value), position)?))
        })?;
    }
    read.outcome(decision, window, Vec::new())
}

/// A reply's decision word: `"allow"`, or `"deny"` and its older spelling `"block"`.
fn decision(word: &[u8]) -> Result<Decision, ReplyError> {
    match word {
        b"allow" => Ok(Decision::Allow),
        b"deny" | b"block" => Ok(Decision::Deny),
        other => Err(ReplyError::UnknownDecision(
            excerpt(&String::from_utf8_lossy(other)).into_owned(),
        )),
    }
}

/// The name declared for the header value at `position`.
pub(crate) fn declared_name(
    declared: &[HeaderName],
    position: usize,
) -> Result<&HeaderName, ReplyError> {
    declared.get(position).ok_or(ReplyError::UndeclaredHeader {
        position,
        declared: declared.len(),
    })
}

/// Whether a stack call of `limits` limits that answered `records` records answered for every
/// limit it had to: one record a limit, or fewer when the last one `denied` (a denial ends a
/// stack). A limit left unanswered otherwise would let the request through uncounted.
pub(crate) fn answered_in_full(
    limits: usize,
    records: usize,
    denied: bool,
) -> Result<(), ReplyError> {
    if records > limits || (records < limits && !denied) {
        return Err(ReplyError::StackRecords { limits, records });
    }
    Ok(())
}

fn headers(
    values: Vec<Value>,
    declared: &[HeaderName],
) -> Result<Vec<(HeaderName, HeaderValue)>, ReplyError> {
    let mut headers = Vec::with_capacity(values.len());
    for (position, value) in values.into_iter().enumerate() {
        let header = match value {
            Value::Array(pair) => {
                let [name, value]: [Value; 2] = pair
                    .try_into()
                    .map_err(|_| ReplyError::BadOverride { position })?;
                let name = HeaderName::from_bytes(&text(name, position)?)
                    .map_err(|_| ReplyError::InvalidHeaderName { position })?;
                if is_framing(&name) {
                    return Err(ReplyError::FramingHeader { position, name });
                }
                (name, header_value(value, position)?)
            }
            value => {
                let name = declared_name(declared, position)?.clone();
                (name, header_value(value, position)?)
            }
        };
        headers.push(header);
    }
    Ok(headers)
}

/// Headers that frame the message or belong to one connection (RFC 9110 §7.6.1, RFC 9112):
/// copied from a script into a response, they would cut the body short, hang the client or
/// drop the connection, so no script may set them.
pub(crate) fn is_framing(name: &HeaderName) -> bool {
    use http::header::{
        CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH, HOST, PROXY_AUTHENTICATE,
        PROXY_AUTHORIZATION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
    };
    [
        CONNECTION,
        CONTENT_ENCODING,
        CONTENT_LENGTH,
        HOST,
        PROXY_AUTHENTICATE,
        PROXY_AUTHORIZATION,
        TE,
        TRAILER,
        TRANSFER_ENCODING,
        UPGRADE,
    ]
    .contains(name)
        || name == "keep-alive"
        || name == "proxy-connection"
}

fn text(value: Value, position: usize) -> Result<Vec<u8>, ReplyError> {
    match value {
        Value::BulkString(bytes) => Ok(bytes),
        Value::SimpleString(text) => Ok(text.into_bytes()),
        Value::Int(n) => Ok(n.to_string().into_bytes()),
        other => Err(ReplyError::InvalidHeaderValue {
            position,
            found: kind(&other),
        }),
    }
}

fn header_value(value: Value, position: usize) -> Result<HeaderValue, ReplyError> {
    // The reply's own buffer becomes the header's: `Bytes` takes a `Vec` whose length is its
    // capacity (as the reply parser makes them) without a copy or an allocation.
    shared_value(Bytes::from(text(value, position)?), position)
}

/// `bytes` as the header value at `position`, sharing its buffer.
fn shared_value(bytes: Bytes, position: usize) -> Result<HeaderValue, ReplyError> {
    HeaderValue::from_maybe_shared(bytes).map_err(|_| ReplyError::InvalidHeaderValue {
        position,
        found: "bytes not allowed in a header",
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Int(_) => "integer",
        Value::BulkString(_) | Value::SimpleString(_) | Value::VerbatimString { .. } => "string",
        Value::Array(_) => "array",
        Value::Okay => "status",
        Value::ServerError(_) => "error",
        _ => "unexpected value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    fn names() -> Vec<HeaderName> {
        [
            "x-ratelimit-limit",
            "x-ratelimit-reset",
            "x-ratelimit-remaining",
        ]
        .map(HeaderName::from_static)
        .to_vec()
    }

    fn builtin_names() -> Names {
        Names::Declared(names().into())
    }

    fn rendered(outcome: &Outcome) -> Vec<(String, String)> {
        outcome
            .headers()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect()
    }

    /// Each record of a packed stack reply, parsed under [`names`].
    fn unpacked(reply: Value) -> Vec<Result<(bool, Vec<(String, String)>), ReplyError>> {
        packed_records(reply)
            .unwrap()
            .map(|record| {
                parse_record(&record, &builtin_names()).map(|o| (o.is_allowed(), rendered(&o)))
            })
            .collect()
    }

    #[test]
    fn a_packed_stack_reply_is_split_into_each_limits_reply() {
        let header = |n: &str, v: &str| (n.to_owned(), v.to_owned());
        let records = unpacked(s(
            "allow\x1f5 5;w=2\x1f60\x1f4\x1edeny\x1f3\x1f1\x1f0\x1eblock\x1f9\x1f2\x1f0",
        ));
        assert_eq!(
            records,
            [
                Ok((
                    true,
                    vec![
                        header("x-ratelimit-limit", "5 5;w=2"),
                        header("x-ratelimit-reset", "60"),
                        header("x-ratelimit-remaining", "4"),
                    ]
                )),
                Ok((
                    false,
                    vec![
                        header("x-ratelimit-limit", "3"),
                        header("x-ratelimit-reset", "1"),
                        header("x-ratelimit-remaining", "0"),
                    ]
                )),
                Ok((
                    false,
                    vec![
                        header("x-ratelimit-limit", "9"),
                        header("x-ratelimit-reset", "2"),
                        header("x-ratelimit-remaining", "0"),
                    ]
                )),
            ]
        );
    }

    #[test]
    fn a_record_reads_as_its_report_with_the_window_that_decided() {
        let record = packed_records(s("deny\x1f10\x1f42\x1f0\x1d2"))
            .unwrap()
            .next()
            .unwrap();
        let outcome = parse_record(&record, &builtin_names()).unwrap();
        let report = outcome.report().unwrap();
        assert_eq!(
            (
                report.limit(),
                report.reset(),
                report.remaining(),
                report.window()
            ),
            (&Field::Int(10), 42, 0, 2)
        );
        let reply = Value::Array(vec![
            s("allow"),
            Value::Array(vec![s("10"), Value::Int(7), s("3")]),
            Value::Int(1),
            Value::Int(99),
        ]);
        let outcome = parse_builtin(reply, Builtin::MultiWindow, &builtin_names()).unwrap();
        let report = outcome.report().unwrap();
        assert_eq!((report.reset(), report.window()), (7, 1));
        // Only multi_window's first extra value is its window.
        assert_eq!(outcome.extra(), [Value::Int(99)]);
    }

    #[test]
    fn a_built_ins_reply_out_of_contract_is_an_error() {
        let reply = |values: &[&str]| {
            Value::Array(vec![
                s("allow"),
                Value::Array(values.iter().map(|value| s(value)).collect()),
            ])
        };
        let parsed = |values: &[&str]| {
            parse_builtin(reply(values), Builtin::FixedWindow, &builtin_names()).map(|_| ())
        };
        let not_a_number = |position| {
            Err(ReplyError::InvalidHeaderValue {
                position,
                found: "not the built-in's number",
            })
        };
        assert_eq!(parsed(&["10", "60", "9"]), Ok(()));
        assert_eq!(parsed(&["10", "soon", "9"]), not_a_number(1));
        assert_eq!(parsed(&["10", "60", "09"]), not_a_number(2));
        assert_eq!(parsed(&["10", "60"]), not_a_number(2));
        let no_window = Value::Array(vec![s("allow"), Value::Array(vec![]), s("x")]);
        assert!(parse_builtin(no_window, Builtin::MultiWindow, &builtin_names()).is_err());
        assert_eq!(canonical_integer(b"-7"), Some(-7));
        assert_eq!(canonical_integer(b"0"), Some(0));
        assert_eq!(canonical_integer(b"-0"), None);
        assert_eq!(canonical_integer(b"+7"), None);
        assert_eq!(canonical_integer(b"99999999999999999999"), None);
        assert_eq!(canonical_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(canonical_integer(b"9223372036854775808"), None);
        assert_eq!(canonical_integer(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(canonical_integer(b"-9223372036854775809"), None);
        assert_eq!(canonical_integer(b"12a"), None);
        assert_eq!(canonical_integer(b"007"), None);
        assert_eq!(canonical_integer(b"-"), None);
        assert_eq!(canonical_integer(b""), None);
        assert_eq!(canonical_integer(b"1234567890"), Some(1_234_567_890));
    }

    #[test]
    fn a_packed_record_out_of_contract_is_an_error() {
        assert_eq!(
            unpacked(s(
                "allow\x1f1\x1f2\x1f3\x1f4\x1emaybe\x1e\x1eallow\x1fa\x7fb"
            )),
            [
                Err(ReplyError::UndeclaredHeader {
                    position: 3,
                    declared: 3
                }),
                Err(ReplyError::UnknownDecision("maybe".to_owned())),
                Err(ReplyError::Empty),
                Err(ReplyError::InvalidHeaderValue {
                    position: 0,
                    found: "bytes not allowed in a header"
                }),
            ]
        );
        assert!(matches!(
            packed_records(Value::Array(vec![s("allow")])),
            Err(ReplyError::NotPacked("array"))
        ));
    }

    #[test]
    fn a_stack_answers_every_limit_unless_a_denial_ends_it() {
        assert_eq!(answered_in_full(3, 3, false), Ok(()));
        assert_eq!(answered_in_full(3, 3, true), Ok(()));
        assert_eq!(answered_in_full(3, 2, true), Ok(()));
        assert_eq!(
            answered_in_full(3, 2, false),
            Err(ReplyError::StackRecords {
                limits: 3,
                records: 2
            })
        );
        assert_eq!(
            answered_in_full(3, 4, true),
            Err(ReplyError::StackRecords {
                limits: 3,
                records: 4
            })
        );
    }

    #[test]
    fn maps_values_to_declared_names_in_order() {
        let reply = Value::Array(vec![
            s("allow"),
            Value::Array(vec![s("10"), s("60"), s("9")]),
        ]);
        let outcome = parse_reply(reply, &names()).unwrap();
        assert_eq!(outcome.decision(), Decision::Allow);
        assert_eq!(
            rendered(&outcome),
            [
                ("x-ratelimit-limit".into(), "10".into()),
                ("x-ratelimit-reset".into(), "60".into()),
                ("x-ratelimit-remaining".into(), "9".into()),
            ]
        );
        assert!(outcome.extra().is_empty());
    }

    #[test]
    fn pair_overrides_the_name_at_its_position_and_extra_is_kept() {
        let reply = Value::Array(vec![
            s("deny"),
            Value::Array(vec![
                s("10"),
                Value::Array(vec![s("x-acme-header"), s("60")]),
                Value::Int(0),
            ]),
            s("extra-1"),
            Value::Int(42),
        ]);
        let outcome = parse_reply(reply, &names()).unwrap();
        assert_eq!(outcome.decision(), Decision::Deny);
        assert_eq!(
            rendered(&outcome),
            [
                ("x-ratelimit-limit".into(), "10".into()),
                ("x-acme-header".into(), "60".into()),
                ("x-ratelimit-remaining".into(), "0".into()),
            ]
        );
        assert_eq!(outcome.extra(), &[s("extra-1"), Value::Int(42)]);
        assert_eq!(outcome.header("X-Acme-Header").unwrap(), "60");
    }

    #[test]
    fn block_is_the_old_spelling_of_deny() {
        let reply = Value::Array(vec![s("block"), Value::Array(vec![])]);
        assert_eq!(
            parse_reply(reply, &names()).unwrap().decision(),
            Decision::Deny
        );
    }

    #[test]
    fn malformed_replies_are_errors_never_decisions() {
        let cases = [
            (
                Value::Int(1),
                "reply must be an array `{decision, {headers}, extra...}`, found integer",
            ),
            (
                Value::Array(vec![]),
                "reply is empty; expected `\"allow\"` or `\"deny\"` first",
            ),
            (
                Value::Array(vec![s("maybe")]),
                "unknown decision `maybe`; expected `allow` or `deny`",
            ),
            (
                Value::Array(vec![s("allow"), s("10")]),
                "headers must be an array, found string",
            ),
            (
                Value::Array(vec![
                    s("allow"),
                    Value::Array(vec![s("1"), s("2"), s("3"), s("4")]),
                ]),
                "header value 3 has no declared name (3 declared)",
            ),
            (
                Value::Array(vec![
                    s("allow"),
                    Value::Array(vec![Value::Array(vec![s("x")])]),
                ]),
                "header override 0 must be a `{name, value}` pair",
            ),
            (
                Value::Array(vec![s("allow"), Value::Array(vec![Value::Nil])]),
                "header value 0 is invalid: nil",
            ),
            (
                Value::Array(vec![
                    s("allow"),
                    Value::Array(vec![
                        s("1"),
                        Value::Array(vec![s("Content-Length"), s("0")]),
                    ]),
                ]),
                "header override 1 names `content-length`, which no script may set",
            ),
            (
                Value::Array(vec![
                    s("deny"),
                    Value::Array(vec![Value::Array(vec![
                        s("transfer-encoding"),
                        s("chunked"),
                    ])]),
                ]),
                "header override 0 names `transfer-encoding`, which no script may set",
            ),
            (
                Value::Array(vec![
                    s("deny"),
                    Value::Array(vec![Value::Array(vec![s("keep-alive"), s("timeout=1")])]),
                ]),
                "header override 0 names `keep-alive`, which no script may set",
            ),
        ];
        for (reply, message) in cases {
            assert_eq!(
                parse_reply(reply, &names()).unwrap_err().to_string(),
                message
            );
        }
    }
}

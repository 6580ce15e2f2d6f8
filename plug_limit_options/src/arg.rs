//! An option as a script reads it from its `ARGV`, and a refusal in the script's words.

use std::fmt;

/// One `ARGV` entry, as a script reads it: options are integers or text, and the entries after
/// them a cost that may be signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    /// Past the end of `ARGV`.
    Missing,
    /// An integer, sent as its digits.
    Int(i64),
    /// Text, sent as it is.
    Str(&'a str),
    /// `"-n"`, `"+n"` or `"~n"`: the cost of a refund, a forced charge or a batch.
    Signed(char, u32),
}

impl Arg<'_> {
    /// The entry as the script sees it.
    #[must_use]
    pub fn text(self) -> String {
        match self {
            Self::Missing => String::new(),
            Self::Int(n) => n.to_string(),
            Self::Str(s) => s.to_owned(),
            Self::Signed(sign, n) => format!("{sign}{n}"),
        }
    }

    /// `find(v, '^%d+$') and tonumber(v)`: plain digits, read as a double.
    #[allow(clippy::cast_precision_loss)] // as strtod rounds
    #[must_use]
    #[inline]
    pub fn digits(self) -> Option<f64> {
        match self {
            Self::Int(n) if n >= 0 => Some(n as f64),
            Self::Str(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                s.parse().ok()
            }
            _ => None,
        }
    }

    /// `match(v, '^([+~-])(%d+)$')`, the digits read as a double.
    #[allow(clippy::cast_precision_loss)] // as strtod rounds
    #[must_use]
    #[inline]
    pub fn signed(self) -> Option<(char, f64)> {
        match self {
            Self::Signed(sign, n) => Some((sign, f64::from(n))),
            Self::Int(n) if n < 0 => Some(('-', n.unsigned_abs() as f64)),
            Self::Str(s) => {
                let sign = s.chars().next().filter(|c| matches!(c, '+' | '-' | '~'))?;
                let digits = &s[1..];
                let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
                Some((sign, digits.parse().ok().filter(|_| plain)?))
            }
            Self::Missing | Self::Int(_) => None,
        }
    }
}

/// An option (or cost) refused, in the words of the script that would refuse it, without
/// Redis's `ERR `: `fixed_window: limit must be a positive integer, got '0'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(String);

impl Refusal {
    /// `limiter: field rule, got 'value'`, as every script words a refusal; a long value is
    /// quoted by its [`excerpt`](crate::excerpt) (the scripts never see one: `RuntimeLimit`
    /// refuses it when it is made).
    #[must_use]
    pub fn new(limiter: &str, field: &str, rule: &str, arg: Arg<'_>) -> Self {
        let text = arg.text();
        Self(format!(
            "{}: {field} {rule}, got '{}'",
            crate::excerpt(limiter),
            crate::excerpt(&text)
        ))
    }

    /// A refusal worded otherwise (a wrong number of options).
    #[must_use]
    pub fn worded(text: String) -> Self {
        Self(text)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

impl From<Refusal> for String {
    fn from(refusal: Refusal) -> Self {
        refusal.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_as_a_script_reads_them() {
        assert_eq!(Arg::Str("010").digits(), Some(10.0));
        assert_eq!(Arg::Str("1e3").digits(), None);
        assert_eq!(Arg::Int(-3).digits(), None);
        assert_eq!(Arg::Int(-3).signed(), Some(('-', 3.0)));
        assert_eq!(Arg::Str("~7").signed(), Some(('~', 7.0)));
        assert_eq!(Arg::Str("+").signed(), None);
        assert_eq!(Arg::Signed('+', 4).text(), "+4");
        assert_eq!(
            Refusal::new("gcra", "burst", "must be <= limit", Arg::Int(9)).to_string(),
            "gcra: burst must be <= limit, got '9'"
        );
        let huge = "9".repeat(1 << 20);
        assert_eq!(
            Refusal::new(
                "fixed_window",
                "limit",
                "must be a positive integer",
                Arg::Str(&huge)
            )
            .to_string(),
            format!(
                "fixed_window: limit must be a positive integer, got '{}… (1048576 bytes)'",
                "9".repeat(64)
            )
        );
    }
}

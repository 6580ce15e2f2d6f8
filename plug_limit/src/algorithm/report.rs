//! What a built-in answers of its limit, as numbers: what both header styles are made of.

use super::{Field, Fields};

/// What a built-in answered of the limit that decided a call: its `x-ratelimit-*` values as
/// numbers (`x-ratelimit-limit` as the script sends it: token_bucket's is a policy), and which
/// of its windows decided.
///
/// A twin answers one directly; a script's reply is read into one once, as it arrives. Header
/// text is made of it only when a response is written, in the style the limiter sends, so
/// nothing downstream (a stack choosing its tightest limit, the deny cache counting a wait
/// down, a batch answering from its grant, a refund's deadline) reads a header back.
///
/// The values stay in reply order as the twin answered them, checked once to be numbers after
/// the first: moving them into fields of their own cost a memory check more than reading them
/// where they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    /// Limit, reset, remaining, and retry-after on a denial; numbers after the first. With
    /// them, which of the limit's windows decided, by the position of its option:
    /// multi_window says; every other built-in has the one.
    values: Fields,
}

impl Report {
    /// [`from_fields`](Self::from_fields) of a slice.
    #[cfg(test)]
    pub(crate) fn from_values(values: &[Field], window: u32) -> Result<Self, usize> {
        let mut fields = Fields::default();
        for (position, value) in values.iter().enumerate() {
            fields.push_checked(value.clone()).ok_or(position)?;
        }
        Self::from_fields(fields, window)
    }

    /// The report of a built-in's values in reply order (limit, reset, remaining, and
    /// retry-after on a denial), `window` having decided; `Err` when they are not that, with
    /// numbers after the first: the position that is not.
    pub(crate) fn from_fields(values: Fields, window: u32) -> Result<Self, usize> {
        let report = Self::unchecked(values, window);
        report.check()?;
        Ok(report)
    }

    /// A report of `values` not yet [`check`](Self::check)ed: to check where it is kept,
    /// rather than move it there once checked.
    pub(crate) fn unchecked(mut values: Fields, window: u32) -> Self {
        values.set_window(window);
        Self { values }
    }

    /// Whether the values are what [`from_fields`](Self::from_fields) takes; `Err`: the
    /// position that is not.
    pub(crate) fn check(&self) -> Result<(), usize> {
        let values = &self.values;
        if values.len() < 3 {
            return Err(values.len());
        }
        match (1..values.len()).find(|&i| !matches!(values[i], Field::Int(_))) {
            Some(position) => Err(position),
            None => Ok(()),
        }
    }

    /// The number at `position`, which [`from_fields`](Self::from_fields) checked.
    fn number(&self, position: usize) -> Option<i64> {
        match self.values.get(position) {
            Some(Field::Int(n)) => Some(*n),
            _ => None,
        }
    }

    fn set(&mut self, position: usize, n: i64) {
        if let Some(field) = self.values.get_mut(position) {
            *field = Field::Int(n);
        }
    }

    /// `x-ratelimit-limit`: the deciding quota (gcra's burst; token_bucket's policy).
    pub(crate) fn limit(&self) -> &Field {
        &self.values[0]
    }

    /// Seconds until the deciding quota resets.
    pub(crate) fn reset(&self) -> i64 {
        self.number(1).unwrap_or(0)
    }

    /// What the deciding quota has left.
    pub(crate) fn remaining(&self) -> i64 {
        self.number(2).unwrap_or(0)
    }

    /// Seconds until a denied request may pass, when the built-in says.
    pub(crate) fn retry_after(&self) -> Option<i64> {
        self.number(3)
    }

    /// Which of the limit's windows decided.
    pub(crate) fn window(&self) -> u32 {
        self.values.window()
    }

    /// The values in reply order.
    pub(crate) fn values(&self) -> &[Field] {
        &self.values
    }

    /// The reset sent as the retry-after too, as the seed's fixed_window means it: it answers
    /// none, and a denied client may try again when its window resets.
    pub(crate) fn retry_after_reset(&mut self) {
        if self.retry_after().is_none() {
            let reset = self.reset();
            // A report holds three or four values: there is room for a fourth.
            let _ = self.values.add_retry_after(reset);
        }
    }

    /// Whether the retry-after is the library's (see
    /// [`retry_after_reset`](Self::retry_after_reset)), sent as `retry-after` whatever the
    /// limiter's declared header names.
    pub(crate) fn retry_after_added(&self) -> bool {
        self.values.retry_after_added()
    }

    /// The report of a batch's answer: `reset` and `remaining` as given, and the grant's
    /// retry-after only once the batch is `spent`.
    pub(crate) fn answered_from_batch(&mut self, reset: i64, remaining: i64, spent: bool) {
        self.set(1, reset);
        self.set(2, remaining);
        if !spent {
            self.values.truncate(3);
        }
    }

    /// The report of a batch's denial of a request it could not serve a unit in time: `reset`
    /// as given, nothing remaining, and a retry-after of 0 (the next reservation may bring
    /// units at once; and a deny cache holds no denial of 0).
    pub(crate) fn refused_from_batch(&mut self, reset: i64) {
        self.set(1, reset);
        self.set(2, 0);
        if self.retry_after().is_some() {
            self.set(3, 0);
        } else {
            // A report holds three or four values: there is room for a fourth.
            let _ = self.values.add_retry_after(0);
        }
    }

    /// The report of an answer of a batch's recent share while Redis cannot be reached:
    /// `reset` as given, nothing remaining, and on a denial a retry-after of 0 (the share's
    /// next unit is due within the second), else none.
    pub(crate) fn answered_by_share(&mut self, reset: i64, denied: bool) {
        self.set(1, reset);
        self.set(2, 0);
        self.values.truncate(3);
        if denied {
            // A report holds three or four values: there is room for a fourth.
            let _ = self.values.add_retry_after(0);
        }
    }

    /// The report as it reads `passed` whole seconds later: its waits counted down, never
    /// below zero.
    pub(crate) fn count_down(&mut self, passed: i64) {
        let down = |secs: i64| {
            if secs < 0 {
                secs
            } else {
                (secs - passed).max(0)
            }
        };
        self.set(1, down(self.reset()));
        if let Some(retry_after) = self.retry_after() {
            self.set(3, down(retry_after));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_they_were_given() {
        let values = [Field::Int(10), Field::Int(60), Field::Int(0), Field::Int(7)];
        let report = Report::from_values(&values, 0).unwrap();
        assert_eq!(report.retry_after(), Some(7));
        assert_eq!(report.values(), values);
        let three = Report::from_values(&values[..3], 2).unwrap();
        assert_eq!((three.retry_after(), three.window()), (None, 2));
    }

    #[test]
    fn a_value_out_of_place_is_named_by_its_position() {
        let text = || Field::from("7".to_owned());
        assert_eq!(
            Report::from_values(&[Field::Int(1), text(), Field::Int(0)], 0),
            Err(1)
        );
        assert_eq!(Report::from_values(&[Field::Int(1)], 0), Err(1));
        let five = [const { Field::Int(0) }; 5];
        assert_eq!(Report::from_values(&five, 0), Err(4));
    }

    #[test]
    fn waits_count_down_to_zero() {
        let values = [Field::Int(10), Field::Int(5), Field::Int(0), Field::Int(3)];
        let mut later = Report::from_values(&values, 0).unwrap();
        later.count_down(4);
        assert_eq!((later.reset(), later.retry_after()), (1, Some(0)));
        later.answered_from_batch(9, 8, false);
        assert_eq!(
            (later.reset(), later.remaining(), later.retry_after()),
            (9, 8, None)
        );
    }
}

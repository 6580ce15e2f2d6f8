//! What a built-in answers of its limit, as numbers: what both header styles are made of.

use super::Field;

/// What a built-in answered of the limit that decided a call: its `x-ratelimit-*` values as
/// numbers (`x-ratelimit-limit` as the script sends it: token_bucket's is a policy), and which
/// of its windows decided.
///
/// A twin answers one directly; a script's reply is read into one once, as it arrives. Header
/// text is made of it only when a response is written, in the style the limiter sends, so
/// nothing downstream (a stack choosing its tightest limit, the deny cache counting a wait
/// down, a batch answering from its grant, a refund's deadline) reads a header back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    /// `x-ratelimit-limit`: the deciding quota (gcra's burst; token_bucket's policy).
    pub(crate) limit: Field,
    /// Seconds until the deciding quota resets.
    pub(crate) reset: i64,
    /// What the deciding quota has left.
    pub(crate) remaining: i64,
    /// Seconds until a denied request may pass, when the built-in says.
    pub(crate) retry_after: Option<i64>,
    /// Which of the limit's windows decided, by the position of its option: multi_window
    /// says; every other built-in has the one.
    pub(crate) window: u32,
}

impl Report {
    /// The report of a built-in's values in reply order (limit, reset, remaining, and
    /// retry-after on a denial), `window` having decided; `None` when they are not that, with
    /// numbers after the first, which is the position that is not.
    pub(crate) fn from_values(values: &[Field], window: u32) -> Result<Self, usize> {
        let number = |position: usize| match values.get(position) {
            Some(Field::Int(n)) => Ok(*n),
            _ => Err(position),
        };
        match values.len() {
            3 | 4 => {}
            few @ 0..3 => return Err(few),
            _ => return Err(4),
        }
        Ok(Self {
            limit: values[0].clone(),
            reset: number(1)?,
            remaining: number(2)?,
            retry_after: if values.len() == 4 {
                Some(number(3)?)
            } else {
                None
            },
            window,
        })
    }

    /// The values in reply order, as [`from_values`](Self::from_values) reads them.
    pub(crate) fn values(&self) -> impl Iterator<Item = Field> + '_ {
        [
            Some(self.limit.clone()),
            Some(Field::Int(self.reset)),
            Some(Field::Int(self.remaining)),
            self.retry_after.map(Field::Int),
        ]
        .into_iter()
        .flatten()
    }

    /// The report as it reads `passed` whole seconds later: its waits counted down, never
    /// below zero.
    pub(crate) fn counted_down(&self, passed: i64) -> Self {
        let down = |secs: i64| {
            if secs < 0 {
                secs
            } else {
                (secs - passed).max(0)
            }
        };
        Self {
            reset: down(self.reset),
            retry_after: self.retry_after.map(down),
            ..self.clone()
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
        assert_eq!(report.retry_after, Some(7));
        assert_eq!(report.values().collect::<Vec<_>>(), values);
        let three = Report::from_values(&values[..3], 2).unwrap();
        assert_eq!((three.retry_after, three.window), (None, 2));
    }

    #[test]
    fn a_value_out_of_place_is_named_by_its_position() {
        let text = || Field::Text("7".into());
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
        let later = Report::from_values(&values, 0).unwrap().counted_down(4);
        assert_eq!((later.reset, later.retry_after), (1, Some(0)));
    }
}

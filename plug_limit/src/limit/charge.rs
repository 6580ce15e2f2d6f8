//! How many units one evaluation takes or gives back.

/// What one evaluation does with its units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Charge {
    /// Takes them if the limit has room (0: a peek); a script's `cost` argument `n`.
    Take(u32),
    /// Gives back up to that many units the key holds, and always allows: `-n`.
    Refund(u32),
    /// Takes them whatever the limit (the request was served): `+n`.
    Force(u32),
    /// Takes up to that many, as many as the key has left (fixed_window and token_bucket):
    /// `~n`, a local batch's reservation. The outcome's first extra value is the units taken.
    UpTo(u32),
}

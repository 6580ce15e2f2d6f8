//! How many units one evaluation takes or gives back.

/// What one evaluation does with its units.
///
/// The engine asks in whole units (`Charge`, the default `u32`); a twin reads the same
/// argument as its script does, as a double (`Charge<f64>` for a script with local batches,
/// `Charge<f64, Infallible>` for one without, which cannot be handed a batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Charge<N = u32, Batch = N> {
    /// Takes them if the limit has room (0: a peek); a script's `cost` argument `n`.
    Take(N),
    /// Gives back up to that many units the key holds, and always allows: `-n`.
    Refund(N),
    /// Takes them whatever the limit (the request was served): `+n`.
    Force(N),
    /// Takes up to that many, as many as the key has left (fixed_window and token_bucket):
    /// `~n`, a local batch's reservation. The outcome's first extra value is the units taken.
    UpTo(Batch),
}

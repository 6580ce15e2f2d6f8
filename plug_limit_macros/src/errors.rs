//! Collecting independent errors, so one compile shows every mistake.

/// Errors gathered while checking independent parts of the input.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Keeps the error of `result`, if any, and passes its value on.
    pub(crate) fn push<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                self.add(error);
                None
            }
        }
    }

    /// Keeps `error`.
    pub(crate) fn add(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    /// Every error kept, or `value` when there is none and it was made.
    pub(crate) fn finish_with<T>(self, value: Option<T>) -> syn::Result<T> {
        match (self.0, value) {
            (Some(errors), _) => Err(errors),
            (None, Some(value)) => Ok(value),
            // Every path that makes no value reports why; this only keeps the macro total.
            (None, None) => Err(syn::Error::new(
                proc_macro2::Span::call_site(),
                "invalid `#[rate_limit]` arguments",
            )),
        }
    }

    /// Every error kept, or `value` when there is none.
    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(errors) => Err(errors),
            None => Ok(value),
        }
    }
}

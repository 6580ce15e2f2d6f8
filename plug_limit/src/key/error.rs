//! Why a key could not be extracted.

use std::borrow::Cow;

/// Why a key could not be extracted from a request.
///
/// The request then follows its limiter's [`KeyFailure`](crate::KeyFailure) policy, and the
/// error is logged at `DEBUG`. No message quotes a header value: those bytes are the client's, and they
/// stay out of the logs.
///
/// # Example
///
/// ```
/// use plug_limit::key::KeyError;
///
/// let error = KeyError::new("request has no tenant");
/// assert_eq!(error.to_string(), "request has no tenant");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A reason given by a key extractor of your own, through [`KeyError::new`].
    #[error("{0}")]
    Custom(Cow<'static, str>),
    /// The request has no header of this name.
    #[error("missing header `{0}`")]
    MissingHeader(&'static str),
    /// The header's value is not visible ASCII, so it cannot be a key.
    #[error("header `{0}` is not visible ASCII")]
    NotVisibleAscii(&'static str),
    /// The request carries no TCP peer address: the app is not served with connect info.
    #[error("no peer address: serve with `into_make_service_with_connect_info::<SocketAddr>()`")]
    NoPeerAddress,
    /// A single-value client IP header appears more than once. A proxy sets it once, replacing
    /// any the client sent, so two lines mean one of them is the client's and neither can be
    /// told apart.
    #[error("header `{0}` appears more than once: the proxy must replace it, not add to it")]
    RepeatedHeader(&'static str),
    /// A single-value client IP header does not hold an IP address.
    #[error("header `{0}` is not an IP address")]
    NotAnIp(&'static str),
    /// `CloudFront-Viewer-Address` does not hold an `ip:port` pair.
    #[error("header `{0}` is not an `ip:port` address")]
    NotAnIpAndPort(&'static str),
    /// The rightmost entry of a list header (`X-Forwarded-For`, the `for=` of `Forwarded`)
    /// is not an IP address, with or without a port.
    #[error("the rightmost entry of `{0}` is not an IP address")]
    RightmostNotAnIp(&'static str),
    /// The last element of `Forwarded` does not follow RFC 7239 (an unclosed quote, a
    /// parameter without `=`, a repeated parameter).
    #[error("the last element of `forwarded` is malformed")]
    MalformedForwarded,
    /// The last element of `Forwarded` has no `for=` parameter.
    #[error("the last element of `forwarded` has no `for=`")]
    ForwardedWithoutFor,
    /// The last element of `Forwarded` says `for=unknown`.
    #[error("the last element of `forwarded` says `for=unknown`")]
    ForwardedUnknown,
    /// The last element of `Forwarded` hides the client behind an obfuscated identifier
    /// (`for=_hidden`, RFC 7239 section 6.3).
    #[error("the last element of `forwarded` has an obfuscated `for=` identifier")]
    ForwardedObfuscated,
    /// Every extractor of a [`Or`](crate::key::Or) chain failed.
    #[error("{first}; then {then}")]
    Neither {
        /// Why the first extractor failed.
        first: Box<Self>,
        /// Why the fallback failed.
        then: Box<Self>,
    },
}

impl KeyError {
    /// A key error with the given reason, e.g. `"request has no tenant"`.
    #[must_use]
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Self {
        Self::Custom(reason.into())
    }
}

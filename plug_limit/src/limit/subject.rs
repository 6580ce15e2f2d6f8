//! [`Subject`]: what a programmatic check counts against.

/// What [`PlugLimit::check`](crate::PlugLimit::check), [`peek`](crate::PlugLimit::peek) and
/// [`reset`](crate::PlugLimit::reset) count against: a client key, alone or within the scope
/// of a route.
///
/// A bare `&str` is a key of its own, apart from every route. [`Subject::scoped`] names the
/// budget a route keeps for a client: the scope is the route's (its matched path, such as
/// `/users/{id}`, or its `#[rate_limit(scope = ..)]`, or [`Limit::SCOPE`](crate::Limit::SCOPE)),
/// the client is what the route's key extractor returns.
///
/// # Example
///
/// ```
/// use plug_limit::{Opt, PlugLimit, Subject};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), plug_limit::Error> {
/// let limits = PlugLimit::memory();
/// let opts = [Opt::Int(10), Opt::Int(60)];
/// // A job's own budget.
/// limits.check("fixed_window", "nightly-export", &opts).await?;
/// // Forgive client 192.0.2.1 what it spent on `GET /search`.
/// limits.reset("fixed_window", Subject::scoped("/search", "192.0.2.1")).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subject<'a> {
    pub(crate) scope: &'a str,
    pub(crate) client: &'a str,
}

impl<'a> Subject<'a> {
    /// The client key `client` within `scope`: the budget a route with that scope keeps.
    #[must_use]
    pub const fn scoped(scope: &'a str, client: &'a str) -> Self {
        Self { scope, client }
    }
}

impl<'a> From<&'a str> for Subject<'a> {
    fn from(client: &'a str) -> Self {
        Self { scope: "", client }
    }
}

impl<'a> From<&'a String> for Subject<'a> {
    fn from(client: &'a String) -> Self {
        Self::from(client.as_str())
    }
}

//! Header styles: which rate-limit fields a limiter's outcomes carry, and the one step that
//! gives them their final form.

use serde::Deserialize;

use super::Outcome;
use super::ietf::{Draft10, PartitionKeys};
use crate::algorithm::Builtin;
use crate::limit::Opt;

/// The rate-limit header fields a limiter sends, set for every limiter with
/// [`Builder::header_style`](crate::Builder::header_style) and for one with
/// [`Limiter::header_style`](crate::Limiter::header_style) (the limiter's wins). In a
/// [`Config`](crate::Config): `"header_style": "legacy"` or `"draft10"`.
///
/// Both styles send `retry-after` (seconds) on every denial of every built-in limiter.
///
/// # `Legacy` (the default)
///
/// The de facto `x-ratelimit-*` headers, as the scripts answer them:
///
/// ```text
/// x-ratelimit-limit: 100
/// x-ratelimit-reset: 17
/// x-ratelimit-remaining: 0
/// retry-after: 17
/// ```
///
/// # `Draft10`
///
/// The fields of the IETF draft
/// [draft-ietf-httpapi-ratelimit-headers-10](https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/),
/// Structured Field lists (RFC 9651) of String items naming a policy. The same denial:
///
/// ```text
/// ratelimit-policy: "fixed_window";q=100;w=60;pk=:2b6dF0lm1Ns6yA/m:
/// ratelimit: "fixed_window";r=0;t=17;pk=:2b6dF0lm1Ns6yA/m:
/// retry-after: 17
/// ```
///
/// - `RateLimit-Policy` has one item per quota: the policy's name, `q` the quota (requests per
///   window, from the limit's options), `w` the window in seconds. `qu` is left out: every
///   built-in counts requests (weighted by their cost), the draft's default unit.
/// - `RateLimit` has one item, for the policy that decided: `r` the requests remaining, `t`
///   the seconds until the quota resets (the `x-ratelimit-reset` of the legacy style).
/// - `pk`, the partition key, tells a client which budget it is counted under, without
///   revealing the key it is counted by: 12 bytes of HMAC-SHA256 of the request's namespaced
///   key (prefix, limiter, route scope and client key) under a secret. The secret is drawn
///   at random once per process unless set with
///   [`Builder::partition_key_secret`](crate::Builder::partition_key_secret); set it to the
///   same value on every instance for clients to see one `pk` per partition wherever they
///   land.
/// - A policy is named after its limiter: `"fixed_window"`, `"token_bucket"`, ..., or the name
///   a [`Limiter`](crate::Limiter) is registered under. `multi_window` lists one policy per
///   window, named `"<limiter>:<window>s"`, and `RateLimit` names the window that decided:
///
/// ```text
/// ratelimit-policy: "multi_window:1s";q=10;w=1;pk=:...:, "multi_window:3600s";q=100;w=3600;pk=:...:
/// ratelimit: "multi_window:3600s";r=57;t=1210;pk=:...:
/// ```
///
/// Quota and window come from the built-in's options, so `Draft10` applies to built-in
/// limiters (also registered under another name, e.g. [`Limiter::token_bucket`](crate::Limiter::token_bucket)).
/// A custom Lua script declares no quota or window: its limiter keeps the headers the script
/// answers, in either style.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum HeaderStyle {
    /// `x-ratelimit-limit`, `x-ratelimit-reset`, `x-ratelimit-remaining` and `retry-after`.
    #[default]
    Legacy,
    /// `RateLimit-Policy`, `RateLimit` and `retry-after`, as draft-ietf-httpapi-ratelimit-headers-10
    /// defines them.
    Draft10,
}

/// How one limiter's outcomes get their final headers: resolved once, at build.
pub(crate) struct Styler {
    /// The built-in the limiter runs; `None` for a custom script, whose headers stay its own.
    algorithm: Option<Builtin>,
    /// Set for a built-in in [`HeaderStyle::Draft10`].
    draft10: Option<Draft10>,
}

impl Styler {
    /// The styler of the limiter `name`, running `algorithm`, in `style`; `keys` hash its
    /// `pk` (asked for only in [`HeaderStyle::Draft10`]).
    pub(crate) fn new(
        name: &str,
        algorithm: Option<Builtin>,
        style: HeaderStyle,
        keys: impl FnOnce() -> PartitionKeys,
    ) -> Self {
        let draft10 = match (style, algorithm) {
            (HeaderStyle::Draft10, Some(_)) => Some(Draft10::new(name, keys())),
            _ => None,
        };
        Self { algorithm, draft10 }
    }

    /// Whether its outcomes list their limit's policy (the draft-10 style), so that a stack's
    /// headers list every limit's rather than the tightest's alone.
    pub(crate) fn lists_policies(&self) -> bool {
        self.draft10.is_some()
    }

    /// Refuses a name that cannot name a draft-10 policy (an sf-string is printable ASCII).
    pub(crate) fn check_name(name: &str, style: HeaderStyle) -> Result<(), &'static str> {
        if style == HeaderStyle::Draft10 && !Draft10::can_name(name) {
            return Err(
                "the `draft10` header style names policies after their limiter: the name must be printable ASCII",
            );
        }
        Ok(())
    }

    /// The outcome in its limiter's style, for the client counted under the namespaced `key`
    /// with the limit's `opts`: how its report is to be written, which happens only when its
    /// headers are read or sent.
    ///
    /// In the legacy style only a fixed_window denial changes (its reset is sent as
    /// `retry-after` too): every other outcome passes through untouched, with nothing
    /// allocated.
    pub(crate) fn finish<'k>(
        &self,
        key: impl FnOnce() -> &'k str,
        opts: &[Opt],
        outcome: Outcome,
    ) -> Outcome {
        // Small, so that it inlines: an outcome left as it is (most of them) is not moved in
        // and out of a call.
        match self.algorithm {
            Some(algorithm)
                if self.draft10.is_some() || reset_is_retry_after(algorithm, &outcome) =>
            {
                self.restyle(algorithm, key, opts, outcome)
            }
            _ => outcome,
        }
    }

    /// [`finish`](Self::finish) of an outcome it may change: a fixed_window denial, or any
    /// outcome in the draft-10 style.
    fn restyle<'k>(
        &self,
        algorithm: Builtin,
        key: impl FnOnce() -> &'k str,
        opts: &[Opt],
        mut outcome: Outcome,
    ) -> Outcome {
        let denied = !outcome.is_allowed();
        let reset_is_retry_after = reset_is_retry_after(algorithm, &outcome);
        let Some(reported) = outcome.reported_mut() else {
            return outcome;
        };
        if reset_is_retry_after {
            reported.report.retry_after_reset();
        }
        let Some(draft10) = &self.draft10 else {
            return outcome;
        };
        reported.draft10 = draft10
            .items(algorithm, key(), opts, &reported.report, denied)
            .map(Box::new);
        if reported.draft10.is_none() {
            tracing::debug!(target: "plug_limit", limiter = %draft10.name(), "options out of contract: the draft-10 fields are left out");
        }
        outcome
    }
}

/// Whether `outcome`'s reset is also sent as its `retry-after`: the seed's fixed_window script
/// answers no `retry-after`, and its window's reset is when a denied client may try again.
fn reset_is_retry_after(algorithm: Builtin, outcome: &Outcome) -> bool {
    algorithm == Builtin::FixedWindow && !outcome.is_allowed()
}

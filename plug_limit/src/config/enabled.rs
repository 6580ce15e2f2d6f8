//! Whether rate limiting is on, decided per request.

use serde::Deserialize;

/// Whether rate limiting is on. Read on every request, so an environment variable can turn
/// limits off and on without a restart of the router.
///
/// A disabled [`PlugLimit`](crate::PlugLimit) makes no Redis call and adds no headers.
///
/// # Example
///
/// ```
/// use plug_limit::Enabled;
///
/// // On unless PLUG_LIMIT_ENABLED is "false" or "0".
/// let enabled = Enabled::env("PLUG_LIMIT_ENABLED", true);
/// # let _ = enabled;
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Enabled {
    /// Fixed: `true` is on, `false` is off.
    Fixed(bool),
    /// Read from an environment variable on every request: `"true"`/`"1"` is on,
    /// `"false"`/`"0"` is off; unset or anything else is `default`.
    Env {
        /// The variable's name, e.g. `PLUG_LIMIT_ENABLED`.
        env: String,
        /// The value when the variable is unset or not a boolean.
        #[serde(default = "on")]
        default: bool,
    },
}

fn on() -> bool {
    true
}

impl Enabled {
    /// Read from the environment variable `var` on every request, falling back to `default`.
    #[must_use]
    pub fn env(var: impl Into<String>, default: bool) -> Self {
        Self::Env {
            env: var.into(),
            default,
        }
    }

    /// Whether limits apply now.
    #[must_use]
    #[inline]
    pub fn is_enabled(&self) -> bool {
        // Inline, as every check asks: a fixed answer costs no call.
        match self {
            Self::Fixed(on) => *on,
            Self::Env { env, default } => from_env(env, *default),
        }
    }
}

/// Whether `env` says limits apply now: `default` unless it is set to `true`, `1`, `false` or
/// `0`.
fn from_env(env: &str, default: bool) -> bool {
    match std::env::var(env).as_deref() {
        Ok("true" | "1") => true,
        Ok("false" | "0") => false,
        _ => default,
    }
}

impl Default for Enabled {
    fn default() -> Self {
        Self::Fixed(true)
    }
}

impl From<bool> for Enabled {
    fn from(on: bool) -> Self {
        Self::Fixed(on)
    }
}

//! A request's Redis keys: the client's key, namespaced by prefix, limiter and scope.

use crate::key::Key;

/// A request's namespaced keys: built-in limiters and most custom ones take one, kept without
/// a `Vec` around it.
pub(crate) enum Keys {
    One(String),
    Many(Vec<String>),
}

impl Keys {
    /// `{prefix}:{limiter}:{scope}:{part}` for every part of `key`.
    pub(crate) fn namespaced(key: &Key, prefix: &str, limiter: &str, scope: &str) -> Self {
        let namespace = |part: &str| {
            let mut full =
                String::with_capacity(prefix.len() + limiter.len() + scope.len() + part.len() + 3);
            for piece in [prefix, ":", limiter, ":", scope, ":", part] {
                full.push_str(piece);
            }
            full
        };
        let mut parts = key.iter();
        let first = namespace(parts.next().unwrap_or_default());
        match parts.next() {
            None => Self::One(first),
            Some(second) => {
                let mut all = vec![first, namespace(second)];
                all.extend(parts.map(namespace));
                Self::Many(all)
            }
        }
    }

    /// `{prefix}:{limiter}:{key}`: the key of a programmatic check.
    pub(crate) fn programmatic(key: &str, prefix: &str, limiter: &str) -> Self {
        Self::One(format!("{prefix}:{limiter}:{key}"))
    }

    /// The first key: the client's, for every built-in.
    pub(crate) fn first(&self) -> &str {
        match self {
            Self::One(key) => key,
            Self::Many(keys) => keys.first().map_or("", String::as_str),
        }
    }

    pub(crate) fn as_slice(&self) -> &[String] {
        match self {
            Self::One(key) => std::slice::from_ref(key),
            Self::Many(keys) => keys,
        }
    }
}

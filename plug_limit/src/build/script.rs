//! [`Script`]: a Lua script registered once by name, for several limiters to share.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

use crate::error::BuildError;
use crate::lua::Lua;

/// A Lua script registered once with [`Builder::script`](crate::Builder::script) and run by
/// every limiter made with [`Limiter::script_named`](crate::Limiter::script_named) (the seed's
/// `:luascripts`): read, checked and hashed once, loaded into Redis once, whatever number of
/// limiters use it with their own keys, policies, hooks and header names.
///
/// The header names given here are the default of the limiters that use it; a limiter's own
/// [`headers`](crate::Limiter::headers) replace them.
///
/// # Example
///
/// ```
/// use plug_limit::{key, FailurePolicy, Limiter, PlugLimit, Script};
///
/// # fn make(pool: deadpool_redis::Pool) -> Result<PlugLimit, plug_limit::BuildError> {
/// PlugLimit::builder(pool)
///     .script(
///         "quota",
///         Script::lua("return {'allow', {ARGV[1]}}").headers(["x-quota-limit"]),
///     )
///     .limiter("quota_by_user", Limiter::script_named("quota").key(key::header("x-user")))
///     .limiter(
///         "quota_by_ip",
///         Limiter::script_named("quota").on_failure(FailurePolicy::Closed),
///     )
///     .build()
/// # }
/// ```
#[must_use]
#[derive(Clone, Deserialize)]
#[serde(from = "ScriptFile")]
pub struct Script {
    source: ScriptSource,
    headers: Option<Vec<String>>,
    /// What a configuration file's table of it breaks, refused by `build()`.
    #[serde(skip)]
    invalid: Option<&'static str>,
}

/// A shared script as a configuration file writes it (see [`Config::scripts`](crate::Config)).
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ScriptFile {
    script: Option<String>,
    script_file: Option<PathBuf>,
    headers: Option<Vec<String>>,
}

impl From<ScriptFile> for Script {
    fn from(file: ScriptFile) -> Self {
        let script = match (file.script, file.script_file) {
            (Some(lua), None) => Self::lua(lua),
            (None, Some(path)) => Self::file(path),
            _ => Self {
                invalid: Some("exactly one of `script` and `script_file` is required"),
                ..Self::lua("")
            },
        };
        Self {
            headers: file.headers,
            ..script
        }
    }
}

#[derive(Clone)]
enum ScriptSource {
    Lua(String),
    File(PathBuf),
}

impl Script {
    /// The Lua source.
    pub fn lua(source: impl Into<String>) -> Self {
        Self {
            source: ScriptSource::Lua(source.into()),
            headers: None,
            invalid: None,
        }
    }

    /// The Lua source in the file at `path`, read by [`Builder::build`](crate::Builder::build).
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            source: ScriptSource::File(path.into()),
            headers: None,
            invalid: None,
        }
    }

    /// The names of the header values the script returns, in order: the default of the
    /// limiters that run it.
    pub fn headers<I>(mut self, names: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.headers = Some(names.into_iter().map(Into::into).collect());
        self
    }
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            ScriptSource::Lua(lua) => format!("{} bytes of Lua", lua.len()),
            ScriptSource::File(path) => path.display().to_string(),
        };
        f.debug_struct("Script")
            .field("source", &source)
            .field("headers", &self.headers)
            .finish()
    }
}

/// A registered script, read and hashed: what the limiters naming it share.
pub(super) struct Compiled {
    pub(super) lua: Arc<Lua>,
    pub(super) headers: Option<Vec<String>>,
}

/// Reads and hashes every registered script once, refusing a name taken twice.
pub(super) fn compile(
    scripts: Vec<(String, Script)>,
) -> Result<HashMap<String, Compiled>, BuildError> {
    let mut compiled = HashMap::with_capacity(scripts.len());
    for (name, script) in scripts {
        let field = format!("scripts.{}", plug_limit_options::excerpt(&name));
        if name.is_empty() {
            return Err(BuildError::invalid(
                field,
                "a script name must be non-empty",
            ));
        }
        if let Some(rule) = script.invalid {
            return Err(BuildError::invalid(field, rule));
        }
        let lua = match script.source {
            ScriptSource::Lua(lua) => lua_source(&field, "script", lua)?,
            ScriptSource::File(path) => lua_file(&field, path)?,
        };
        let entry = Compiled {
            lua: Arc::new(lua),
            headers: script.headers,
        };
        if compiled.insert(name, entry).is_some() {
            return Err(BuildError::invalid(field, "is registered more than once"));
        }
    }
    Ok(compiled)
}

/// The script in the file at `path`, refused when unreadable or empty.
pub(super) fn lua_file(field: &str, path: PathBuf) -> Result<Lua, BuildError> {
    let lua = std::fs::read_to_string(&path).map_err(|source| BuildError::ScriptFile {
        field: format!("{field}.script_file"),
        path,
        source,
    })?;
    lua_source(field, "script_file", lua)
}

/// A script's source, refused when empty.
pub(super) fn lua_source(field: &str, which: &str, lua: String) -> Result<Lua, BuildError> {
    if lua.trim().is_empty() {
        return Err(BuildError::invalid(
            format!("{field}.{which}"),
            "the Lua script is empty",
        ));
    }
    Ok(Lua::new(lua))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::build::{Limiter, Script};
    use crate::handle::PlugLimit;

    fn pool() -> deadpool_redis::Pool {
        deadpool_redis::Config::from_url("redis://127.0.0.1:1/")
            .create_pool(Some(deadpool_redis::Runtime::Tokio1))
            .unwrap()
    }

    #[test]
    fn limiters_naming_one_script_share_its_source_and_hash() {
        let limits = PlugLimit::builder(pool())
            .script(
                "quota",
                Script::lua("return {'allow', {}}").headers(["x-a"]),
            )
            .limiter("one", Limiter::script_named("quota"))
            .limiter(
                "two",
                Limiter::script_named("quota").headers(["x-b", "x-c"]),
            )
            .build()
            .unwrap();
        let registry = limits.decider().registry();
        let (one, two) = (registry.get("one").unwrap(), registry.get("two").unwrap());
        assert!(Arc::ptr_eq(&one.program.script, &two.program.script));
        assert_eq!(one.program.headers.len(), 1);
        assert_eq!(one.program.headers[0], "x-a");
        assert_eq!(two.program.headers.len(), 2);
        assert_eq!(two.program.headers[1], "x-c");
    }

    #[test]
    fn unknown_duplicate_and_empty_scripts_are_refused_by_name() {
        let refused = |builder: crate::Builder| builder.build().unwrap_err().to_string();
        assert_eq!(
            refused(PlugLimit::builder(pool()).limiter("one", Limiter::script_named("nope"))),
            "invalid `limiters.one.script_name`: no script is registered as `nope`"
        );
        assert_eq!(
            refused(
                PlugLimit::builder(pool())
                    .script("quota", Script::lua("return 1"))
                    .script("quota", Script::lua("return 2"))
            ),
            "invalid `scripts.quota`: is registered more than once"
        );
        assert_eq!(
            refused(PlugLimit::builder(pool()).script("quota", Script::lua("  "))),
            "invalid `scripts.quota.script`: the Lua script is empty"
        );
    }
}

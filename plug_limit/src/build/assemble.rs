//! Validating a [`Builder`]'s settings and building the [`PlugLimit`](crate::PlugLimit) they describe.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use plug_limit_options::excerpt;

use super::handler_uses::{check_limiters, check_stacked, check_takes};
use super::limiter::Source;
use super::script::{Compiled, compile, lua_file, lua_source};
use super::store::Kind;
use super::{Builder, Limiter};
use crate::algorithm::{Builtin, Runtime};
use crate::backend::{Backend, MemoryBackend, Program, RedisBackend, RedisSettings};
use crate::clock::SystemClock;
use crate::config::{Enabled, FailurePolicy, LocalBatches};
use crate::engine::batch::Batches;
use crate::engine::{Decider, DenyCache, Entry, LogThrottle, Registry, RuleSet, Settings};
use crate::error::BuildError;
use crate::handle::PlugLimit;
use crate::outcome::ietf::PartitionKeys;
use crate::outcome::{Names, Styler, is_framing};
use crate::telemetry::BreakerLabel;

/// The longest a circuit breaker may stay open: longer hides a recovered Redis for no gain.
const MAX_OPEN_FOR: Duration = Duration::from_secs(3600);

/// The longest key prefix, in bytes: every key of every check carries it, to Redis and into
/// the memory backend's hash, so a long one costs on every request for nothing it tells apart.
const MAX_PREFIX: usize = 64;

impl Builder {
    /// Validates the configuration and builds the [`PlugLimit`](crate::PlugLimit).
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the first invalid field and the rule it breaks: an empty or
    /// spaced `prefix`, or one longer than 64 bytes, a zero `timeout` or `memory_capacity`, an empty `enabled` variable
    /// name, a limiter name that is empty, taken twice or a built-in's, an empty or unreadable
    /// script, an invalid header name, a config limiter without exactly one script or
    /// built-in, a config limiter's own `redis_url` on the memory backend, or a
    /// limiter that a `#[rate_limit]` handler of this program uses but that is not registered.
    pub fn build(mut self) -> Result<PlugLimit, BuildError> {
        if let Some(error) = self.errors.drain(..).next() {
            return Err(error);
        }
        self.check_settings()?;
        let mut registry = self.builtins();
        let scripts = compile(std::mem::take(&mut self.scripts))?;
        for (name, limiter) in std::mem::take(&mut self.limiters) {
            let entry = self.custom_entry(&name, limiter, &scripts)?;
            if !registry.insert(entry) {
                let rule = if Builtin::from_name(&name).is_some() {
                    "is a built-in limiter's name; register this limiter under another name"
                } else {
                    "is registered more than once"
                };
                return Err(BuildError::invalid(
                    format!("limiters.{}", excerpt(&name)),
                    rule,
                ));
            }
        }
        if self.check_handlers {
            check_handler_uses(&registry)?;
        }
        Ok(self.finish(registry))
    }

    /// The handle's own settings, each against its rule.
    fn check_settings(&self) -> Result<(), BuildError> {
        // Braces would put a Redis Cluster hash tag before the one the library chooses.
        if self.prefix.is_empty()
            || self
                .prefix
                .contains(|c: char| c.is_whitespace() || c == '{' || c == '}')
        {
            return Err(BuildError::invalid(
                "prefix",
                "must be non-empty and contain no whitespace, `{` or `}`",
            ));
        }
        if self.prefix.len() > MAX_PREFIX {
            return Err(BuildError::invalid(
                "prefix",
                format!(
                    "must be at most {MAX_PREFIX} bytes, got {} bytes",
                    self.prefix.len()
                ),
            ));
        }
        if self.timeout.is_zero() {
            return Err(BuildError::invalid(
                self.spelled.timeout,
                "must be greater than zero",
            ));
        }
        if self.on_failure == FailurePolicy::LocalShare {
            return Err(BuildError::invalid(
                "on_failure",
                "`local_share` decides by a limiter's local batches: set it on such a limiter, not for all",
            ));
        }
        if self.breaker.failures() == 0 {
            return Err(BuildError::invalid(
                "circuit_breaker.failures",
                "must be at least 1",
            ));
        }
        if self.breaker.open_for().is_zero() || self.breaker.open_for() > MAX_OPEN_FOR {
            return Err(BuildError::invalid(
                self.spelled.open_for,
                "must be greater than zero and at most 1 hour",
            ));
        }
        if self.memory_capacity == 0 {
            return Err(BuildError::invalid("memory_capacity", "must be at least 1"));
        }
        if !(1..=1_000_000).contains(&self.wait_queue) {
            return Err(BuildError::invalid("wait_queue", "must be 1..=1000000"));
        }
        if let Enabled::Env { env, .. } = &self.enabled
            && (env.is_empty() || env.contains(['=', '\0']))
        {
            return Err(BuildError::invalid(
                "enabled.env",
                "must be a non-empty variable name without `=`",
            ));
        }
        if let Some((field, rule)) = self.rules.invalid() {
            return Err(BuildError::invalid(field, rule));
        }
        Ok(())
    }

    /// Builds with the built-in limiters only; the defaults need no validation.
    pub(crate) fn build_default(self) -> PlugLimit {
        let registry = self.builtins();
        self.finish(registry)
    }

    /// Every built-in under its own name, with this builder's settings.
    fn builtins(&self) -> Registry {
        let mut registry = Registry::default();
        for algorithm in Builtin::ALL.into_iter() {
            let defaults = Limiter::from_source(Source::BuiltIn(algorithm));
            registry.insert(self.entry(Program::builtin(algorithm), None, defaults));
        }
        registry
    }

    /// A limiter's entry: its program and backend, and its settings or else this builder's.
    fn entry(&self, program: Program, backend: Option<Backend>, limiter: Limiter) -> Entry {
        let style = Styler::new(
            &program.name,
            program.algorithm,
            limiter.header_style.unwrap_or(self.header_style),
            || {
                self.partition_keys
                    .clone()
                    .unwrap_or_else(PartitionKeys::process)
            },
        );
        let batches = limiter.batches.map(|settings| {
            // `build` refuses 0: the fallback is never taken.
            let capacity = NonZeroUsize::new(self.memory_capacity).unwrap_or(NonZeroUsize::MIN);
            Batches::new(
                settings,
                program.clone(),
                capacity,
                self.timeout,
                &self.prefix,
            )
        });
        Entry {
            batches,
            program,
            backend,
            key: limiter.key.unwrap_or_else(|| Arc::clone(&self.key)),
            on_failure: limiter.on_failure.unwrap_or(self.on_failure),
            on_key_failure: limiter.on_key_failure.unwrap_or(self.on_key_failure),
            deny_cache: limiter.deny_cache.unwrap_or(self.deny_cache),
            log_level: limiter.log_level.unwrap_or(self.log_level),
            failures: LogThrottle::new(),
            shadow: limiter.shadow.unwrap_or(self.shadow),
            shadow_denials: LogThrottle::new(),
            style,
            rules: RuleSet::merged(limiter.rules.as_ref(), &self.rules),
            hook: limiter.hook.or_else(|| self.hook.clone()),
        }
    }

    /// How a Redis backend of this builder calls Redis.
    fn redis_settings(&self) -> RedisSettings {
        RedisSettings {
            timeout: self.timeout,
            clock: self.clock.clone(),
            breaker: self.breaker,
            log_level: self.log_level,
            pool: BreakerLabel::shared(),
        }
    }

    /// A limiter's local batches against their rules: a limiter that batches, on Redis, by the
    /// process's own clock.
    fn check_batches(
        &self,
        field: &str,
        limiter: &Limiter,
        batches: &LocalBatches,
    ) -> Result<(), BuildError> {
        let batched = matches!(
            limiter.source,
            Source::BuiltIn(Builtin::FixedWindow | Builtin::TokenBucket)
        );
        let field = format!("{field}.local_batches");
        if !batched {
            let rule = "only fixed_window and token_bucket limiters take local batches";
            return Err(BuildError::invalid(field, rule));
        }
        if matches!(self.store.0, Kind::Memory) {
            let rule = "local batches need the Redis backend: memory decides without a round trip";
            return Err(BuildError::invalid(field, rule));
        }
        if self.clock.is_some() {
            // A batch's units are spent by this process's monotonic clock until shortly
            // before their window ends; a set clock moves windows by itself.
            let rule = "local batches time their units by the process's own clock: they \
                        cannot be used with `Builder::clock`";
            return Err(BuildError::invalid(field, rule));
        }
        if let Some((setting, rule)) = batches.invalid() {
            return Err(BuildError::invalid(format!("{field}.{setting}"), rule));
        }
        Ok(())
    }

    /// A limiter's name and settings, each against its rule, before anything is made of them.
    fn check_limiter(&self, name: &str, field: &str, limiter: &Limiter) -> Result<(), BuildError> {
        if name.is_empty() || !name.chars().all(plug_limit_options::limiter_name_char) {
            return Err(BuildError::invalid(
                field.to_owned(),
                "a limiter name must be non-empty, without whitespace, `:`, control or invisible characters",
            ));
        }
        // Every key of the limiter carries its name, as it carries the prefix: the same bound.
        if name.len() > MAX_PREFIX {
            return Err(BuildError::invalid(
                field.to_owned(),
                format!(
                    "a limiter name must be at most {MAX_PREFIX} bytes, got {} bytes",
                    name.len()
                ),
            ));
        }
        if let Some((suffix, rule)) = &limiter.invalid {
            return Err(BuildError::invalid(
                format!("{field}{suffix}"),
                rule.clone(),
            ));
        }
        let memory = matches!(self.store.0, Kind::Memory);
        if memory && limiter.redis_from_url {
            return Err(BuildError::invalid(
                format!("{field}.redis_url"),
                "a limiter's own Redis pool needs the Redis backend",
            ));
        }
        let custom_rule = match (&limiter.source, memory) {
            (Source::BuiltIn(_), _) => None,
            (_, true) => {
                Some("custom Lua scripts need Redis: the memory backend runs built-in limiters")
            }
            (_, false)
                if limiter.on_failure.unwrap_or(self.on_failure) == FailurePolicy::Memory =>
            {
                Some(
                    "`on_failure: memory` needs a built-in limiter: memory cannot run custom Lua scripts",
                )
            }
            (_, false) => None,
        };
        if let Some(rule) = custom_rule {
            return Err(BuildError::invalid(field.to_owned(), rule));
        }
        if let Some((list, rule)) = limiter.rules.as_ref().and_then(|rules| rules.invalid()) {
            return Err(BuildError::invalid(format!("{field}.{list}"), rule));
        }
        if limiter.on_failure == Some(FailurePolicy::LocalShare) && limiter.batches.is_none() {
            return Err(BuildError::invalid(
                format!("{field}.on_failure"),
                "`local_share` decides by the limiter's local batches: it needs `local_batches`",
            ));
        }
        if let Some(batches) = &limiter.batches {
            self.check_batches(field, limiter, batches)?;
        }
        if memory && limiter.redis.is_some() {
            return Err(BuildError::invalid(
                format!("{field}.pool"),
                "a limiter's own Redis pool or connection needs the Redis backend",
            ));
        }
        Ok(())
    }

    fn custom_entry(
        &self,
        name: &str,
        limiter: Limiter,
        scripts: &HashMap<String, Compiled>,
    ) -> Result<Entry, BuildError> {
        let field = format!("limiters.{}", excerpt(name));
        self.check_limiter(name, &field, &limiter)?;
        let program = program(name, &field, &limiter, scripts)?;
        let backend = limiter.redis.clone().map(|pool| {
            let settings = RedisSettings {
                pool: BreakerLabel::pool(name),
                ..self.redis_settings()
            };
            Backend::Redis(Arc::new(RedisBackend::new(pool, settings)))
        });
        Styler::check_name(name, limiter.header_style.unwrap_or(self.header_style))
            .map_err(|rule| BuildError::invalid(format!("{field}.header_style"), rule))?;
        Ok(self.entry(program, backend, limiter))
    }

    fn finish(self, registry: Registry) -> PlugLimit {
        let settings = self.redis_settings();
        // `build` refuses 0 and `build_default` keeps the default: the fallback is never taken.
        let memory_capacity = NonZeroUsize::new(self.memory_capacity).unwrap_or(NonZeroUsize::MIN);
        let backend = match self.store.0 {
            Kind::Redis(pool) => Backend::Redis(Arc::new(RedisBackend::new(pool, settings))),
            Kind::Memory => {
                let clock = self.clock.clone().unwrap_or_else(|| Arc::new(SystemClock));
                Backend::Memory(Arc::new(MemoryBackend::new(
                    clock,
                    memory_capacity,
                    &self.prefix,
                )))
            }
        };
        let denials = Arc::new(DenyCache::new(memory_capacity, &self.prefix));
        PlugLimit::from_decider(Decider::new(Settings {
            enabled: self.enabled,
            prefix: self.prefix.into(),
            log_level: self.log_level,
            on_failure: self.on_failure,
            denials,
            backend,
            clock: self.clock,
            memory_capacity,
            registry,
            timeout: self.timeout,
            wait_queue: self.wait_queue,
        }))
    }
}

/// The `#[rate_limit]` handlers of the binary against `registry`: each names a registered
/// limiter, stacks only what stacks, and gives `cost`, `count_if` and `settle` only to a
/// built-in.
fn check_handler_uses(registry: &Registry) -> Result<(), BuildError> {
    check_limiters(|name| registry.contains(name))?;
    check_stacked(|name| {
        let entry = registry.get(name).ok()?;
        if entry.program.algorithm.is_none() {
            Some("runs a custom script: only built-in limiters stack")
        } else if entry.backend.is_some() {
            Some("has a Redis connection of its own: a stack's limits share one backend")
        } else {
            None
        }
    })?;
    check_takes(|name| {
        registry
            .get(name)
            .is_ok_and(|entry| entry.program.algorithm.is_none())
    })?;
    Ok(())
}

/// What `limiter`, registered as `name`, runs: its script (a built-in's, its own, a file's or
/// one registered by name in `scripts`) and its header names.
fn program(
    name: &str,
    field: &str,
    limiter: &Limiter,
    scripts: &HashMap<String, Compiled>,
) -> Result<Program, BuildError> {
    let mut script_headers = None;
    let (algorithm, script) = match &limiter.source {
        Source::BuiltIn(algorithm) => (Some(*algorithm), Arc::clone(algorithm.script())),
        Source::Lua(lua) => (None, Arc::new(lua_source(field, "script", lua.clone())?)),
        Source::File(path) => (None, Arc::new(lua_file(field, path.clone())?)),
        Source::Named(script) => {
            let compiled = scripts.get(script).ok_or_else(|| {
                BuildError::invalid(
                    format!("{field}.script_name"),
                    format!("no script is registered as `{}`", excerpt(script)),
                )
            })?;
            script_headers = compiled.headers.as_ref();
            (None, Arc::clone(&compiled.lua))
        }
    };
    let headers = match limiter.headers.as_ref().or(script_headers) {
        Some(names) => names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let field = || format!("{field}.headers[{i}]");
                let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                    let name = excerpt(name);
                    BuildError::invalid(field(), format!("`{name}` is not a valid header name"))
                })?;
                if is_framing(&header) {
                    return Err(BuildError::invalid(
                        field(),
                        format!("`{header}` frames the response or belongs to the connection; a limiter may not set it"),
                    ));
                }
                Ok(header)
            })
            .collect::<Result<_, _>>()
            .map(Names::Declared)?,
        None => Names::Builtin(algorithm.map_or(&[][..], Runtime::headers)),
    };
    Ok(Program {
        name: name.into(),
        algorithm,
        script,
        headers,
    })
}

//! Applying a deserialized [`Config`] to a [`Builder`].

use std::time::Duration;

use deadpool_redis::Runtime;

use super::builder::Store;
use super::{Builder, Config, Limiter, Script};
use crate::config::{LocalBatches, Rules};
use crate::error::BuildError;

impl Builder {
    /// Applies a deserialized [`Config`]; its settings replace those set before.
    pub fn config(mut self, config: Config) -> Self {
        if let Some(enabled) = config.enabled {
            self.enabled = enabled;
        }
        if let Some(prefix) = config.prefix {
            self.prefix = prefix;
        }
        if let Some(ms) = config.timeout_ms {
            self.timeout = Duration::from_millis(ms);
        }
        if let Some(level) = config.log_level {
            self.log_level = level;
        }
        if let Some(policy) = config.on_failure {
            self.on_failure = policy;
        }
        if let Some(on) = config.deny_cache {
            self.deny_cache = on;
        }
        if let Some(policy) = config.on_key_failure {
            self.on_key_failure = policy;
        }
        if let Some(on) = config.shadow {
            self.shadow = on;
        }
        if let Some(breaker) = config.circuit_breaker {
            self.breaker = breaker;
        }
        if let Some(max_keys) = config.memory_capacity {
            self.memory_capacity = max_keys;
        }
        if let Some(style) = config.header_style {
            self.header_style = style;
        }
        self.rules = cidr_lists(
            std::mem::take(&mut self.rules),
            config.allow_cidrs,
            config.deny_cidrs,
        );
        for (name, script) in config.scripts {
            let source = match (script.script, script.script_file) {
                (Some(lua), None) => Script::lua(lua),
                (None, Some(path)) => Script::file(path),
                _ => {
                    self.errors.push(BuildError::invalid(
                        format!("scripts.{name}"),
                        "exactly one of `script` and `script_file` is required",
                    ));
                    continue;
                }
            };
            self.scripts.push((
                name,
                match script.headers {
                    Some(headers) => source.headers(headers),
                    None => source,
                },
            ));
        }
        for (name, limiter) in config.limiters {
            let field = format!("limiters.{name}");
            // A shared script's or a built-in's header names stand unless the limiter names
            // its own.
            let declared = limiter.script_name.is_some() || limiter.builtin.is_some();
            let source = (
                limiter.script,
                limiter.script_file,
                limiter.script_name,
                limiter.builtin,
            );
            let mut built = match source {
                (Some(lua), None, None, None) => Limiter::script(lua),
                (None, Some(path), None, None) => Limiter::script_file(path),
                (None, None, Some(name), None) => Limiter::script_named(name),
                (None, None, None, Some(name)) => match builtin(&name) {
                    Ok(limiter) => limiter,
                    Err(rule) => {
                        self.errors
                            .push(BuildError::invalid(format!("{field}.builtin"), rule));
                        continue;
                    }
                },
                _ => {
                    self.errors.push(BuildError::invalid(
                        field,
                        "exactly one of `script`, `script_file`, `script_name` and `builtin` is \
                         required",
                    ));
                    continue;
                }
            };
            if !(declared && limiter.headers.is_empty()) {
                built = built.headers(limiter.headers);
            }
            if let Some(batches) = limiter.local_batches {
                let mut settings = LocalBatches::new(batches.max);
                match batches.every_ms {
                    None => {}
                    Some(every_ms @ 1..=1000) => {
                        settings = settings.every(Duration::from_millis(every_ms));
                    }
                    Some(_) => {
                        self.errors.push(BuildError::invalid(
                            format!("{field}.local_batches.every_ms"),
                            "must be 1..=1000 (milliseconds)",
                        ));
                        continue;
                    }
                }
                built = built.local_batches(settings);
            }
            if limiter.redis_url.is_some() && matches!(self.store, Store::Memory) {
                self.errors.push(BuildError::invalid(
                    format!("{field}.redis_url"),
                    "a limiter's own Redis pool needs the Redis backend",
                ));
                continue;
            }
            if let Some(url) = limiter.redis_url {
                match deadpool_redis::Config::from_url(url).create_pool(Some(Runtime::Tokio1)) {
                    Ok(pool) => built = built.pool(pool),
                    Err(source) => {
                        self.errors.push(BuildError::Pool {
                            field: format!("{field}.redis_url"),
                            source,
                        });
                        continue;
                    }
                }
            }
            if let Some(level) = limiter.log_level {
                built = built.log_level(level);
            }
            if let Some(policy) = limiter.on_failure {
                built = built.on_failure(policy);
            }
            if let Some(on) = limiter.deny_cache {
                built = built.deny_cache(on);
            }
            if let Some(policy) = limiter.on_key_failure {
                built = built.on_key_failure(policy);
            }
            if let Some(on) = limiter.shadow {
                built = built.shadow(on);
            }
            if let Some(style) = limiter.header_style {
                built = built.header_style(style);
            }
            if limiter.allow_cidrs.is_some() || limiter.deny_cidrs.is_some() {
                built = built.rules(cidr_lists(
                    Rules::new(),
                    limiter.allow_cidrs,
                    limiter.deny_cidrs,
                ));
            }
            self.limiters.push((name, built));
        }
        self
    }
}

/// The built-in limiter a config's `builtin` names, or the rule the name breaks: the
/// built-ins code runs under other names ([`Limiter::fixed_window`], [`Limiter::token_bucket`]).
/// The others are known by their own names to the checks that guard them (a lease never
/// stacked, a settling limit's options), which a renamed one would slip past.
fn builtin(name: &str) -> Result<Limiter, String> {
    match name {
        "fixed_window" => Ok(Limiter::fixed_window()),
        "token_bucket" => Ok(Limiter::token_bucket()),
        _ => Err(format!(
            "must be `fixed_window` or `token_bucket` (the built-ins that run under another \
             name), got `{name}`"
        )),
    }
}

/// `rules` with the lists a config sets replacing its own; its predicate and address source,
/// which only code sets, stay.
fn cidr_lists(mut rules: Rules, allow: Option<Vec<String>>, deny: Option<Vec<String>>) -> Rules {
    if let Some(allow) = allow {
        rules = rules.allow_cidrs(allow);
    }
    if let Some(deny) = deny {
        rules = rules.deny_cidrs(deny);
    }
    rules
}

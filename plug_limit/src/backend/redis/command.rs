//! The commands a check sends: `EVALSHA`, its `EVAL` fallback, and `DEL`.

#[cfg(feature = "cluster")]
use deadpool_redis::redis::cluster_routing::RoutingInfo;
use deadpool_redis::redis::{Cmd, ErrorKind, RedisResult, ServerErrorKind, Value};

use super::multiplexed::{Multiplexed, query};
use crate::limit::Opt;
use crate::lua::Lua;
use crate::telemetry;

/// The `EVALSHA` command of one check, built straight into one `Cmd` sized up front: what
/// `Script::prepare_invoke` would send, without its intermediate buffer per key and argument.
pub(super) fn evalsha(lua: &Lua, keys: &[String], opts: &[Opt], extra: &[Opt]) -> Cmd {
    script_cmd("EVALSHA", lua.sha1(), keys, opts, extra)
}

/// The same call with the script's body, for a Redis that does not know the SHA1.
fn eval(lua: &Lua, keys: &[String], opts: &[Opt], extra: &[Opt]) -> Cmd {
    script_cmd("EVAL", lua.source(), keys, opts, extra)
}

fn script_cmd(verb: &str, script: &str, keys: &[String], opts: &[Opt], extra: &[Opt]) -> Cmd {
    // An option is at most 20 digits and a sign.
    let data = verb.len()
        + script.len()
        + 4
        + keys.iter().map(String::len).sum::<usize>()
        + 21 * (opts.len() + extra.len());
    let mut cmd = Cmd::with_capacity(3 + keys.len() + opts.len() + extra.len(), data);
    cmd.arg(verb).arg(script).arg(keys.len());
    for key in keys {
        cmd.arg(key.as_str());
    }
    for opt in opts.iter().chain(extra) {
        cmd.arg(opt);
    }
    cmd
}

/// A command a check sends.
pub(super) enum Command<'a> {
    /// A script call: its `EVALSHA`, and what its `EVAL` fallback needs.
    Script {
        /// The limiter's name, for the metrics.
        limiter: &'a str,
        evalsha: Cmd,
        lua: &'a Lua,
        keys: &'a [String],
        /// The opts, then the trailing cost and now.
        args: [&'a [Opt]; 2],
    },
    /// A command on one key, which picks its node on Redis Cluster (`DEL`).
    Keyed(
        Cmd,
        #[cfg_attr(not(feature = "cluster"), allow(dead_code))] &'a str,
    ),
    /// Any other command.
    Plain(Cmd),
    /// A command for the nodes `routing` names on Redis Cluster (`SCAN`, whose cursor is a
    /// node's own); elsewhere, a plain command.
    #[cfg(feature = "cluster")]
    Routed(Cmd, RoutingInfo),
}

impl Command<'_> {
    /// The key whose slot routes the command on Redis Cluster; `None` for a command no key
    /// routes (a script without keys, a fan-out).
    #[cfg(feature = "cluster")]
    pub(super) fn key(&self) -> Option<&str> {
        match self {
            Self::Script { keys, .. } => keys.first().map(String::as_str),
            Self::Keyed(_, key) => Some(key),
            Self::Plain(_) | Self::Routed(..) => None,
        }
    }

    /// Sends the command on `conn`. A script Redis answers `NOSCRIPT` for (it ran nothing) is
    /// sent again with its body (`EVAL`, which also caches it): one call, so a `SCRIPT FLUSH`
    /// cannot slip in between a load and the retry, as it could with `SCRIPT LOAD` then
    /// `EVALSHA`.
    pub(super) async fn run(&self, conn: &mut Multiplexed) -> RedisResult<Value> {
        match self {
            Self::Keyed(cmd, _) | Self::Plain(cmd) => query(cmd, conn).await,
            #[cfg(feature = "cluster")]
            Self::Routed(cmd, routing) => match conn {
                Multiplexed::Cluster(cluster) => {
                    cluster.route_command(cmd.clone(), routing.clone()).await
                }
                _ => query(cmd, conn).await,
            },
            Self::Script {
                limiter,
                evalsha,
                lua,
                keys,
                args: [opts, extra],
            } => match query(evalsha, conn).await {
                Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    telemetry::script_reloaded(limiter);
                    // Boxed: once per script and server, so its state stays out of every
                    // check's future.
                    Box::pin(query(&eval(lua, keys, opts, extra), conn)).await
                }
                reply => reply,
            },
        }
    }
}

/// `DEL key`.
pub(super) fn del(key: &str) -> Cmd {
    let mut del = deadpool_redis::redis::cmd("DEL");
    del.arg(key);
    del
}

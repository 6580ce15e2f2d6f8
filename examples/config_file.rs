//! Limits read from a TOML file: the `PlugLimit` settings and one limit per route.
//!
//! Run with: `cargo run --example config_file [FILE]` (default `examples/config_file.toml`);
//! `REDIS_URL` as in the quick start (unset: limits in memory). A file that breaks a rule is
//! refused at start-up with the file, the field and the rule, e.g.
//!
//! ```text
//! examples/config_file.toml: TOML parse error at line 12, column 1
//!    |
//! 12 | [routes."/search"]
//!    | ^^^^^^^^^^^^^^^^^^
//! invalid `opts`: token_bucket: takes 3 options, found 2
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use axum::{Router, routing::get};
use deadpool_redis::{Pool, Runtime};
use plug_limit::{BuildError, Config, PlugLimit, RateLimitLayer, RuntimeLimit, Store};
use serde::Deserialize;

/// The file: `[plug_limit]` is [`plug_limit::Config`], `[routes."/path"]` a [`RuntimeLimit`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    plug_limit: Config,
    #[serde(default)]
    routes: BTreeMap<String, RuntimeLimit>,
}

/// What can go wrong at start-up, each naming where.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: String,
        source: Box<toml::de::Error>,
    },
    #[error("{path}: [plug_limit]: {source}")]
    Settings { path: String, source: BuildError },
    #[error("{path}: [routes.{route:?}]: {source}")]
    Route {
        path: String,
        route: String,
        source: BuildError,
    },
}

/// Reads and checks the file: every limit is checked as it is read, the settings when built,
/// and each route's limiter against the handle's when its layer is made.
fn load(
    path: &Path,
    pool: Option<Pool>,
) -> Result<(Router, BTreeMap<String, RuntimeLimit>), StartError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| StartError::Read {
        path: shown.clone(),
        source,
    })?;
    let file: File = toml::from_str(&text).map_err(|source| StartError::Parse {
        path: shown.clone(),
        source: Box::new(source),
    })?;
    let builder = match pool {
        Some(pool) => PlugLimit::builder(pool),
        None => PlugLimit::builder(Store::memory()),
    };
    let limits =
        builder
            .config(file.plug_limit)
            .build()
            .map_err(|source| StartError::Settings {
                path: shown.clone(),
                source,
            })?;
    let app = app(&limits, file.routes.clone()).map_err(|(route, source)| StartError::Route {
        path: shown,
        route,
        source,
    })?;
    Ok((app, file.routes))
}

/// One route per configured limit, each under its own limit; `/` is not limited. A limit
/// naming a limiter the handle does not know is refused here, at start-up, with its route.
fn app(
    limits: &PlugLimit,
    routes: BTreeMap<String, RuntimeLimit>,
) -> Result<Router, (String, BuildError)> {
    routes.into_iter().try_fold(
        Router::new().route("/", get(|| async { "no limit here\n" })),
        |router, (path, limit)| {
            let reply = format!("{path}: {} {:?}\n", limit.limiter(), limit.opts());
            let layer = match RateLimitLayer::runtime(limits.clone(), limit) {
                Ok(layer) => layer,
                Err(error) => return Err((path, error)),
            };
            let route = get(move || async move { reply }).route_layer(layer);
            Ok(router.route(&path, route))
        },
    )
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/config_file.toml".to_owned());
    let pool = match std::env::var("REDIS_URL") {
        Ok(url) => Some(deadpool_redis::Config::from_url(url).create_pool(Some(Runtime::Tokio1))?),
        Err(_) => None,
    };
    let (app, routes) = load(Path::new(&path), pool)?;

    let port = std::env::var("PORT").map_or(Ok(3000), |port| port.parse::<u16>())?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}, limits from {path}");
    for route in routes.keys() {
        println!("try: curl -si http://{addr}{route}");
    }
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config_file.toml");
        let (_, routes) = load(&path, None).unwrap();
        let described: Vec<String> = routes
            .iter()
            .map(|(path, limit)| format!("{path} {} {:?}", limit.limiter(), limit.opts()))
            .collect();
        assert_eq!(
            described,
            [
                "/export fixed_window [Int(2), Int(3600)]",
                "/feed multi_window [Text(\"5/1\"), Text(\"100/60\")]",
                "/search token_bucket [Int(20), Int(600), Int(5)]",
            ]
        );
    }

    /// Loads `text` from a file of its own and returns the error, as printed.
    fn refusal(name: &str, text: &str) -> String {
        let path =
            std::env::temp_dir().join(format!("plug_limit-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let error = load(&path, None).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        error.replace(&path.display().to_string(), "FILE")
    }

    #[test]
    fn a_broken_file_is_refused_with_the_file_the_field_and_the_rule() {
        assert_eq!(
            refusal(
                "opts",
                "[routes.\"/a\"]\nlimiter = \"token_bucket\"\nopts = [20, 600]\n"
            ),
            "FILE: TOML parse error at line 1, column 1\n  |\n1 | [routes.\"/a\"]\n  | ^^^^^^^^^^^^^\n\
             invalid `opts`: token_bucket: takes 3 options, found 2\n"
        );
        assert_eq!(
            refusal("settings", "[plug_limit]\ntimeout_ms = 0\n"),
            "FILE: [plug_limit]: invalid `timeout_ms`: must be greater than zero"
        );
        assert_eq!(
            refusal(
                "limiter",
                "[routes.\"/search\"]\nlimiter = \"tokn_bucket\"\nopts = [20, 600, 5]\n"
            ),
            "FILE: [routes.\"/search\"]: invalid `limiter`: `tokn_bucket` is not registered \
             with this PlugLimit; did you mean `token_bucket`?"
        );
        assert_eq!(
            refusal(
                "text",
                "[routes.\"/a\"]\nlimiter = \"token_bucket\"\nopts = [20, \"600\", 5]\n"
            ),
            "FILE: TOML parse error at line 1, column 1\n  |\n1 | [routes.\"/a\"]\n  | ^^^^^^^^^^^^^\n\
             invalid `opts`: token_bucket: window must be an integer, not a string, got '600'\n"
        );
        assert!(
            refusal("missing", "[routes.\"/a\"]\nopts = [1, 1]\n")
                .contains("missing field `limiter`")
        );
    }
}

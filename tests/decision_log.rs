//! The decision span through `tracing`'s `log` feature: an application that logs with `log`
//! alone, with no `tracing` subscriber, still sees each decision at `DEBUG`.
//!
//! A binary of its own: it installs the process's one `log` logger.

use std::sync::{Mutex, PoisonError};

use plug_limit::{Opt, PlugLimit, Store};
use plug_limit_tests::limit;

/// Every record of target `plug_limit::decide`, as its text.
static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.target() == "plug_limit::decide" {
            let mut records = RECORDS.lock().unwrap_or_else(PoisonError::into_inner);
            records.push(record.args().to_string());
        }
    }

    fn flush(&self) {}
}

fn recorded() -> Vec<String> {
    RECORDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

#[tokio::test]
async fn a_log_logger_at_debug_sees_each_decision_and_one_below_it_sees_none() {
    static CAPTURE: Capture = Capture;
    log::set_logger(&CAPTURE).expect("the only logger of this binary");
    let limits = PlugLimit::builder(Store::memory()).build().unwrap();
    let opts = [Opt::Int(1), Opt::Int(60)];

    log::set_max_level(log::LevelFilter::Info);
    limits
        .check(limit("fixed_window", &opts), "client-a")
        .await
        .unwrap();
    assert_eq!(recorded(), Vec::<String>::new());

    log::set_max_level(log::LevelFilter::Debug);
    let denied = limits
        .check(limit("fixed_window", &opts), "client-a")
        .await
        .unwrap();
    assert!(!denied.is_allowed());
    assert_eq!(
        recorded(),
        [
            r#"plug_limit.decide; limiter="fixed_window" scope="""#,
            r#"plug_limit.decide; backend="memory""#,
            r#"plug_limit.decide; decision="denied""#,
        ]
    );
}

//! `tracing` events captured as text, for tests about what gets logged.

use std::io::Write;

/// Log lines captured from the `tracing` events of the current thread.
#[derive(Debug, Clone, Default)]
pub struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    /// Captures every event of this thread at `TRACE` and above until the guard drops. Use with
    /// a current-thread runtime (the `#[tokio::test]` default).
    #[must_use]
    pub fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        // While one dispatcher is registered, `tracing` settles a callsite's interest by the
        // dispatcher of whichever thread reaches it first: a test without a subscriber would
        // turn the callsite off for this one too. A second dispatcher, kept for the life of
        // the process, makes it ask every registered dispatcher instead.
        static SECOND: std::sync::LazyLock<tracing::Dispatch> = std::sync::LazyLock::new(|| {
            tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default())
        });
        std::sync::LazyLock::force(&SECOND);
        let logs = Self::default();
        // Without the decision span (see `plug_limit::metrics`): a line reads the same
        // whether or not it was logged within a decision.
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "trace,plug_limit::decide=off",
            ))
            .with_ansi(false)
            .without_time()
            .with_writer(logs.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        (logs, guard)
    }

    /// Everything logged so far.
    #[must_use]
    pub fn text(&self) -> String {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

//! The server thread of a variant, and where its CPU time can be read.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::BoxError;
use crate::cpu::thread_schedstat;
use crate::machine::{SERVER_CPU, pin, thread_id};
use crate::routes::app;
use crate::variants::Variant;

/// A variant served on its own thread by a current-thread runtime: one core at most, and
/// every task it spawns (the Redis connection's driver included) runs on that core.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    /// The server thread's `schedstat`, to tell its CPU time apart from the load generator's.
    pub(crate) cpu: PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

impl Server {
    /// `pinned`: the server thread runs on [`SERVER_CPU`] alone (`HTTP_LOAD_PIN`).
    pub(crate) fn start(
        variant: Variant,
        redis_url: String,
        pinned: bool,
    ) -> Result<Self, BoxError> {
        let (ready_tx, ready_rx) =
            std::sync::mpsc::channel::<Result<(SocketAddr, PathBuf), String>>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("server-{}", variant.name()))
            .spawn(move || {
                if pinned && let Err(err) = thread_id().and_then(|id| pin(id, SERVER_CPU, false)) {
                    let _ = ready_tx.send(Err(format!("pinning the server: {err}")));
                    return;
                }
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = ready_tx.send(Err(format!("server runtime: {err}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let setup = async {
                        let app = app(variant, &redis_url).await?;
                        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
                        let addr = listener.local_addr()?;
                        Ok::<_, BoxError>((app, listener, addr, thread_schedstat()?))
                    };
                    let (app, listener, addr, cpu) = match setup.await {
                        Ok(ready) => ready,
                        Err(err) => {
                            let _ = ready_tx.send(Err(format!("{} server: {err}", variant.name())));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok((addr, cpu)));
                    let listener = listener.tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                    tokio::select! {
                        served = axum::serve(listener, app).into_future() => {
                            if let Err(err) = served {
                                eprintln!("{} server stopped: {err}", variant.name());
                            }
                        }
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })?;
        let (addr, cpu) = ready_rx
            .recv_timeout(Duration::from_secs(15))
            .map_err(|err| format!("server thread did not start: {err}"))??;
        Ok(Self {
            addr,
            cpu,
            stop,
            thread,
        })
    }

    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            eprintln!("a server thread panicked");
        }
    }
}

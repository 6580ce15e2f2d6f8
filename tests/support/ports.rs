//! Loopback ports for test servers, and a Redis URL nothing answers on.

use std::net::TcpListener;

/// A loopback port nothing listens on at the moment of the call.
#[must_use]
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("bind an ephemeral loopback port")
}

/// A Redis URL where no server listens: every connection is refused.
#[must_use]
pub fn dead_url() -> String {
    format!("redis://127.0.0.1:{}/", free_port())
}

//! A TCP proxy in front of a real Redis that misbehaves on demand, for failure tests: slow
//! replies, replies lost after Redis ran the command, a silent network, refused connections.
//!
//! Every task the proxy starts ends when it is dropped: the accept loop owns the connection
//! tasks in a `JoinSet` and is aborted on drop, which aborts them and closes their sockets.
//! Every loop also ends by itself: a connection's on end of stream, an I/O error or
//! [`Fault::Refuse`], and all of them, the accept loop's included, once the proxy's fault
//! channel is closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// How long the proxy waits for Redis to accept its connection before giving up on the client.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The most one read moves at once; Redis commands and replies in tests are far smaller.
const CHUNK: usize = 16 * 1024;

/// What the proxy does to the traffic, switchable at run time with [`FaultProxy::set`]. A new
/// fault applies at once to every connection, open or new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Pass everything through.
    Forward,
    /// Hold each chunk Redis sends for this long before passing it to the client; requests
    /// pass at once.
    Delay(Duration),
    /// Hold each chunk the client sends for this long before passing it to Redis, which runs
    /// it then, even once the client has given up and closed the connection: a command stuck
    /// on its way. Replies pass at once.
    DelayRequests(Duration),
    /// Pass requests to Redis, so they run, but drop Redis's reply and close the client's
    /// connection: the reply lost after Redis ran the script.
    DropReplies,
    /// Accept and read, but pass nothing on and answer nothing, as across a network that drops
    /// every packet. Open connections stall too; what crosses them meanwhile is lost.
    Blackhole,
    /// Close every connection at once, open or new. New ones are accepted, then closed: the
    /// client sees its connection end before any reply.
    Refuse,
}

/// A proxy on a free loopback port, forwarding to `upstream` under the current [`Fault`].
///
/// Needs a Tokio runtime with I/O and time enabled (`#[tokio::test]` gives one).
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    accepted: Arc<AtomicUsize>,
    accept_loop: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts forwarding ([`Fault::Forward`]) from a free loopback port to `upstream`.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime, or when no loopback port can be bound.
    #[must_use]
    pub fn start(upstream: SocketAddr) -> Self {
        // Bound synchronously, so the port accepts connections as soon as `start` returns.
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| {
                listener.set_nonblocking(true)?;
                TcpListener::from_std(listener)
            })
            .expect("bind the fault proxy on a loopback port");
        let addr = listener.local_addr().expect("the fault proxy's address");
        let (fault, watcher) = watch::channel(Fault::Forward);
        let accepted = Arc::new(AtomicUsize::new(0));
        let accept_loop = tokio::spawn(accept(listener, upstream, watcher, Arc::clone(&accepted)));
        Self {
            addr,
            fault,
            accepted,
            accept_loop,
        }
    }

    /// The address clients connect to.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:{port}/` of the proxy.
    #[must_use]
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.addr.port())
    }

    /// Switches to `fault`, for open connections and new ones alike.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }

    /// The current fault.
    #[must_use]
    pub fn fault(&self) -> Fault {
        *self.fault.borrow()
    }

    /// How many client connections the proxy has accepted so far, refused ones included.
    #[must_use]
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Dropping the sender (after this) also ends every loop still waiting on the channel.
        self.accept_loop.abort();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    mut fault: watch::Receiver<Fault>,
    accepted: Arc<AtomicUsize>,
) {
    // Owned here, so aborting this task aborts every connection task with it.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            client = listener.accept() => match client {
                Ok((client, _)) => {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    connections.spawn(relay(client, upstream, fault.clone()));
                }
                // A connection that failed before it was accepted (reset by its client): the
                // listener itself is fine. The pause keeps a persistent error from spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = fault.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// One client connection: a connection to Redis, then both directions until either ends.
async fn relay(client: TcpStream, upstream: SocketAddr, fault: watch::Receiver<Fault>) {
    if *fault.borrow() == Fault::Refuse {
        return;
    }
    let Ok(Ok(server)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(upstream)).await
    else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Whichever direction ends first ends the connection: both sockets drop and close.
    tokio::select! {
        () = pipe(client_read, server_write, fault.clone(), Direction::ToRedis) => {}
        () = pipe(server_read, client_write, fault, Direction::ToClient) => {}
    }
}

/// Which way a chunk travels.
#[derive(Debug, Clone, Copy)]
enum Direction {
    /// A request, from the client to Redis.
    ToRedis,
    /// A reply, from Redis to the client.
    ToClient,
}

/// What becomes of one chunk.
#[derive(Debug)]
enum Action {
    Pass,
    PassAfter(Duration),
    Swallow,
    /// Drop the chunk and end the connection.
    Close,
}

/// The faults, as what each does to a chunk going either way.
fn action(fault: Fault, direction: Direction) -> Action {
    match (fault, direction) {
        (Fault::Forward, _)
        | (Fault::Delay(_) | Fault::DropReplies, Direction::ToRedis)
        | (Fault::DelayRequests(_), Direction::ToClient) => Action::Pass,
        (Fault::Delay(delay), Direction::ToClient)
        | (Fault::DelayRequests(delay), Direction::ToRedis) => Action::PassAfter(delay),
        (Fault::Blackhole, _) => Action::Swallow,
        (Fault::DropReplies, Direction::ToClient) | (Fault::Refuse, _) => Action::Close,
    }
}

/// One direction of a connection: each chunk read from `from` meets the fault current when it
/// arrives, then goes on to `to` or not.
async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut fault: watch::Receiver<Fault>,
    direction: Direction,
) {
    let mut buf = vec![0; CHUNK];
    while let Some(read) = next_chunk(&mut from, &mut buf, &mut fault).await {
        let current = *fault.borrow();
        match action(current, direction) {
            Action::Close => return,
            Action::Swallow => continue,
            Action::PassAfter(delay) => tokio::time::sleep(delay).await,
            Action::Pass => {}
        }
        if to.write_all(&buf[..read]).await.is_err() {
            return;
        }
    }
}

/// The next chunk from `from` into `buf`, its length; `None` once the connection should end: end
/// of stream, an I/O error, [`Fault::Refuse`], or the proxy dropped. A change of fault while
/// waiting is seen at once, since a read is cancelled without losing data.
async fn next_chunk(
    from: &mut OwnedReadHalf,
    buf: &mut [u8],
    fault: &mut watch::Receiver<Fault>,
) -> Option<usize> {
    loop {
        if *fault.borrow_and_update() == Fault::Refuse {
            return None;
        }
        tokio::select! {
            read = from.read(buf) => return match read {
                Ok(0) | Err(_) => None,
                Ok(read) => Some(read),
            },
            changed = fault.changed() => changed.ok()?,
        }
    }
}

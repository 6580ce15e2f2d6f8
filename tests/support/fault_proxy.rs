//! A TCP proxy in front of a real Redis that misbehaves on demand, for failure tests: slow
//! replies, a slow link, replies lost after Redis ran the command, a silent network, refused
//! connections.
//!
//! Every task the proxy starts ends when it is dropped: the accept loop owns the connection
//! tasks in a `JoinSet` and is aborted on drop, which aborts them and closes their sockets.
//! Every loop also ends by itself: a connection's on end of stream (once what it read is
//! delivered), an I/O error or [`Fault::Refuse`], and all of them, the accept loop's included,
//! once the proxy's fault channel is closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// How long the proxy waits for Redis to accept its connection before giving up on the client.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The most one read moves at once; most Redis commands and replies in tests are far smaller.
const CHUNK: usize = 16 * 1024;
/// How many chunks one direction holds between reading and writing them: under
/// [`Fault::Latency`], those read within one delay. Far more than tests send; past it, reading
/// waits for writing, as a full TCP window does.
const IN_FLIGHT: usize = 1024;

/// What the proxy does to the traffic, switchable at run time with [`FaultProxy::set`]. A new
/// fault applies at once to every connection, open or new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Pass everything through.
    Forward,
    /// Hold each chunk Redis sends for this long before passing it to the client; requests
    /// pass at once. The holds add up: nothing more is read from Redis meanwhile, so what
    /// arrives during a hold waits for it to end, then is held in turn.
    Delay(Duration),
    /// Hold each chunk the client sends for this long before passing it to Redis, which runs
    /// it then, even once the client has given up and closed the connection: a command stuck
    /// on its way. Replies pass at once.
    DelayRequests(Duration),
    /// Deliver every chunk, either way, this long after it was read: a network link with this
    /// one-way delay, so a round trip takes twice as long. Chunks keep their order, and unlike
    /// [`Fault::Delay`] the delays overlap rather than add up: pipelined commands and their
    /// replies all arrive one round trip late, not one per command. A chunk read meanwhile
    /// keeps its delivery time when the fault switches (to [`Fault::Forward`], it still waits;
    /// to [`Fault::Blackhole`], it still arrives), except that [`Fault::Refuse`], or
    /// [`Fault::DropReplies`] once a reply comes, ends the connection and what it held with it.
    Latency(Duration),
    /// Pass requests to Redis, so they run, but drop Redis's reply and close the client's
    /// connection: the reply lost after Redis ran the script.
    DropReplies,
    /// As [`Fault::DropReplies`], but a connection's first reply passes: a client's handshake
    /// completes, so it reconnects, and each command it then sends runs and loses its reply.
    DropLaterReplies,
    /// Accept and read, but pass nothing on and answer nothing, as across a network that drops
    /// every packet. Open connections stall too; what crosses them meanwhile is lost.
    Blackhole,
    /// A network partition as TCP lives it: accept and read, deliver nothing either way while
    /// it lasts, then deliver everything held, in order, once the fault changes (TCP resends
    /// what the network dropped; it never loses bytes on a connection that stays open).
    Partition,
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
    /// Pass once this has elapsed, reading nothing more meanwhile.
    PassAfter(Duration),
    /// Pass this long after the chunk was read, reading on meanwhile.
    DueAfter(Duration),
    Swallow,
    /// Drop the chunk and end the connection, with what it still holds.
    Close,
}

/// The faults, as what each does to a chunk going either way.
fn action(fault: Fault, direction: Direction) -> Action {
    match (fault, direction) {
        // A partition's chunks are held by `deliver` until it ends.
        (Fault::Forward | Fault::Partition, _)
        | (Fault::Delay(_) | Fault::DropReplies | Fault::DropLaterReplies, Direction::ToRedis)
        | (Fault::DelayRequests(_), Direction::ToClient) => Action::Pass,
        (Fault::Delay(delay), Direction::ToClient)
        | (Fault::DelayRequests(delay), Direction::ToRedis) => Action::PassAfter(delay),
        (Fault::Latency(delay), _) => Action::DueAfter(delay),
        (Fault::Blackhole, _) => Action::Swallow,
        (Fault::DropReplies | Fault::DropLaterReplies, Direction::ToClient)
        | (Fault::Refuse, _) => Action::Close,
    }
}

/// One direction of a connection: each chunk read from `from` meets the fault current when it
/// arrives, then goes on to `to` or not. Reading and writing run side by side, joined by a
/// queue, so that under [`Fault::Latency`] chunks are read as they come while earlier ones wait
/// for their delivery time; every chunk passes through the queue, in the order read.
async fn pipe(
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    fault: watch::Receiver<Fault>,
    direction: Direction,
) {
    let (queue, queued) = mpsc::channel(IN_FLIGHT);
    let writing = deliver(queued, to, fault.clone());
    tokio::pin!(writing);
    tokio::select! {
        // Dropping `queue` (with `read_chunks`) lets `deliver` end once it has written the rest.
        end = read_chunks(from, queue, fault.clone(), direction) => {
            if end == End::Drain {
                tokio::select! {
                    () = &mut writing => {}
                    () = refused(fault) => {}
                }
            }
        }
        () = &mut writing => {}
    }
}

/// Returns once the fault is [`Fault::Refuse`] or the proxy is dropped.
async fn refused(mut fault: watch::Receiver<Fault>) {
    while *fault.borrow_and_update() != Fault::Refuse {
        if fault.changed().await.is_err() {
            return;
        }
    }
}

/// How the reading side of a [`pipe`] ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// End of stream or an I/O error on reading: deliver what was read, then end.
    Drain,
    /// [`Fault::Refuse`], [`Fault::DropReplies`] or the proxy dropped: end now.
    Now,
}

/// A chunk read and not yet written, with when it is due: `None` at once.
type Queued = (Option<Instant>, Vec<u8>);

/// The reading side of a [`pipe`]: reads chunks from `from` and queues those that pass, stamped
/// with their delivery time.
async fn read_chunks(
    mut from: OwnedReadHalf,
    queue: mpsc::Sender<Queued>,
    mut fault: watch::Receiver<Fault>,
    direction: Direction,
) -> End {
    let mut buf = vec![0; CHUNK];
    let mut first = true;
    loop {
        let read = match next_chunk(&mut from, &mut buf, &mut fault).await {
            Ok(read) => read,
            Err(end) => return end,
        };
        let read_at = Instant::now();
        let current = match *fault.borrow() {
            Fault::DropLaterReplies if first => Fault::Forward,
            current => current,
        };
        first = false;
        let due = match action(current, direction) {
            Action::Close => return End::Now,
            Action::Swallow => continue,
            Action::PassAfter(delay) => {
                tokio::time::sleep(delay).await;
                None
            }
            Action::DueAfter(delay) => Some(read_at + delay),
            Action::Pass => None,
        };
        if queue.send((due, buf[..read].to_vec())).await.is_err() {
            // The writing side has ended on an error: so does the connection.
            return End::Now;
        }
    }
}

/// The writing side of a [`pipe`]: writes each queued chunk to `to` when due, in order, none
/// during a [`Fault::Partition`]. Ends once the queue is closed and empty, or on a write error.
async fn deliver(
    mut queued: mpsc::Receiver<Queued>,
    mut to: OwnedWriteHalf,
    mut fault: watch::Receiver<Fault>,
) {
    while let Some((due, chunk)) = queued.recv().await {
        if let Some(due) = due {
            tokio::time::sleep_until(due).await;
        }
        while *fault.borrow_and_update() == Fault::Partition {
            if fault.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&chunk).await.is_err() {
            return;
        }
    }
}

/// The next chunk from `from` into `buf`, its length; how the connection should end instead:
/// [`End::Drain`] on end of stream or an I/O error, [`End::Now`] on [`Fault::Refuse`] or once
/// the proxy is dropped. A change of fault while waiting is seen at once, since a read is
/// cancelled without losing data.
async fn next_chunk(
    from: &mut OwnedReadHalf,
    buf: &mut [u8],
    fault: &mut watch::Receiver<Fault>,
) -> Result<usize, End> {
    loop {
        if *fault.borrow_and_update() == Fault::Refuse {
            return Err(End::Now);
        }
        tokio::select! {
            read = from.read(buf) => return match read {
                Ok(0) | Err(_) => Err(End::Drain),
                Ok(read) => Ok(read),
            },
            changed = fault.changed() => changed.map_err(|_| End::Now)?,
        }
    }
}

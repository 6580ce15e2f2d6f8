//! The load generator's HTTP/1.1 client: one request written, one response read, its head
//! parsed for the status and the rate-limit header.
//!
//! A minimal HTTP/1.1 client over keep-alive sockets, rather than hyper's client or `wrk`. On two
//! cores the load generator shares the CPU with the server and Redis, and `bare` is the variant a
//! costly client would cap first, which would flatter every ratio. Sending a pre-serialized
//! request and reading a `content-length` response leaves little but the syscalls: profiled, about
//! 80% of this client's CPU is the kernel's loopback TCP path. hyper's client would add user-space
//! work per request of the order of the server's own hyper stack (request building, a dispatch
//! channel to the connection task, body polling). `wrk` is as cheap, but it is an external binary,
//! varying `x-client` per request and checking each response's rate-limit headers both take its
//! Lua hooks, and its statistics would come from another process; here every figure covers the
//! same window. The client's own CPU share is printed, so a saturated load generator shows in the
//! output instead of hiding in the numbers.

use std::io;

use tokio::net::TcpStream;

/// A response head larger than this is a broken server, not a slow one.
const MAX_HEAD: usize = 64 * 1024;

pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) rate_headers: bool,
}

/// Sends one request and reads its response: status line, headers, `content-length` body.
pub(crate) async fn exchange(
    stream: &TcpStream,
    request: &[u8],
    buf: &mut Vec<u8>,
) -> io::Result<Answer> {
    write_all(stream, request).await?;
    buf.clear();
    loop {
        if read_some(stream, buf).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let (response, length) = parse_head(&buf[..end])?;
            let total = end + 4 + length;
            while buf.len() < total {
                if read_some(stream, buf).await? == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            if buf.len() > total {
                return Err(invalid("bytes after the response body"));
            }
            return Ok(response);
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("response head too large"));
        }
    }
}

// Readiness plus `try_*` instead of `AsyncReadExt`/`AsyncWriteExt`: the same syscalls, without
// the `io-util` feature of tokio.
async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(written) => bytes = &bytes[written..],
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

async fn read_some(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        let mut chunk = [0; 4096];
        match stream.try_read(&mut chunk) {
            Ok(read) => {
                buf.extend_from_slice(&chunk[..read]);
                return Ok(read);
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
}

fn parse_head(head: &[u8]) -> io::Result<(Answer, usize)> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix(b"HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| std::str::from_utf8(code).ok()?.parse().ok())
        .ok_or_else(|| invalid("bad status line"))?;
    let mut length = None;
    let mut rate_headers = false;
    for line in lines {
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or_else(|| invalid("header line without a colon"))?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        } else if name.eq_ignore_ascii_case(b"x-ratelimit-remaining") {
            rate_headers = true;
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Err(invalid("chunked responses are not supported"));
        }
    }
    let length = length.ok_or_else(|| invalid("response without content-length"))?;
    Ok((
        Answer {
            status,
            rate_headers,
        },
        length,
    ))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

//! The rightmost entry of the list headers: `X-Forwarded-For` and `Forwarded` (RFC 7239).
//!
//! A proxy appends the address it saw to whatever the client sent, so only the rightmost entry
//! is the proxy's; everything to its left is the client's and may be any bytes at all. These
//! parsers find the rightmost entry from the end of the last header line and never parse what
//! lies left of it: nothing a client writes on its side can fail the extraction (which the
//! failure policy might let through unlimited) or choose the key.

use std::net::IpAddr;

use http::HeaderMap;

use super::{KeyError, addr};

const X_FORWARDED_FOR: &str = "x-forwarded-for";
const FORWARDED: &str = "forwarded";

/// The address of the rightmost `X-Forwarded-For` entry, which may carry a port.
pub(super) fn rightmost_x_forwarded_for(headers: &HeaderMap) -> Result<IpAddr, KeyError> {
    let line = last_line(headers, X_FORWARDED_FOR)?;
    let entry = line.rsplit(|&byte| byte == b',').next().unwrap_or_default();
    addr::node(entry.trim_ascii())
        .filter(|node| node.port.is_none_or(addr::is_port))
        .map(|node| node.ip)
        .ok_or(KeyError::RightmostNotAnIp(X_FORWARDED_FOR))
}

/// The address in the `for=` parameter of the last `Forwarded` element.
pub(super) fn rightmost_forwarded(headers: &HeaderMap) -> Result<IpAddr, KeyError> {
    let element = last_element(last_line(headers, FORWARDED)?);
    let mut buffer = [0; 64];
    let (value, whole) = match for_value(element)? {
        Value::Token(token) => (token, true),
        Value::Quoted(raw) => unescape(raw, &mut buffer),
    };
    if value.starts_with(b"_") {
        return Err(KeyError::ForwardedObfuscated);
    }
    if value.eq_ignore_ascii_case(b"unknown") {
        return Err(KeyError::ForwardedUnknown);
    }
    if !whole {
        return Err(KeyError::RightmostNotAnIp(FORWARDED));
    }
    // RFC 7239 section 6: IPv6 stands in brackets; a port is decimal or obfuscated (`_a1`).
    let port_ok = |port: &[u8]| addr::is_port(port) || is_obfuscated_port(port);
    addr::node(value)
        .filter(|node| node.ip.is_ipv4() || node.bracketed)
        .filter(|node| node.port.is_none_or(port_ok))
        .map(|node| node.ip)
        .ok_or(KeyError::RightmostNotAnIp(FORWARDED))
}

/// The last line of a list header. Several lines are one list, so the last line's last entry
/// is the rightmost.
fn last_line<'h>(headers: &'h HeaderMap, name: &'static str) -> Result<&'h [u8], KeyError> {
    let last = headers.get_all(name).iter().next_back();
    last.map(|value| value.as_bytes())
        .ok_or(KeyError::MissingHeader(name))
}

/// What follows the last comma outside a quoted string.
///
/// The scan runs from the end: the proxy's element is well formed, so its quotes pair up, and
/// the scan stops before reaching any byte of the client's.
fn last_element(line: &[u8]) -> &[u8] {
    let mut quoted = false;
    for (at, &byte) in line.iter().enumerate().rev() {
        match byte {
            b'"' if !escaped(&line[..at]) => quoted = !quoted,
            b',' if !quoted => return &line[at + 1..],
            _ => {}
        }
    }
    line
}

/// Whether a quote that follows `before` is a quoted-pair (`\"`): an odd run of backslashes
/// ends `before`.
fn escaped(before: &[u8]) -> bool {
    before
        .iter()
        .rev()
        .take_while(|&&byte| byte == b'\\')
        .count()
        % 2
        == 1
}

/// A parameter value as written.
enum Value<'a> {
    Token(&'a [u8]),
    /// The inside of a quoted string, quoted-pairs still escaped.
    Quoted(&'a [u8]),
}

/// The value of the one `for` parameter (any case) of a forwarded-element:
/// `for=192.0.2.1;proto=https;by="[2001:db8::2]"`.
fn for_value(element: &[u8]) -> Result<Value<'_>, KeyError> {
    let mut found = None;
    let mut rest = element.trim_ascii_start();
    while !rest.is_empty() {
        // An empty pair (`;;`) is allowed by the grammar.
        if let Some(after) = rest.strip_prefix(b";") {
            rest = after.trim_ascii_start();
            continue;
        }
        let equals = rest.iter().position(|&byte| byte == b'=');
        let (name, after) = rest.split_at(equals.ok_or(KeyError::MalformedForwarded)?);
        if name.is_empty() || !name.iter().all(|&byte| is_token_byte(byte)) {
            return Err(KeyError::MalformedForwarded);
        }
        let (value, after) = value(&after[1..])?;
        if name.eq_ignore_ascii_case(b"for") && found.replace(value).is_some() {
            return Err(KeyError::MalformedForwarded);
        }
        rest = match after.trim_ascii_start() {
            [] => &[],
            [b';', after @ ..] => after.trim_ascii_start(),
            _ => return Err(KeyError::MalformedForwarded),
        };
    }
    found.ok_or(KeyError::ForwardedWithoutFor)
}

/// The value at the start of `text`, and what follows it. A token runs to the next `;` or
/// space: proxies write `for=192.0.2.1:4711` unquoted although `:` is no token character.
fn value(text: &[u8]) -> Result<(Value<'_>, &[u8]), KeyError> {
    let Some(inside) = text.strip_prefix(b"\"") else {
        let end = text
            .iter()
            .position(|&byte| matches!(byte, b';' | b' ' | b'\t'))
            .unwrap_or(text.len());
        let (token, after) = text.split_at(end);
        return Ok((Value::Token(token), after));
    };
    let mut escaping = false;
    for (at, &byte) in inside.iter().enumerate() {
        match byte {
            _ if escaping => escaping = false,
            b'\\' => escaping = true,
            b'"' => return Ok((Value::Quoted(&inside[..at]), &inside[at + 1..])),
            _ => {}
        }
    }
    Err(KeyError::MalformedForwarded)
}

/// `raw` with its quoted-pairs undone, in `buffer`, and whether all of it fit. 64 bytes hold
/// any address with a port (`[ffff:...:255.255.255.255]:65535` is 53).
fn unescape<'b>(raw: &[u8], buffer: &'b mut [u8; 64]) -> (&'b [u8], bool) {
    let mut len = 0;
    let mut escaping = false;
    for &byte in raw {
        if !escaping && byte == b'\\' {
            escaping = true;
            continue;
        }
        escaping = false;
        let Some(slot) = buffer.get_mut(len) else {
            return (buffer, false);
        };
        *slot = byte;
        len += 1;
    }
    (&buffer[..len], true)
}

/// `_` then letters, digits, `.`, `_` or `-` (RFC 7239 section 6.3).
fn is_obfuscated_port(port: &[u8]) -> bool {
    port.strip_prefix(b"_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .iter()
                .all(|&byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
    })
}

/// A `tchar` of RFC 9110: what parameter names are made of.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

//! Single-value client IP headers (`X-Real-Ip`, `CF-Connecting-IP`, ...): a proxy sets one,
//! replacing any the client sent.

use std::net::IpAddr;

use http::HeaderMap;

use super::{KeyError, addr};

/// The address in header `name`, alone: `192.0.2.1` or `2001:db8::1`.
pub(super) fn ip(headers: &HeaderMap, name: &'static str) -> Result<IpAddr, KeyError> {
    addr::ip(only_value(headers, name)?).ok_or(KeyError::NotAnIp(name))
}

/// The address of an `ip:port` pair in header `name`, IPv6 unbracketed or bracketed:
/// `198.51.100.10:46532`, `2001:db8::1:46532`.
pub(super) fn ip_and_port(headers: &HeaderMap, name: &'static str) -> Result<IpAddr, KeyError> {
    addr::ip_and_port(only_value(headers, name)?).ok_or(KeyError::NotAnIpAndPort(name))
}

/// The one value of header `name`, without surrounding whitespace. Two lines mean the proxy
/// added its value next to the client's instead of replacing it, and neither can be told
/// apart from the other.
fn only_value<'h>(headers: &'h HeaderMap, name: &'static str) -> Result<&'h [u8], KeyError> {
    let mut values = headers.get_all(name).iter();
    let value = values.next().ok_or(KeyError::MissingHeader(name))?;
    if values.next().is_some() {
        return Err(KeyError::RepeatedHeader(name));
    }
    Ok(value.as_bytes().trim_ascii())
}

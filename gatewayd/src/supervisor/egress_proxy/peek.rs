//! The name a connection to the egress proxy is for, from its first bytes: the server name
//! (SNI) of a TLS `ClientHello`, read with `tls-parser` (no decryption: the handshake goes on
//! between the agent and the server), or an HTTP/1 request's `Host` header or `CONNECT`
//! target, read with `httparse`. Anything else has no name and is refused.
use tls_parser::{
    TlsExtension, TlsMessage, TlsMessageHandshake, parse_tls_extensions, parse_tls_plaintext,
};

/// The most bytes read before a name must be known: one whole TLS record (16 KiB of
/// payload and its header), or an HTTP request head of that size.
pub(crate) const MAX_HEAD: usize = 16 * 1024 + 5;
/// Headers an HTTP request head may have.
const MAX_HEADERS: usize = 64;

/// What the first bytes say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Peeked {
    /// A name: TLS's server name or HTTP's `Host` (`port` from it, when written), or the
    /// target of an HTTP `CONNECT` (`connect`, with its port; `head` is the request's
    /// length, which the proxy answers itself and does not pass on).
    Name {
        host: String,
        port: Option<u16>,
        connect: Option<usize>,
        tls: bool,
    },
    /// Not enough bytes yet.
    More,
    /// No name to decide by: why.
    Refused(&'static str),
}

/// Reads `buf`, the connection's bytes so far.
pub(crate) fn peek(buf: &[u8]) -> Peeked {
    match buf.first() {
        None => Peeked::More,
        // A TLS handshake record.
        Some(0x16) => tls_name(buf),
        Some(b) if b.is_ascii_uppercase() => http_name(buf),
        Some(_) => Peeked::Refused("neither a TLS ClientHello nor an HTTP/1 request"),
    }
}

fn tls_name(buf: &[u8]) -> Peeked {
    let (_, record) = match parse_tls_plaintext(buf) {
        Ok(r) => r,
        Err(tls_parser::nom::Err::Incomplete(_)) if buf.len() < MAX_HEAD => return Peeked::More,
        Err(_) => {
            return Peeked::Refused(
                "the TLS record is not a whole ClientHello (malformed, over 16 KiB, or split across records)",
            );
        }
    };
    let hello = record.msg.iter().find_map(|m| match m {
        TlsMessage::Handshake(TlsMessageHandshake::ClientHello(h)) => Some(h),
        _ => None,
    });
    let Some(hello) = hello else {
        return Peeked::Refused("the first TLS record is not a ClientHello");
    };
    let Some(Ok((_, extensions))) = hello.ext.map(parse_tls_extensions) else {
        return Peeked::Refused("the ClientHello has no readable extensions");
    };
    let name = extensions.iter().find_map(|e| match e {
        TlsExtension::SNI(names) => names.iter().find(|(kind, _)| kind.0 == 0).map(|(_, n)| *n),
        _ => None,
    });
    match name
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(host_name)
    {
        Some(host) => Peeked::Name {
            host,
            port: None,
            connect: None,
            tls: true,
        },
        None => Peeked::Refused("the ClientHello names no server (SNI)"),
    }
}

fn http_name(buf: &[u8]) -> Peeked {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Peeked::More,
        Ok(httparse::Status::Partial) => {
            return Peeked::Refused("the HTTP request head is over 16 KiB");
        }
        Err(_) => return Peeked::Refused("a malformed HTTP/1 request"),
    };
    let (authority, connect) = if req.method == Some("CONNECT") {
        (req.path.unwrap_or_default(), Some(head))
    } else {
        let host = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
            .and_then(|h| std::str::from_utf8(h.value).ok());
        match host {
            Some(h) => (h, None),
            None => return Peeked::Refused("the HTTP request has no Host header"),
        }
    };
    let Some((host, port)) = split_authority(authority.trim()) else {
        return Peeked::Refused("the HTTP request's host is not a host name");
    };
    if connect.is_some() && port.is_none() {
        return Peeked::Refused("an HTTP CONNECT target without a port");
    }
    Peeked::Name {
        host,
        port,
        connect,
        tls: false,
    }
}

/// `host[:port]` or `[v6]:port`, the host checked by [`host_name`].
pub(super) fn split_authority(a: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = gatewayd_core::engine::sandbox::split_authority(a)?;
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host_name(host)?, port))
}

/// A host name as the egress list writes it: lowercase, no trailing dot, letters, digits,
/// `.`, `-`, `_` (and `:` for an IPv6 literal); at most 253 bytes.
pub(crate) fn host_name(s: &str) -> Option<String> {
    let h = s.trim_end_matches('.').to_ascii_lowercase();
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    ok.then_some(h)
}

#[cfg(test)]
#[path = "peek_tests.rs"]
mod tests;

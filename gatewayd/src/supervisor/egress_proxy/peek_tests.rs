use super::*;

/// A TLS 1.3-style `ClientHello` record naming `sni` (none: no SNI extension).
pub(crate) fn client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut ext = Vec::new();
    if let Some(name) = sni {
        let n = name.len() as u16;
        ext.extend_from_slice(&[0, 0]);
        ext.extend_from_slice(&(n + 5).to_be_bytes());
        ext.extend_from_slice(&(n + 3).to_be_bytes());
        ext.push(0);
        ext.extend_from_slice(&n.to_be_bytes());
        ext.extend_from_slice(name.as_bytes());
    }
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![1, 0];
    hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

fn name(host: &str, port: Option<u16>, connect: Option<usize>, tls: bool) -> Peeked {
    Peeked::Name {
        host: host.into(),
        port,
        connect,
        tls,
    }
}

#[test]
fn a_client_hello_gives_its_server_name_once_whole() {
    let hello = client_hello(Some("API.Example.com."));
    assert_eq!(peek(&hello), name("api.example.com", None, None, true));
    // Split across reads: more is needed until the record is whole.
    for cut in [1, 5, 40, hello.len() - 1] {
        assert_eq!(peek(&hello[..cut]), Peeked::More, "cut at {cut}");
    }
}

#[test]
fn a_client_hello_without_a_name_or_malformed_is_refused() {
    assert!(matches!(peek(&client_hello(None)), Peeked::Refused(_)));
    let mut bad = client_hello(Some("x.example"));
    bad[5] = 2; // a ServerHello
    assert!(matches!(peek(&bad), Peeked::Refused(_)));
    // A record that claims more than 16 KiB is refused once that much has come.
    let mut big = vec![0x16, 3, 1, 0xff, 0xff];
    big.resize(MAX_HEAD + 10, 0);
    assert!(matches!(peek(&big), Peeked::Refused(_)));
    let evil = client_hello(Some("a b.example"));
    assert!(matches!(peek(&evil), Peeked::Refused(_)));
}

#[test]
fn http_requests_give_their_host_or_connect_target() {
    assert_eq!(
        peek(b"GET / HTTP/1.1\r\nHost: www.Example.org:8080\r\n\r\n"),
        name("www.example.org", Some(8080), None, false)
    );
    let c = b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(
        peek(c),
        name("api.example.com", Some(443), Some(c.len()), false)
    );
    assert_eq!(peek(b"GET / HTTP/1.1\r\nHost: a.exa"), Peeked::More);
    for refused in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: bad host\r\n\r\n",
        b"G\x01T / HTTP/1.1\r\n\r\n",
        b"CONNECT api.example.com HTTP/1.1\r\n\r\n",
        b"\x00\x01binary",
    ] {
        assert!(
            matches!(peek(refused), Peeked::Refused(_)),
            "{}",
            String::from_utf8_lossy(refused)
        );
    }
}

#[test]
fn an_endless_http_head_is_refused_at_the_limit() {
    let mut head = b"GET / HTTP/1.1\r\nHost: a.example\r\nX-Pad: ".to_vec();
    head.resize(MAX_HEAD - 1, b'a');
    assert_eq!(peek(&head), Peeked::More);
    head.resize(MAX_HEAD + 1, b'a');
    assert!(matches!(peek(&head), Peeked::Refused(_)));
}

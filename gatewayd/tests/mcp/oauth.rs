//! OAuth 2.1 through `gatewayd mcp --listen` in front of `--url` (docs/MCP.md, "A local
//! HTTP endpoint", Authorization): the client's own `Authorization` passes through to a
//! remote server the policy binds no credential to, and the server's `401` with its
//! `WWW-Authenticate` reaches the client as it came; a bound credential replaces the
//! client's. Neither token is ever in the audit log, an error or the proxy's stderr. The
//! server is the Python SDK's with its own bearer-auth middleware (`rugpull_server.py` with
//! `RUGPULL_TOKEN`), the client the Python SDK's with its HTTP headers set.
use std::path::Path;

use serde_json::{Value, json};

use crate::{
    listen::{ended, in_front_of, with_reason},
    remote::{self, HttpServer},
    support::*,
};

/// The header line `name` of a `curl -D` head (lower case), without its name.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .map(str::trim)
}

/// The `authorization` of the proxy's `mcp_server_start` record.
fn authorization(audit: &Path) -> Value {
    with_reason(audit, "mcp_server_start")[0]["detail"]["authorization"].clone()
}

/// Neither token is in the audit log, the proxy's stderr or what the client saw.
fn never_shown(dir: &Path, audit: &Path, seen: &[Value], tokens: &[&str]) {
    let log = std::fs::read_to_string(audit).unwrap();
    let err = std::fs::read_to_string(dir.join("proxy.err")).unwrap();
    for t in tokens {
        assert!(!log.contains(t), "{t} in the audit log");
        assert!(!err.contains(t), "{t} in the proxy's stderr: {err}");
        assert!(!seen.iter().any(|o| o.to_string().contains(t)), "{seen:?}");
    }
    verify(audit);
}

#[test]
fn a_clients_authorization_passes_through_to_a_remote_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::rugpull_with(dir.path(), &[("RUGPULL_TOKEN", "tok-c1a7")]);
    // `echo` only: the server changes `translate` after its first listing (a rug pull).
    let steps = json!([{"call": "echo", "args": {"text": "hi"}}]);
    // Bare: the server wants the token, and says where its metadata is.
    let (status, bare_head, _) = remote::initialize_response(&server.url(), None);
    assert_eq!(status, "401");
    let challenge = header(&bare_head, "www-authenticate").expect("WWW-Authenticate");
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let headers = json!({"Authorization": "Bearer tok-c1a7"});
    let bare = drive(
        &json!({"url": server.url(), "mode": "legacy", "headers": headers,
        "steps": steps}),
    );
    assert_eq!(bare[0], json!({"text": "hi", "isError": false}));

    let (mut proxy, url, audit) = in_front_of(dir.path(), &server, &json!({}), &[]);
    // No token: the server's 401 and its WWW-Authenticate reach the client as they came;
    // the proxy serves no metadata of its own.
    let (status, head, _) = remote::initialize_response(&url, None);
    assert_eq!(status, "401", "{head}");
    assert_eq!(header(&head, "www-authenticate"), Some(challenge));
    assert!(header(&head, "mcp-session-id").is_none(), "{head}");
    let wrong = remote::initialize_response(&url, Some("Bearer tok-wrong-55")).0;
    assert_eq!(wrong, "401");
    let metadata = remote::curl_post(
        &url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"),
        "",
        &[],
    );
    assert_eq!(metadata, "404");
    retried_with_the_same_id(&url);
    let out = drive(&json!({"url": url, "mode": "legacy", "headers": headers,
        "steps": steps}));
    let text = out[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("hi") && text.contains("<untrusted-output"),
        "{out:?}"
    );
    assert!(ended(&mut proxy).success());
    assert_eq!(authorization(&audit), "client");
    never_shown(
        dir.path(),
        &audit,
        &out,
        &["tok-c1a7", "tok-wrong-55", "tok-expired-9"],
    );
}

/// In a session, a request refused for its token (expired, say) is sent again with the same
/// id once the client has a good one (as an OAuth client does): the server answers it, the
/// proxy does not refuse the id as used.
fn retried_with_the_same_id(url: &str) {
    let good = "authorization: Bearer tok-c1a7";
    let (status, head, _) = remote::initialize_response(url, Some("Bearer tok-c1a7"));
    assert_eq!(status, "200", "{head}");
    let session = format!(
        "mcp-session-id: {}",
        header(&head, "mcp-session-id").unwrap()
    );
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let ok = remote::curl_post(url, &initialized.to_string(), &[&session, good]);
    assert_eq!(ok, "202");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let expired = "authorization: Bearer tok-expired-9";
    let (status, _, body) = remote::curl_response(url, &list, &[&session, expired]);
    assert_eq!(status, "401", "{body}");
    let (status, _, body) = remote::curl_response(url, &list, &[&session, good]);
    assert_eq!(status, "200");
    assert!(
        body.contains("\"result\"") && body.contains("echo"),
        "{body}"
    );
}

#[test]
fn a_bound_credential_replaces_the_clients_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::rugpull_with(dir.path(), &[("RUGPULL_TOKEN", "tok-b0nd")]);
    // Bare: the client's own token is not the one the server takes.
    let bare = remote::curl_initialize(&server.url(), Some("Bearer tok-c113nt"));
    assert_eq!(bare, "401");

    let entry = json!({"url": server.url(), "authorization_env": "REMOTE_AUTH"});
    let env = [("REMOTE_AUTH", "Bearer tok-b0nd")];
    let (mut proxy, url, audit) = in_front_of(dir.path(), &server, &entry, &env);
    let out = drive(&json!({"url": url, "mode": "legacy",
        "headers": {"Authorization": "Bearer tok-c113nt"},
        "steps": [{"list": true}, {"call": "translate", "args": {"text": "hi"}}]}));
    assert_eq!(
        out[1],
        json!({"text": "hallo: hi", "isError": false}),
        "{out:?}"
    );
    assert!(ended(&mut proxy).success());
    assert_eq!(authorization(&audit), "bound");
    never_shown(dir.path(), &audit, &out, &["tok-b0nd", "tok-c113nt"]);
}

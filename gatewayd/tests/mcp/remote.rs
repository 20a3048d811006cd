//! `gatewayd mcp --url`: a remote server over Streamable HTTP, behind the same decisions and
//! checks as a stdio one (docs/MCP.md, "Remote servers"). The servers are real: the official
//! `server-everything` in its `streamableHttp` mode and the Python SDK's Streamable HTTP
//! server (`rugpull_server.py http PORT`); the client is the Python SDK's. Each path is shown
//! bare first (the client straight to the server).
use std::{
    net::{Ipv4Addr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::support::*;

/// A server process listening on 127.0.0.1:`port`, killed when dropped.
pub(crate) struct HttpServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl HttpServer {
    /// Starts `cmd` (with `PORT` set) and waits until the port accepts a connection.
    pub(crate) fn start(mut cmd: Command, port: u16, log: PathBuf) -> HttpServer {
        let out = std::fs::File::create(&log).unwrap();
        let child = cmd
            .env("PORT", port.to_string())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start the HTTP MCP server");
        let mut s = HttpServer { child, port, log };
        let end = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(
                Instant::now() < end && s.child.try_wait().unwrap().is_none(),
                "the server did not listen on {port}: {}",
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn everything(dir: &Path) -> HttpServer {
        let port = free_port();
        let mut cmd = Command::new(everything_server());
        cmd.arg("streamableHttp");
        HttpServer::start(cmd, port, dir.join("server.log"))
    }

    pub(crate) fn rugpull(dir: &Path) -> HttpServer {
        HttpServer::rugpull_with(dir, &[])
    }

    /// The rug-pull server with `env` (`RUGPULL_TOKEN`: the bearer token it asks for).
    pub(crate) fn rugpull_with(dir: &Path, env: &[(&str, &str)]) -> HttpServer {
        let port = free_port();
        let mut cmd = Command::new(python());
        cmd.arg(fixture("rugpull_server.py"))
            .args(["http", &port.to_string()])
            .envs(env.iter().copied());
        HttpServer::start(cmd, port, dir.join("server.log"))
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (up to 10 s) until the server's log has `what`.
    fn wait_log(&self, what: &str) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.log_text().contains(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A policy with `tools`, egress to `egress` only, and server `remote` (`entry` its fields).
pub(crate) fn policy(dir: &Path, tools: &Value, egress: &Value, entry: &Value) -> PathBuf {
    let p = json!({"version": 1, "kernel": "best_effort",
        "network": {"egress": egress}, "tools": tools,
        "mcp_servers": {"remote": entry}});
    let path = dir.join("policy.json");
    std::fs::write(&path, p.to_string()).unwrap();
    path
}

pub(crate) fn loopback() -> Value {
    json!([{"cidr": "127.0.0.1/32"}])
}

/// The proxy's command line for `url`.
fn proxy_url(policy: &Path, audit: &Path, url: &str, extra: &[&str]) -> Vec<String> {
    let mut v = proxy_cmd(policy, "remote", audit, &["--url", url]);
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v
}

/// A policy (egress to loopback) with `names`, pinned to what `server` lists through the
/// proxy (`--listing`, then `gatewayd policy pin --from`).
fn pinned(dir: &Path, server: &HttpServer, names: &[&str]) -> PathBuf {
    let tools: Vec<Value> = names
        .iter()
        .map(|n| json!({"name": n, "description": "?"}))
        .collect();
    let pol = policy(dir, &json!(tools), &loopback(), &json!({}));
    let audit = dir.join("listing-audit.jsonl");
    let listing = dir.join("listing.json");
    let l = listing.display().to_string();
    let first = drive(
        &json!({"command": proxy_url(&pol, &audit, &server.url(), &["--listing", &l]),
        "mode": "auto", "steps": [{"list": true}]}),
    );
    assert_eq!(first[0]["tools"], json!([]), "not pinned yet: withheld");
    pin_from(&pol, &listing);
    pol
}

#[test]
fn everything_over_http_calls_are_decided() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::everything(dir.path());
    let bare = drive(&json!({"url": server.url(), "mode": "auto", "steps": [
        {"list": true},
        {"call": "echo", "args": {"message": "hi"}},
        {"call": "get-env", "args": {}},
    ]}));
    let listed = bare[0]["tools"].as_array().unwrap();
    assert!(listed.contains(&json!("echo")) && listed.contains(&json!("get-env")));
    assert_eq!(bare[1], json!({"text": "Echo: hi", "isError": false}));
    assert!(
        bare[2]["text"].as_str().unwrap().contains("PATH"),
        "bare: the server's environment reaches the client: {bare:?}"
    );

    // `echo` is in the policy; its definition is pinned from what the proxy listed.
    let pol = pinned(dir.path(), &server, &["echo"]);
    let audit = dir.path().join("audit.jsonl");
    let out = drive(
        &json!({"command": proxy_url(&pol, &audit, &server.url(), &[]),
        "mode": "auto", "steps": [
            {"list": true},
            {"call": "echo", "args": {"message": "hi"}},
            {"call": "get-env", "args": {}},
        ]}),
    );
    assert_eq!(out[0]["tools"], json!(["echo"]), "{out:?}");
    assert_eq!(out[1], json!({"text": "Echo: hi", "isError": false}));
    assert_eq!(out[2]["isError"], true, "{out:?}");
    let refusal = out[2]["text"].as_str().unwrap();
    assert!(
        refusal.contains("reason `not_allowlisted`") && !refusal.contains("PATH"),
        "{refusal}"
    );
    assert!(
        server.wait_log("Received session termination request"),
        "the proxy ends its sessions (DELETE): {}",
        server.log_text()
    );
    let recs = records(&audit);
    let start = recs
        .iter()
        .find(|r| r["reason"] == "mcp_server_start")
        .expect("mcp_server_start");
    assert_eq!(start["detail"]["url"], server.url());
    assert_eq!(start["detail"]["transport"], "streamable_http");
    assert!(
        recs.iter()
            .any(|r| r["reason"] == "not_allowlisted" && r["decision"] == "deny"),
        "{:?}",
        reasons(&audit)
    );
    verify(&audit);
}

#[test]
fn everything_over_http_resources_and_elicitations_are_decided() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::everything(dir.path());
    let uri = "demo://resource/dynamic/text/1";
    let elicit = json!({"call": "trigger-url-elicitation",
        "args": {"url": "https://evil.example/login", "message": "Open it"}});
    let steps = json!([{"read": uri}, {"list": true}, elicit, {"elicited": true}]);
    let bare = drive(&json!({"url": server.url(), "mode": "auto", "steps": steps}));
    assert!(
        bare[0]["text"].as_str().unwrap().contains("Resource 1"),
        "{bare:?}"
    );
    assert_eq!(
        bare[3]["elicited"][0]["url"], "https://evil.example/login",
        "bare: the server sends the user anywhere"
    );

    let pol = pinned(dir.path(), &server, &["trigger-url-elicitation"]);
    let audit = dir.path().join("audit.jsonl");
    let out = drive(
        &json!({"command": proxy_url(&pol, &audit, &server.url(), &[]),
        "mode": "auto", "steps": steps}),
    );
    let err = out[0]["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("reason `sandbox`") && err.contains("Next: "),
        "{out:?}"
    );
    assert_eq!(out[1]["tools"], json!(["trigger-url-elicitation"]));
    assert_eq!(out[3]["elicited"], json!([]), "{out:?}");
    let recs = records(&audit);
    for method in ["resources/read", "elicitation/create"] {
        assert!(
            recs.iter().any(|r| r["reason"] == "sandbox"
                && r["decision"] == "deny"
                && r["detail"]["method"] == method),
            "{method}: {:?}",
            reasons(&audit)
        );
    }
    verify(&audit);
}

pub(crate) fn rugpull_tools() -> Value {
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    json!([
        {"name": "translate", "description": "Translate a text.", "input_schema": schema},
        {"name": "echo", "description": "Echo a text.", "input_schema": schema,
         "labels": ["untrusted_output"]}])
}

#[test]
fn a_remote_rug_pull_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let steps = json!([
        {"list": true},
        {"call": "translate", "args": {"text": "hi"}},
        {"list": true},
        {"call": "translate", "args": {"text": "hi"}},
    ]);
    {
        let bare_server = HttpServer::rugpull(dir.path());
        let bare = drive(&json!({"url": bare_server.url(), "mode": "legacy", "steps": steps}));
        assert_eq!(bare[2]["tools"], json!(["echo", "translate"]));
        assert_eq!(
            bare[3],
            json!({"text": "hallo: hi", "isError": false}),
            "bare: the changed tool still runs"
        );
    }
    let server = HttpServer::rugpull(dir.path());
    let pol = policy(dir.path(), &rugpull_tools(), &loopback(), &json!({}));
    let audit = dir.path().join("audit.jsonl");
    let out = drive(
        &json!({"command": proxy_url(&pol, &audit, &server.url(), &[]),
        "mode": "legacy", "steps": steps}),
    );
    assert_rug_pull_withheld(&out);
    assert!(
        records(&audit)
            .iter()
            .any(|r| r["reason"] == "rug_pull" && r["session"] == "-"),
        "{:?}",
        reasons(&audit)
    );
    verify(&audit);
}

#[test]
fn a_url_outside_the_egress_allowlist_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::everything(dir.path());
    let bare = drive(&json!({"url": server.url(), "mode": "auto", "steps": [{"list": true}]}));
    assert!(!bare[0]["tools"].as_array().unwrap().is_empty());
    let posts = server.log_text().matches("Received MCP POST").count();

    let egress = json!([{"host": "ok.example", "port": 443}]);
    let pol = policy(dir.path(), &json!([]), &egress, &json!({}));
    let audit = dir.path().join("audit.jsonl");
    let cmd = proxy_url(&pol, &audit, &server.url(), &[]);
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("egress allowlist") && stderr.contains("Next: "),
        "{stderr}"
    );
    let recs = records(&audit);
    let refused = recs
        .iter()
        .find(|r| r["reason"] == "sandbox")
        .unwrap_or_else(|| panic!("{:?}", reasons(&audit)));
    assert_eq!(refused["decision"], "deny");
    assert_eq!(refused["detail"]["host"], "127.0.0.1");
    assert_eq!(
        server.log_text().matches("Received MCP POST").count(),
        posts,
        "the proxy sent nothing"
    );

    // A server bound to a URL in the policy: --url may not name another.
    let bound = json!({"url": "http://127.0.0.1:1/mcp"});
    let pol = policy(dir.path(), &json!([]), &loopback(), &bound);
    let cmd = proxy_url(&pol, &audit, &server.url(), &[]);
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is bound to"));
    verify(&audit);
}

/// `curl` POSTs an `initialize` to `url` (with `auth` as the Authorization header); the
/// What the client saw of the rug-pull server's session (list, call, list, call): the
/// changed tool withheld from the second listing and its call refused as `rug_pull`.
pub(crate) fn assert_rug_pull_withheld(out: &[serde_json::Value]) {
    assert_eq!(out[0]["tools"], json!(["echo", "translate"]), "{out:?}");
    assert_eq!(out[1], json!({"text": "hallo: hi", "isError": false}));
    assert_eq!(out[2]["tools"], json!(["echo"]), "changed → withheld");
    assert_eq!(out[3]["isError"], true, "{out:?}");
    assert!(
        out[3]["text"]
            .as_str()
            .unwrap()
            .contains("reason `rug_pull`")
    );
}

/// `curl` POSTs `body` with `headers` as an MCP client would; the HTTP status.
pub(crate) fn curl_post(url: &str, body: &str, headers: &[&str]) -> String {
    curl_response(url, body, headers).0
}

/// `curl` POSTs `body` with `headers` as an MCP client would; the HTTP status, the answer's
/// headers (lower case) and its body.
pub(crate) fn curl_response(url: &str, body: &str, headers: &[&str]) -> (String, String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-D", "-", "-w", "\n%{http_code}", "-X", "POST", url])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["-d", body]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = String::from_utf8_lossy(&cmd.output().expect("curl").stdout).into_owned();
    // The headers, a blank line, the body, then the status `-w` wrote.
    let (rest, status) = out.rsplit_once('\n').unwrap_or(("", &out));
    let (head, body) = rest.split_once("\r\n\r\n").unwrap_or((rest, ""));
    (
        status.trim().to_owned(),
        head.to_lowercase(),
        body.to_owned(),
    )
}

/// An `initialize` that `curl` sends, with `auth` as its authorization; the HTTP status.
pub(crate) fn curl_initialize(url: &str, auth: Option<&str>) -> String {
    initialize_response(url, auth).0
}

/// An `initialize` that `curl` sends, with `auth` as its authorization; the HTTP status,
/// the answer's headers and body.
pub(crate) fn initialize_response(url: &str, auth: Option<&str>) -> (String, String, String) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"}}});
    let auth = auth.map(|a| format!("authorization: {a}"));
    curl_response(
        url,
        &init.to_string(),
        auth.as_slice()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
    )
}

#[test]
fn a_bound_credential_is_sent_by_the_proxy_and_never_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let token = "Bearer tok-4f1c9e";
    let server = HttpServer::rugpull_with(dir.path(), &[("RUGPULL_TOKEN", "tok-4f1c9e")]);
    assert_eq!(
        curl_initialize(&server.url(), None),
        "401",
        "bare, no token"
    );
    assert_eq!(
        curl_initialize(&server.url(), Some(token)),
        "200",
        "bare, token"
    );

    let entry = json!({"url": server.url(), "authorization_env": "REMOTE_AUTH"});
    let pol = policy(dir.path(), &rugpull_tools(), &loopback(), &entry);
    let audit = dir.path().join("audit.jsonl");
    // No --url: the policy's. The token is in the proxy's environment only.
    let proxy = proxy_cmd(&pol, "remote", &audit, &[]);
    let out = drive(&json!({"command": proxy, "mode": "legacy",
        "env": {"REMOTE_AUTH": token},
        "steps": [{"list": true}, {"call": "translate", "args": {"text": "hi"}}]}));
    assert_eq!(out[0]["tools"], json!(["echo", "translate"]), "{out:?}");
    assert_eq!(out[1], json!({"text": "hallo: hi", "isError": false}));
    assert!(!out.iter().any(|o| o.to_string().contains("tok-4f1c9e")));
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(!log.contains("tok-4f1c9e"), "the token is never recorded");
    let start = records(&audit)
        .into_iter()
        .find(|r| r["reason"] == "mcp_server_start")
        .unwrap();
    assert_eq!(start["detail"]["authorization_env"], "REMOTE_AUTH");

    // The variable unset: refused at start, recorded.
    let out = Command::new(&proxy[0])
        .args(&proxy[1..])
        .env_remove("REMOTE_AUTH")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("REMOTE_AUTH"));
    assert!(
        reasons(&audit).contains(&("deny".into(), "mcp_server_refused".into())),
        "{:?}",
        reasons(&audit)
    );
    verify(&audit);
}

/// A self-signed server certificate for 127.0.0.1 (`openssl`), as (cert, key).
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        // A server's certificate, not a CA's (rustls refuses a CA as the end entity).
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

#[test]
fn an_https_server_is_reached_with_the_systems_trust_store() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let port = free_port();
    let mut cmd = Command::new(python());
    cmd.arg(fixture("rugpull_server.py"))
        .args(["http", &port.to_string()])
        .env(
            "RUGPULL_TLS",
            format!("{}:{}", cert.display(), key.display()),
        );
    let _server = HttpServer::start(cmd, port, dir.path().join("server.log"));
    let url = format!("https://127.0.0.1:{port}/mcp");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"}}});
    let curl = |ca: Option<&Path>| {
        let mut c = Command::new("curl");
        c.args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            &url,
        ])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["-d", &init.to_string()]);
        if let Some(ca) = ca {
            c.arg("--cacert").arg(ca);
        }
        String::from_utf8_lossy(&c.output().unwrap().stdout).into_owned()
    };
    assert_eq!(curl(Some(&cert)), "200", "bare, the certificate trusted");
    assert_eq!(curl(None), "000", "bare, not trusted");

    let pol = policy(dir.path(), &rugpull_tools(), &loopback(), &json!({}));
    let audit = dir.path().join("audit.jsonl");
    let proxy = proxy_url(&pol, &audit, &url, &[]);
    let out = drive(&json!({"command": proxy, "mode": "legacy",
        "env": {"SSL_CERT_FILE": cert.display().to_string()},
        "steps": [{"list": true}, {"call": "echo", "args": {"text": "over tls"}}]}));
    assert_eq!(out[0]["tools"], json!(["echo", "translate"]), "{out:?}");
    assert!(out[1]["text"].as_str().unwrap().contains("over tls"));

    // Not in the trust store: the proxy's TLS refuses the server; the request fails.
    let mut p = Command::new(&proxy[0])
        .args(&proxy[1..])
        .env("SSL_CERT_FILE", dir.path().join("none.pem"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = p.stdin.take().unwrap();
        writeln!(stdin, "{init}").unwrap();
    }
    let out = p.wait_with_output().unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).expect("one answer");
    assert_eq!(answer["error"]["code"], -32050, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach"),
        "{answer}"
    );
}

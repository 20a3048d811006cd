//! Inspected egress hosts: the proxy ends the agent's TLS with the session's CA, decides each
//! request by method and path, checks it for secrets, and swaps a credential's placeholder
//! for its value on its own host only. The server: Python's standard `http.server` over TLS
//! (a test CA from `openssl`), serving `git http-backend` (git's own smart-HTTP server) for
//! smart HTTP and `/echo/...`, which answers the method, path and `Authorization` it received.
//! The clients: real `curl`, real `git` (clone and push), Python's `requests` (from `PyPI`:
//! `cargo xtask` puts it in `GATEWAYD_PY_REQUESTS`, in the guests too) and Node's `https`
//! (Debian's `node`, copied into the guests). Every attempt is first shown working bare, with
//! the same script, then under gatewayd: allowed, refused by method/path, refused by secret, a
//! credential injected (the server sees the value, the agent's environment only the
//! placeholder), as a bearer token and inside `Basic` credentials, the placeholder refused on
//! another host.
use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::egress_proxy::{Servers, dns_server};
use inbound::ExtraAddress;

pub(crate) const SERVER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 41);
const DNS_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 54);
pub(crate) const PORT: u16 = 8443;
const REAL: &str = "ghp_real-credential-0123456789";
const SECRET: &str = "sk-session-secret-0123456789";
/// A name the agent writes in its request's host on a connection made for `git.l7.test`
/// (domain fronting): not in the egress list, served by the same server.
const ELSEWHERE: &str = "elsewhere.l7.test:8443";

fn known(name: &str) -> Option<Ipv4Addr> {
    matches!(name, "git.l7.test" | "other.l7.test" | "h2.l7.test").then_some(SERVER_IP)
}

/// The server: `http.server` over TLS (HTTP/1.1, keep-alive), `git http-backend` under
/// `/git/` (the CGI exchange written out: `http.server`'s own CGI handler cannot run over
/// TLS), and `/echo/`.
const SERVER: &str = r#"
import http.server, os, ssl, subprocess, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def body(self):
        n, got = int(self.headers.get("Content-Length") or 0), b""
        try:
            while len(got) < n:
                part = self.rfile.read(min(1 << 16, n - len(got)))
                if not part:
                    break
                got += part
        except OSError:
            pass
        if os.environ["GW_WATCH"].encode() in got:
            with open(os.environ["GW_LEAKS"], "a") as f:
                f.write(self.path + "\n")
        return got
    def reply(self, status, headers, out):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def echo(self):
        n = len(self.body())
        out = "%s %s auth=%s body=%d\n" % (self.command, self.path, self.headers.get("Authorization"), n)
        self.reply(200, [], out.encode())
    def git(self):
        path, _, query = self.path[len("/git"):].partition("?")
        env = dict(os.environ, REQUEST_METHOD=self.command, PATH_INFO=path, QUERY_STRING=query,
                   CONTENT_TYPE=self.headers.get("Content-Type") or "", REMOTE_ADDR="127.0.0.1",
                   GIT_HTTP_EXPORT_ALL="1", GIT_PROJECT_ROOT=os.getcwd())
        out = subprocess.run(["git", "http-backend"], input=self.body(), env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            k, _, v = line.partition(": ")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v))
        self.reply(status, headers, rest)
    def do_GET(self):
        if self.path.startswith("/host"):
            return self.reply(200, [], ("host=%s\n" % self.headers.get("Host")).encode())
        return self.git() if self.path.startswith("/git/") else self.echo()
    do_POST = do_GET
    def log_message(self, *a):
        pass
class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a request the proxy broke off part way: the test looks at what arrived
srv = Server((sys.argv[1], int(sys.argv[2])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"#;

fn openssl(args: &[&str], dir: &Scratch) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test CA and the server's certificate for both names, signed by it; returns the CA.
pub(crate) fn certificates(dir: &Scratch) -> PathBuf {
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=l7 test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
        dir,
    );
    openssl(
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=git.l7.test",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
        ],
        dir,
    );
    std::fs::write(
        dir.path("ext.cnf"),
        "subjectAltName=DNS:git.l7.test,DNS:other.l7.test,DNS:h2.l7.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
            "-out",
            "srv.pem",
        ],
        dir,
    );
    dir.path("ca.pem")
}

/// A bare repository with one commit at `www/repo.git`, and the server.
pub(crate) fn server(dir: &Scratch) -> Servers {
    let root = dir.path("www");
    std::fs::create_dir_all(&root).unwrap();
    let git = |args: &[&str], at: &Path| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t.test"])
            .args(args)
            .current_dir(at)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    let seed = dir.path("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&["init", "-q", "-b", "main"], &seed);
    std::fs::write(seed.join("README"), "hello from the repo\n").unwrap();
    git(&["add", "README"], &seed);
    git(&["commit", "-qm", "first"], &seed);
    let repo = root.join("repo.git");
    git(
        &[
            "clone",
            "-q",
            "--bare",
            seed.to_str().unwrap(),
            repo.to_str().unwrap(),
        ],
        &seed,
    );
    let py = dir.path("server.py");
    std::fs::write(&py, SERVER).unwrap();
    let child = Command::new("/usr/bin/python3")
        .arg(&py)
        .args([&SERVER_IP.to_string(), &PORT.to_string()])
        .arg(dir.path("srv.pem"))
        .arg(dir.path("srv.key"))
        .current_dir(&root)
        .env("GW_WATCH", SECRET)
        .env("GW_LEAKS", dir.path("leaks"))
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.receivepack")
        .env("GIT_CONFIG_VALUE_0", "true")
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Servers::listening(child, (SERVER_IP, PORT).into())
}

/// The port of [`H2_SERVER`], `h2.l7.test`.
const H2_PORT: u16 = 8444;

/// A server that speaks HTTP/2 only (Node's `http2`, no HTTP/1.1 fallback), over TLS with
/// the test certificate: it answers the method, path, `:authority` and body length.
const H2_SERVER: &str = r#"
const http2 = require("http2"), fs = require("fs");
const [ip, port, cert, key] = process.argv.slice(2);
const srv = http2.createSecureServer(
  { cert: fs.readFileSync(cert), key: fs.readFileSync(key), allowHTTP1: false });
srv.on("stream", (stream, headers) => {
  let n = 0;
  stream.on("data", (c) => (n += c.length));
  stream.on("end", () => {
    stream.respond({ ":status": 200, "content-type": "text/plain" });
    stream.end(`${headers[":method"]} ${headers[":path"]} h2 authority=${headers[":authority"]} body=${n}\n`);
  });
});
srv.listen(Number(port), ip);
"#;

/// [`H2_SERVER`] on `SERVER_IP`, port [`H2_PORT`].
fn h2_server(dir: &Scratch) -> Servers {
    let js = dir.path("h2_server.js");
    std::fs::write(&js, H2_SERVER).unwrap();
    let child = Command::new("node")
        .arg(&js)
        .args([&SERVER_IP.to_string(), &H2_PORT.to_string()])
        .arg(dir.path("srv.pem"))
        .arg(dir.path("srv.key"))
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Servers::listening(child, (SERVER_IP, H2_PORT).into())
}

/// The Python client: `requests`, the agent's own resolver standing in for DNS as curl's
/// `--resolve` does (the kernel still sends the connection to the proxy, which checks the
/// name against the session's resolver). Each attempt prints `py_NAME` and the answer's
/// first line, or the error's type.
const PY_CLIENT: &str = r#"
import os, socket, sys
import requests
ip, port, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3]
system = socket.getaddrinfo
def resolve(host, *a, **k):
    return system(ip if host.endswith(".l7.test") else host, *a, **k)
socket.getaddrinfo = resolve
def go(name, method, url, **kw):
    try:
        r = requests.request(method, url, timeout=20, **kw)
        print(name, (r.text.splitlines() or [""])[0])
    except Exception as e:
        print(name, "error", type(e).__name__)
base, other = "https://git.l7.test:%d" % port, "https://other.l7.test:%d" % port
bearer = {"Authorization": "Bearer " + os.environ.get("GH_TOKEN", "")}
go("py_get", "GET", base + "/echo/a")
go("py_post", "POST", base + "/echo/p", data={"x": "1"})
go("py_secret", "GET", base + "/echo/s", headers={"X-Note": secret})
go("py_cred", "GET", base + "/echo/c", headers=bearer)
go("py_leak", "GET", other + "/echo/l", headers=bearer)
"#;

/// The Node client: `https.request`, trusting `NODE_EXTRA_CA_CERTS`, with a `lookup` that
/// stands in for DNS as the Python client's does. Lines as the Python client's, `node_NAME`.
const NODE_CLIENT: &str = r#"
const https = require("https"), dns = require("dns");
const [ip, port, secret] = process.argv.slice(2);
function lookup(host, opts, cb) {
  if (!host.endsWith(".l7.test")) return dns.lookup(host, opts, cb);
  if (opts && opts.all) return cb(null, [{ address: ip, family: 4 }]);
  return cb(null, ip, 4);
}
function go(name, method, url, headers, body) {
  return new Promise((done) => {
    const req = https.request(url, { method, headers, lookup, timeout: 20000 }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => { console.log(name, text.split("\n")[0]); done(); });
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (e) => { console.log(name, "error", e.code || e.message); done(); });
    req.end(body);
  });
}
(async () => {
  const base = "https://git.l7.test:" + port, other = "https://other.l7.test:" + port;
  const bearer = { Authorization: "Bearer " + (process.env.GH_TOKEN || "") };
  const form = { "Content-Type": "application/x-www-form-urlencoded" };
  await go("node_get", "GET", base + "/echo/a", {});
  await go("node_post", "POST", base + "/echo/p", form, "x=1");
  await go("node_secret", "GET", base + "/echo/s", { "X-Note": secret });
  await go("node_cred", "GET", base + "/echo/c", bearer);
  await go("node_leak", "GET", other + "/echo/l", bearer);
})();
"#;

/// Where `requests` and what it needs lie (`cargo xtask` says).
fn py_requests() -> PathBuf {
    PathBuf::from(
        std::env::var_os("GATEWAYD_PY_REQUESTS")
            .expect("GATEWAYD_PY_REQUESTS: run through cargo xtask (Python's requests)"),
    )
}

/// The attempts, one line each: `NAME OUTCOME`. `$GH_TOKEN` is the agent's credential: the
/// real value bare, the placeholder under gatewayd. The names are given to curl and git
/// (`--resolve`, `http.curloptResolve`); under gatewayd the proxy checks them against the
/// session's resolver.
fn script(dir: &Scratch) -> String {
    let base = format!("https://git.l7.test:{PORT}");
    let other = format!("https://other.l7.test:{PORT}");
    let (g, o) = (
        format!("git.l7.test:{PORT}:{SERVER_IP}"),
        format!("other.l7.test:{PORT}:{SERVER_IP}"),
    );
    let curl = format!(
        "curl -sS --max-time 20 --resolve {g} --resolve {o} --resolve h2.l7.test:{H2_PORT}:{SERVER_IP}"
    );
    let h2 = format!("https://h2.l7.test:{H2_PORT}");
    let git = format!("git -c http.curloptResolve={g} -c user.name=t -c user.email=t@t.test");
    let clone = dir.path("clone");
    let py = dir.path("client.py");
    std::fs::write(&py, PY_CLIENT).unwrap();
    let js = dir.path("client.js");
    std::fs::write(&js, NODE_CLIENT).unwrap();
    let python = format!(
        "PYTHONPATH={} /usr/bin/python3 {} {SERVER_IP} {PORT} {SECRET}",
        py_requests().display(),
        py.display()
    );
    format!(
        r#"{python}
node {js} {SERVER_IP} {PORT} {SECRET}
echo "get $({curl} {base}/echo/a 2>&1 | head -n1)"
echo "post $({curl} -d x=1 {base}/echo/p 2>&1 | head -n1)"
echo "secret $({curl} -H 'X-Note: {SECRET}' {base}/echo/s 2>&1 | head -n1)"
echo "secret_b64 $({curl} -d "n=$(printf %s '{SECRET}' | base64)" {other}/echo/s 2>&1 | head -n1)"
echo "cred $({curl} -H "Authorization: Bearer $GH_TOKEN" {base}/echo/c 2>&1 | head -n1)"
echo "leak $({curl} -H "Authorization: Bearer $GH_TOKEN" {other}/echo/l 2>&1 | head -n1)"
echo "basic $({curl} -u "x-access-token:$GH_TOKEN" {base}/echo/c 2>&1 | head -n1)"
echo "basic_leak $({curl} -u "x-access-token:$GH_TOKEN" {other}/echo/l 2>&1 | head -n1)"
echo "big_head $({curl} -o /dev/null -w '%{{http_code}}' -H "X-Pad: $(printf %0100000d 0)" {base}/echo/b 2>/dev/null)"
echo "env_token $GH_TOKEN"
echo "front $({curl} -H 'Host: {elsewhere}' {base}/host 2>&1 | head -n1)"
echo "ws $({curl} --http1.1 -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' {base}/echo/ws 2>&1 | head -n1)"
echo "h2_get $({curl} --http2 {base}/echo/a 2>&1 | head -n1)"
echo "h2_version $({curl} --http2 -o /dev/null -w '%{{http_version}}' {base}/echo/a 2>&1)"
echo "h2_post $({curl} --http2 -d x=1 {base}/echo/p 2>&1 | head -n1)"
echo "h2_secret $({curl} --http2 -H 'X-Note: {SECRET}' {base}/echo/s 2>&1 | head -n1)"
echo "h2_cred $({curl} --http2 -H "Authorization: Bearer $GH_TOKEN" {base}/echo/c 2>&1 | head -n1)"
echo "h2up_get $({curl} --http2 {h2}/echo/u 2>&1 | head -n1)"
echo "h2up_post $({curl} --http2 -d x=1 {h2}/echo/p 2>&1 | head -n1)"
echo "h2up_secret $({curl} --http2 -H 'X-Note: {SECRET}' {h2}/echo/s 2>&1 | head -n1)"
echo "h2up_h1 $({curl} --http1.1 {h2}/echo/v 2>&1 | head -n1)"
echo "h2_front $({curl} --http2 -H 'Host: {elsewhere}' {base}/host 2>&1 | head -n1)"
yes 'the quick brown fox jumps over the lazy dog' | head -c 12000000 > {big}
{{ head -c 10000000 {big}; printf %s '{SECRET}'; head -c 2000000 {big}; }} > {bigs}
echo "big $({curl} --max-time 120 --data-binary @{big} {other}/echo/big 2>&1 | head -n1)"
echo "big_secret $({curl} --max-time 120 --data-binary @{bigs} {other}/echo/bigs 2>&1 | head -n1)"
rm -rf {c}
if {git} clone -q {base}/git/repo.git {c} 2>/dev/null; then echo "clone $(cat {c}/README)"; else echo "clone fail"; fi
cd {c} 2>/dev/null && echo more >> README && {git} commit -qam second
if {git} push -q origin HEAD:main 2>/dev/null; then echo "push ok"; else echo "push fail"; fi
"#,
        c = clone.display(),
        js = js.display(),
        elsewhere = ELSEWHERE,
        big = dir.path("big").display(),
        bigs = dir.path("bigs").display(),
    )
}

fn policy(ca: &Path) -> serde_json::Value {
    serde_json::json!({"version": 1, "kernel": "best_effort",
    "secrets": {"note": {"value": SECRET}},
    "credentials": {"gh": {"value": REAL}},
    "network": {"upstream_ca": ca, "egress": [
        {"host": "git.l7.test", "port": PORT,
         "http": [{"methods": ["GET", "HEAD"]},
                  {"methods": ["POST"], "path": "/git/*/git-upload-pack"}],
         "inject": [{"credential": "gh", "header": "Authorization", "env": "GH_TOKEN"}]},
        {"host": "other.l7.test", "port": PORT, "inspect": true},
        {"host": "h2.l7.test", "port": H2_PORT, "http": [{"methods": ["GET"]}]},
        {"cidr": format!("{DNS_IP}/32"), "port": 53},
        {"cidr": "127.0.0.0/8"}
    ]}})
}

/// Each refusal's record: its reason, host, method and path; the credential in none.
fn assert_records(audit: &Path) {
    let recs = records(audit);
    let with = |reason: &str| -> Vec<&serde_json::Value> {
        recs.iter()
            .filter(|r| r["reason"] == reason && r["decision"] == "deny")
            .collect()
    };
    let http = with("egress_http_not_allowed");
    assert!(
        http.iter()
            .any(|r| r["detail"]["method"] == "POST" && r["detail"]["path"] == "/echo/p"),
        "{http:#?}"
    );
    assert!(
        http.iter().any(|r| r["detail"]["method"] == "POST"
            && r["detail"]["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/git-receive-pack"))
            && r["detail"]["host"] == "git.l7.test"),
        "the push: {http:#?}"
    );
    assert!(
        http.iter().any(|r| r["detail"]["path"] == "/echo/ws"
            && r["detail"]["reason_detail"]
                .as_str()
                .is_some_and(|w| w.contains("upgrade to `websocket`"))),
        "the WebSocket upgrade: {http:#?}"
    );
    let secret = with("egress_secret");
    assert!(secret.len() >= 2, "{secret:#?}");
    assert!(
        secret
            .iter()
            .any(|r| r["detail"]["path"] == "/echo/bigs" && r["detail"]["host"] == "other.l7.test"),
        "the large body's second window: {secret:#?}"
    );
    let leak = with("egress_placeholder");
    assert!(
        leak.iter().any(|r| r["detail"]["host"] == "other.l7.test"),
        "{leak:#?}"
    );
    let fronting = with("egress_not_allowed");
    assert!(
        fronting
            .iter()
            .filter(|r| r["detail"]["request_host"] == ELSEWHERE
                && r["detail"]["host"] == "git.l7.test")
            .count()
            >= 2,
        "fronting over HTTP/1.1 and HTTP/2: {fronting:#?}"
    );
    let all = std::fs::read_to_string(audit).unwrap();
    assert!(!all.contains(REAL), "the credential is in no record");
}

/// Bare: every attempt works (the test CA trusted by curl and git, the real credential in
/// `GH_TOKEN`); the server's own limit refuses the 100 KB header.
fn bare(sh: &str, ca: &Path) -> std::collections::BTreeMap<String, String> {
    let bare = Command::new("sh")
        .args(["-c", sh])
        .env("GH_TOKEN", REAL)
        .env("CURL_CA_BUNDLE", ca)
        .env("GIT_SSL_CAINFO", ca)
        .env("REQUESTS_CA_BUNDLE", ca)
        .env("NODE_EXTRA_CA_CERTS", ca)
        .output()
        .unwrap();
    let text = stdout(&bare);
    let b = escape_outcomes(&text);
    assert_eq!(b["get"], "GET /echo/a auth=None body=0", "{text}");
    assert_eq!(b["post"], "POST /echo/p auth=None body=3", "{text}");
    assert_eq!(b["secret"], "GET /echo/s auth=None body=0", "{text}");
    assert!(b["secret_b64"].starts_with("POST /echo/s"), "{text}");
    assert_eq!(
        b["cred"],
        format!("GET /echo/c auth=Bearer {REAL} body=0"),
        "{text}"
    );
    assert_eq!(
        b["leak"],
        format!("GET /echo/l auth=Bearer {REAL} body=0"),
        "{text}"
    );
    // The server's own limit: 431, or `000` when it closed while curl was still sending the
    // rest of the head (a reset curl sees before the answer; a race on a loaded machine).
    assert!(
        matches!(b["big_head"].as_str(), "431" | "000"),
        "the server's own limit: {text}"
    );
    assert_eq!(b["clone"], "hello from the repo", "{text}");
    assert_eq!(b["push"], "ok", "{text}");
    assert!(
        b["basic"].starts_with("GET /echo/c auth=Basic ")
            && b["basic_leak"].contains("auth=Basic "),
        "{text}"
    );
    // Bodies over the proxy's 8 MiB window; the second carries the secret, which the
    // server sees (and notes in `leaks`).
    assert_eq!(b["big"], "POST /echo/big auth=None body=12000000", "{text}");
    assert_eq!(
        b["big_secret"],
        format!(
            "POST /echo/bigs auth=None body={}",
            12_000_000 + SECRET.len()
        ),
        "{text}"
    );
    // Fronting: the server routes by the request's host, whatever name the connection had.
    assert_eq!(b["front"], format!("host={ELSEWHERE}"), "{text}");
    assert_eq!(b["h2_front"], b["front"], "{text}");
    // The HTTP/2-only server: curl speaks HTTP/2 to it; HTTP/1.1 gets no answer.
    let h2up =
        |path: &str, body: usize| format!("{path} h2 authority=h2.l7.test:{H2_PORT} body={body}");
    assert_eq!(b["h2up_get"], h2up("GET /echo/u", 0), "{text}");
    assert_eq!(b["h2up_post"], h2up("POST /echo/p", 3), "{text}");
    assert_eq!(b["h2up_secret"], h2up("GET /echo/s", 0), "{text}");
    assert!(b["h2up_h1"].starts_with("curl:"), "{text}");
    // A WebSocket handshake reaches the server (which answers it as a plain GET).
    assert_eq!(b["ws"], "GET /echo/ws auth=None body=0", "{text}");
    // HTTP/2 asked for: this server speaks HTTP/1.1 only, and curl falls back.
    assert_eq!(b["h2_version"], "1.1", "{text}");
    for name in ["get", "post", "secret", "cred"] {
        assert_eq!(b[&format!("h2_{name}")], b[name], "HTTP/2 asked: {text}");
    }
    for client in ["py", "node"] {
        for name in ["get", "post", "secret", "cred", "leak"] {
            assert_eq!(
                b[&format!("{client}_{name}")],
                b[name],
                "{client} as curl: {text}"
            );
        }
    }
    b
}

#[test]
fn egress_l7_inspects_requests_and_injects_credentials() {
    let _ = tier();
    let _addrs: Vec<ExtraAddress> = [IpAddr::V4(SERVER_IP), IpAddr::V4(DNS_IP)]
        .into_iter()
        .map(ExtraAddress::add)
        .collect();
    let dir = Scratch::new("egress-l7");
    dns_server(DNS_IP, known);
    let ca = certificates(&dir);
    let _server = server(&dir);
    let _h2_server = h2_server(&dir);
    let sh = script(&dir);

    let b = bare(&sh, &ca);
    let leaks = dir.path("leaks");
    assert_eq!(
        std::fs::read_to_string(&leaks).unwrap_or_default(),
        "/echo/bigs\n",
        "bare, the large body's secret reached the server"
    );
    std::fs::remove_file(&leaks).unwrap();

    // Under gatewayd: the agent is given the session's bundle and the placeholder only.
    let policy = write_policy(&dir, policy(&ca));
    let audit = dir.path("audit.jsonl");
    let out = gatewayd_run()
        .arg("--policy")
        .arg(&policy)
        .arg("--audit")
        .arg(&audit)
        .args(["--", "sh", "-c", &sh])
        .env("GATEWAYD_DNS_SERVER", format!("{DNS_IP}:53"))
        .env_remove("GH_TOKEN")
        .output()
        .unwrap();
    let text = format!("{}\n{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    let g = escape_outcomes(&stdout(&out));
    assert_eq!(g["get"], "GET /echo/a auth=None body=0", "allowed: {text}");
    let refused = |n: &str, code: &str| {
        assert!(
            g[n].starts_with("gatewayd refused this request:") && g[n].contains("Next:"),
            "{n} refused ({code}): {text}"
        );
    };
    refused("post", "method");
    refused("secret", "secret");
    refused("secret_b64", "secret, base64");
    assert_eq!(
        g["cred"],
        format!("GET /echo/c auth=Bearer {REAL} body=0"),
        "the server sees the credential: {text}"
    );
    assert!(
        g["env_token"].starts_with("gatewayd-placeholder-") && !g["env_token"].contains(REAL),
        "the agent holds the placeholder only: {text}"
    );
    refused("leak", "placeholder elsewhere");
    // A 100 KB header: the proxy answers 431 itself (64 KiB of head at most) and closes
    // (curl may see the close first, while still sending: `000`); the session goes on (the
    // lines after it).
    assert!(matches!(g["big_head"].as_str(), "431" | "000"), "{text}");
    assert_eq!(
        g["clone"], "hello from the repo",
        "git clone allowed: {text}"
    );
    assert_eq!(g["push"], "fail", "git push refused: {text}");
    // Inside `Basic` credentials (`curl -u`, git's credential helpers): the server sees what
    // it sees bare, the real credential.
    assert_eq!(g["basic"], b["basic"], "Basic, credential injected: {text}");
    refused("basic_leak", "placeholder in Basic elsewhere");
    // A body over 8 MiB goes on as its windows pass; the one whose second window holds the
    // secret is refused there (curl sees the 403, or the reset if it was still sending), and
    // the server never gets the secret.
    assert_eq!(g["big"], b["big"], "a large body passes: {text}");
    assert!(
        !g["big_secret"].starts_with("POST /echo/bigs"),
        "the large body with a secret: {text}"
    );
    assert!(
        !leaks.exists(),
        "the secret reached the server: {:?}",
        std::fs::read_to_string(&leaks)
    );
    // A request naming another host than its connection's: refused (bare, the server
    // served it).
    refused("front", "fronting");
    // An upgrade on an inspected host: what follows it would pass unread.
    refused("ws", "WebSocket upgrade");
    // HTTP/2 toward the agent (ALPN h2): decided request by request as HTTP/1.1 is.
    assert_eq!(g["h2_version"], "2", "the agent got HTTP/2: {text}");
    assert_eq!(g["h2_get"], g["get"], "HTTP/2, allowed: {text}");
    refused("h2_post", "HTTP/2, method");
    refused("h2_secret", "HTTP/2, secret");
    assert_eq!(
        g["h2_cred"], g["cred"],
        "HTTP/2, credential injected: {text}"
    );
    refused("h2_front", "HTTP/2, fronting by :authority");
    // A server that takes HTTP/2 by ALPN gets it from the proxy: allowed, refused by rule
    // and by secret as before; an HTTP/1.1 agent's request reaches it too.
    assert_eq!(g["h2up_get"], b["h2up_get"], "HTTP/2 to the server: {text}");
    refused("h2up_post", "HTTP/2 to the server, method");
    refused("h2up_secret", "HTTP/2 to the server, secret");
    assert_eq!(
        g["h2up_h1"],
        format!("GET /echo/v h2 authority=h2.l7.test:{H2_PORT} body=0"),
        "HTTP/1.1 from the agent, HTTP/2 to the server: {text}"
    );
    // Python's requests and Node's https, trusting the session's bundle through
    // REQUESTS_CA_BUNDLE and NODE_EXTRA_CA_CERTS.
    for client in ["py", "node"] {
        let at = |name: &str| &g[&format!("{client}_{name}")];
        assert_eq!(at("get"), &g["get"], "{client} allowed: {text}");
        for n in ["post", "secret", "leak"] {
            refused(&format!("{client}_{n}"), client);
        }
        assert_eq!(
            at("cred"),
            &g["cred"],
            "{client}, credential injected: {text}"
        );
    }

    assert_records(&audit);
    assert!(verify(&audit).status.success());
}

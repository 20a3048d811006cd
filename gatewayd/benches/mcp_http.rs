//! The Streamable HTTP proxy's cost (docs/MCP.md): the official `server-everything` in its
//! `streamableHttp` mode, reached directly and through `gatewayd mcp --listen --url` (its
//! `echo` pinned in the policy, so every call is decided, its output checked and recorded
//! in the proxy's audit log), by a Streamable HTTP client written here on reqwest (POSTs
//! accepting JSON or SSE, as the SDK clients send them).
//! 1. Added latency per call: one session, `tools/call echo` one after the other, direct
//!    and proxied in turn (rounds alternating, same minutes); p50 and p99 of each.
//! 2. Throughput: 16 sessions at once, each calling in a loop, for a few seconds; calls/s
//!    direct and proxied.
//!
//! The server, the proxy and the client share the machine's cores, so the proxied
//! figures include the contention. `cargo bench -p gatewayd --bench mcp_http` (also run by
//! `cargo xtask bench`). `GATEWAYD_BENCH_BIN=PATH` runs another build of the proxy (an older
//! one, to compare in the same minutes).
// Binaries, tests and benches see every dependency of the package; the lint guards the
// library's own list (its src/lib.rs).
#![allow(unused_crate_dependencies)]
use std::{
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures_util::StreamExt as _;
use serde_json::{Value, json};

// The real components of the MCP tests and the sinks' process helpers, shared, not copied.
#[allow(dead_code)]
#[path = "../tests/daemon/export_sinks.rs"]
mod export_sinks;
#[allow(dead_code)]
#[path = "../tests/mcp/support.rs"]
mod support;
use export_sinks::{Proc, free_port, wait_for};

const ROUNDS: usize = 4;
const CALLS_PER_ROUND: usize = 300;
const STREAMS: usize = 16;
const RUN: Duration = Duration::from_secs(5);

/// One MCP session over Streamable HTTP.
struct Session {
    http: reqwest::Client,
    url: String,
    id: Option<String>,
    next: u64,
}

impl Session {
    async fn open(http: &reqwest::Client, url: &str) -> Session {
        let mut s = Session {
            http: http.clone(),
            url: url.to_owned(),
            id: None,
            next: 1,
        };
        let init = s
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}}),
            )
            .await;
        assert!(init.get("result").is_some(), "initialize: {init}");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = s.post(&note).send().await.unwrap();
        assert!(r.status().is_success(), "initialized: {}", r.status());
        s
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(id) = &self.id {
            r = r.header("mcp-session-id", id);
        }
        r
    }

    /// A request and its answer (a JSON body, or the answer among an SSE stream's events).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = self.post(&msg).send().await.unwrap();
        if let Some(s) = resp.headers().get("mcp-session-id") {
            self.id = Some(s.to_str().unwrap().to_owned());
        }
        let sse = resp
            .headers()
            .get("content-type")
            .is_some_and(|c| c.to_str().unwrap_or("").starts_with("text/event-stream"));
        if !sse {
            return serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        }
        let mut events = sse_stream::SseStream::new(reqwest::Body::from(resp));
        while let Some(Ok(ev)) = events.next().await {
            if let Some(v) = ev.data.and_then(|d| serde_json::from_str::<Value>(&d).ok())
                && v["id"] == json!(id)
            {
                return v;
            }
        }
        panic!("no answer to {method}");
    }

    async fn echo(&mut self, text: &str) {
        let r = self
            .request(
                "tools/call",
                json!({"name": "echo", "arguments": {"message": text}}),
            )
            .await;
        let out = r.pointer("/result/content/0/text").and_then(Value::as_str);
        assert!(out.is_some_and(|t| t.contains(text)), "echo: {r}");
    }

    async fn close(self) {
        if let Some(id) = &self.id {
            let _ = self
                .http
                .delete(&self.url)
                .header("mcp-session-id", id)
                .send()
                .await;
        }
    }
}

/// `server-everything` over Streamable HTTP, once it listens; its URL.
fn everything(dir: &Path) -> (Proc, String) {
    let port = free_port();
    let child = Command::new(support::everything_server())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
        .spawn()
        .unwrap();
    wait_for("server-everything to listen", 30, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (Proc(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// A policy allowing loopback egress with `echo` pinned to its listed definition, and the
/// proxy in front of `url`, once it listens; its endpoint.
async fn proxy(dir: &Path, http: &reqwest::Client, url: &str) -> (Proc, String) {
    let mut s = Session::open(http, url).await;
    let listed = s.request("tools/list", json!({})).await;
    s.close().await;
    let echo = listed["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "echo"))
        .expect("echo listed")
        .clone();
    let policy = dir.join("policy.json");
    let p = json!({"version": 1, "kernel": "best_effort",
        "network": {"egress": [{"cidr": "127.0.0.1/32"}]},
        "tools": [{"name": "echo", "description": echo["description"],
                   "input_schema": echo["inputSchema"]}],
        "mcp_servers": {"everything": {"url": url}}});
    std::fs::write(&policy, p.to_string()).unwrap();
    let port = free_port();
    let cmd = support::proxy_cmd(
        &policy,
        "everything",
        &dir.join("audit.jsonl"),
        &["--listen", &format!("127.0.0.1:{port}")],
    );
    let bin = std::env::var_os("GATEWAYD_BENCH_BIN").unwrap_or_else(|| cmd[0].clone().into());
    let child = Command::new(bin)
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the proxy to listen", 30, || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (Proc(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// Per-call latencies (µs) of `n` calls in one session.
async fn latencies(http: &reqwest::Client, url: &str, n: usize) -> Vec<u64> {
    let mut s = Session::open(http, url).await;
    s.echo("warm").await;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        s.echo(&format!("call {i}")).await;
        out.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
    }
    s.close().await;
    out
}

/// Calls/s of [`STREAMS`] sessions calling at once for [`RUN`].
async fn throughput(http: &reqwest::Client, url: &str) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut sessions = Vec::new();
    for _ in 0..STREAMS {
        sessions.push(Session::open(http, url).await);
    }
    let start = Instant::now();
    let tasks: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let (stop, done) = (stop.clone(), done.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    s.echo(&format!("stream {i}")).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                s.close().await;
            })
        })
        .collect();
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::Relaxed);
    let calls = done.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    for t in tasks {
        t.await.unwrap();
    }
    calls as f64 / secs
}

fn percentile(v: &mut [u64], p: f64) -> f64 {
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1000.0
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let (_server, direct) = everything(dir.path());
    let (_proxy, proxied) = rt.block_on(proxy(dir.path(), &http, &direct));

    let (mut d, mut p) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        d.extend(rt.block_on(latencies(&http, &direct, CALLS_PER_ROUND)));
        p.extend(rt.block_on(latencies(&http, &proxied, CALLS_PER_ROUND)));
    }
    let (d50, p50) = (percentile(&mut d, 0.5), percentile(&mut p, 0.5));
    let (d99, p99) = (percentile(&mut d, 0.99), percentile(&mut p, 0.99));
    println!(
        "mcp_http latency per call ({} calls each, {ROUNDS} rounds alternating): direct p50 {d50:.3} ms p99 {d99:.3} ms; proxied p50 {p50:.3} ms p99 {p99:.3} ms; added p50 {:.3} ms",
        d.len(),
        p50 - d50
    );
    let mut rates = (Vec::new(), Vec::new());
    for _ in 0..2 {
        rates.0.push(rt.block_on(throughput(&http, &direct)));
        rates.1.push(rt.block_on(throughput(&http, &proxied)));
    }
    println!(
        "mcp_http {STREAMS} concurrent sessions, {}s runs alternating: direct {:?} calls/s; proxied {:?} calls/s",
        RUN.as_secs(),
        rates.0.iter().map(|r| r.round()).collect::<Vec<_>>(),
        rates.1.iter().map(|r| r.round()).collect::<Vec<_>>()
    );
}

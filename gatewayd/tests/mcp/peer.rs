//! A raw JSON-RPC client over a child's stdio for the message tests (`messages`): it can
//! send what an SDK client would not (a task-augmented call, a repeated id) and sees every
//! request the server makes of it. The same driver talks to a server directly (bare) and
//! to `gatewayd mcp` in front of it.
use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use serde_json::{Value, json};

pub(crate) struct Peer {
    child: Child,
    lines: mpsc::Receiver<Value>,
    next_id: i64,
    /// Every request and notification the other side sent, in order.
    pub(crate) seen: Vec<Value>,
}

/// The default answers to a server's requests: a declined elicitation, a sampled text,
/// no roots.
fn answer(req: &Value) -> Value {
    match req["method"].as_str().unwrap_or("") {
        "elicitation/create" => json!({"result": {"action": "decline"}}),
        "sampling/createMessage" => json!({"result": {"role": "assistant",
            "content": {"type": "text", "text": "sampled"}, "model": "test"}}),
        "roots/list" => json!({"result": {"roots": []}}),
        m => json!({"error": {"code": -32601, "message": format!("no {m}")}}),
    }
}

impl Peer {
    /// Starts `cmd` without a handshake (a 2026-07-28 client: [`Peer::request_modern`]).
    pub(crate) fn spawn(cmd: &[String]) -> Peer {
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .env_remove("GATEWAYD_SESSION")
            .env_remove("GATEWAYD_SOCKET")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let v = serde_json::from_str(&l).unwrap_or_else(|e| panic!("wrote {l:?}: {e}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Peer {
            child,
            lines,
            next_id: 100,
            seen: Vec::new(),
        }
    }

    /// A 2026-07-28 request: the version, capabilities (form elicitation) and client in
    /// its `_meta`.
    pub(crate) fn request_modern(&mut self, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "gatewayd-tests", "version": "1"}});
        self.request(method, params)
    }

    /// Starts `cmd` and initializes a 2025-11-25 session offering elicitation (form and
    /// URL), sampling and roots.
    pub(crate) fn start(cmd: &[String]) -> Peer {
        let mut p = Peer::spawn(cmd);
        let init = p.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
                   "capabilities": {"elicitation": {"form": {}, "url": {}}, "sampling": {},
                                    "roots": {}},
                   "clientInfo": {"name": "gatewayd-tests", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        p
    }

    pub(crate) fn send(&mut self, v: &Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The next message (60 s at most: a node server's first start is slow).
    pub(crate) fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_mins(1))
            .expect("an answer within 60 s")
    }

    /// Sends a request with a fresh id; returns its response. Requests from the other side
    /// meanwhile are answered by default (and kept in `seen`, as are notifications).
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.request_id(&id, method, params)
    }

    /// [`Peer::request`] with a given id.
    pub(crate) fn request_id(&mut self, id: &Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until_response(id)
    }

    /// Reads until the response with `id`, answering requests by default.
    pub(crate) fn until_response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.next();
            if m.get("method").is_none() {
                if m["id"] == *id {
                    return m;
                }
                self.seen.push(m);
                continue;
            }
            if let Some(rid) = m.get("id") {
                let mut reply = answer(&m);
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = rid.clone();
                self.send(&reply);
            }
            self.seen.push(m);
        }
    }

    /// The requests the other side made with `method`.
    pub(crate) fn requests(&self, method: &str) -> Vec<&Value> {
        self.seen.iter().filter(|m| m["method"] == method).collect()
    }

    /// Ends a server run bare (it may wait for answers to requests of its own first).
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes the input and waits for the process.
    pub(crate) fn close(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The text of every text block of a result (content blocks, resource contents, prompt
/// messages), joined.
pub(crate) fn texts(v: &Value) -> String {
    let mut out = Vec::new();
    collect(v, &mut out);
    out.join("\n")
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(t) = o.get("text").and_then(Value::as_str) {
                out.push(t.to_owned());
            }
            o.iter()
                .filter(|(k, _)| *k != "text")
                .for_each(|(_, x)| collect(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        _ => {}
    }
}

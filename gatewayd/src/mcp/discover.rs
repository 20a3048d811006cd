//! Asking a tool server for its tools once, as `gatewayd policy add-mcp` does: the server is
//! started the way `gatewayd mcp` starts it ([`super::server::start`], under the profile
//! being proposed for it), `initialize`d as a client of protocol revision 2025-06-18 would,
//! listed page by page, then stopped. Nothing it offers is called.
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

use super::server::Started;

/// The protocol revision the listing client announces.
const PROTOCOL: &str = "2025-06-18";
/// Pages of `tools/list` read at most (a server that pages forever is cut off).
const MAX_PAGES: usize = 100;

/// Why the server's tools could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// The server did not answer a request within the time allowed.
    #[error("the server did not answer `{method}` within {secs} s")]
    Timeout {
        /// The request's method.
        method: &'static str,
        /// The time allowed.
        secs: u64,
    },
    /// The server closed its output (it exited, or refused to start under its profile).
    #[error("the server closed its output before answering `{0}` (its error output is above)")]
    Closed(&'static str),
    /// The server answered with an error.
    #[error("the server answered `{method}` with an error: {error}")]
    Refused {
        /// The request's method.
        method: &'static str,
        /// The JSON-RPC error object.
        error: Value,
    },
    /// The answer was not what the protocol says.
    #[error("the server's answer to `{method}` is not a protocol answer: {detail}")]
    Malformed {
        /// The request's method.
        method: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// Writing to or reading from the server failed.
    #[error("talking to the server: {0}")]
    Io(#[from] std::io::Error),
}

struct Client {
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    timeout: Duration,
}

impl Client {
    async fn send(&mut self, msg: &Value) -> Result<(), DiscoverError> {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Sends a request and waits for its answer's `result`, skipping the server's
    /// notifications and answering its own requests with "method not found".
    async fn request(
        &mut self,
        method: &'static str,
        params: Value,
    ) -> Result<Value, DiscoverError> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let timeout = self.timeout;
        let answer = tokio::time::timeout(timeout, self.answer_to(id, method)).await;
        answer.map_err(|_| DiscoverError::Timeout {
            method,
            secs: timeout.as_secs(),
        })?
    }

    async fn answer_to(&mut self, id: u64, method: &'static str) -> Result<Value, DiscoverError> {
        loop {
            let line = self
                .lines
                .next_line()
                .await?
                .ok_or(DiscoverError::Closed(method))?;
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg.get("method").is_some() {
                if let Some(their_id) = msg.get("id") {
                    let no = json!({"jsonrpc": "2.0", "id": their_id,
                        "error": {"code": -32601, "message": "the listing client offers nothing"}});
                    self.send(&no).await?;
                }
                continue;
            }
            if msg.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = msg.get("error") {
                return Err(DiscoverError::Refused {
                    method,
                    error: error.clone(),
                });
            }
            return msg.get("result").cloned().ok_or(DiscoverError::Malformed {
                method,
                detail: "neither result nor error".into(),
            });
        }
    }
}

/// Lists the tools of a server just started: every page of `tools/list`, in order. The
/// server is stopped (and its profile removed) whatever the outcome.
pub async fn list_tools(started: Started, timeout: Duration) -> Result<Vec<Value>, DiscoverError> {
    let Started {
        running,
        stdin,
        stdout,
        ..
    } = started;
    let mut client = Client {
        stdin,
        lines: BufReader::new(stdout).lines(),
        next_id: 0,
        timeout,
    };
    let listed = talk(&mut client).await;
    drop(client);
    running.stop().await;
    listed
}

async fn talk(client: &mut Client) -> Result<Vec<Value>, DiscoverError> {
    client
        .request(
            "initialize",
            json!({"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "gatewayd-policy-add-mcp",
                                  "version": env!("CARGO_PKG_VERSION")}}),
        )
        .await?;
    client
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await?;
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = client.request("tools/list", params).await?;
        let Some(listed) = page.get("tools").and_then(Value::as_array) else {
            return Err(DiscoverError::Malformed {
                method: "tools/list",
                detail: "no `tools` array".into(),
            });
        };
        tools.extend(listed.iter().cloned());
        cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    Err(DiscoverError::Malformed {
        method: "tools/list",
        detail: format!("more than {MAX_PAGES} pages"),
    })
}

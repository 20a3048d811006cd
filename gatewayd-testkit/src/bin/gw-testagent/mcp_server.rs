//! gw-testagent's `mcpserver`: a minimal MCP server on stdio, for the `gatewayd mcp` tests
//! (in the QEMU guest too, which has no other server).
use std::io::Write as _;

use super::{read, send};

/// A minimal MCP server on stdio (for `gatewayd mcp` tests, in the guest too): `initialize`,
/// `tools/list`, `tools/call` of `read {path}` (the file's text) and `send {to, text}` (a TCP
/// connect and send); failures are tool errors with the OS's message.
pub(crate) fn serve() -> Result<String, String> {
    use serde_json::{Value, json};
    use std::io::BufRead as _;
    let schema = |props: &[&str]| {
        let p: serde_json::Map<String, Value> = props
            .iter()
            .map(|k| ((*k).to_owned(), json!({"type": "string"})))
            .collect();
        json!({"type": "object", "properties": p})
    };
    let tools = json!([
        {"name": "read", "description": "Read a file.", "inputSchema": schema(&["path"])},
        {"name": "send", "description": "Send a text over TCP.", "inputSchema": schema(&["to", "text"])},
        {"name": "list", "description": "List a directory's names.", "inputSchema": schema(&["path"])}
    ]);
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id"), msg["method"].as_str()) else {
            continue;
        };
        let result = match method {
            "initialize" => json!({"protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "gw-testagent", "version": "1"}}),
            "tools/list" => json!({"tools": tools}),
            "tools/call" => {
                let a = &msg["params"]["arguments"];
                let s = |k: &str| a[k].as_str().unwrap_or("").to_owned();
                let r = match msg["params"]["name"].as_str() {
                    Some("read") => {
                        read(&s("path")).map(|b| String::from_utf8_lossy(&b).into_owned())
                    }
                    Some("send") => {
                        send(&s("to"), s("text").as_bytes()).map(|()| "sent".to_owned())
                    }
                    Some("list") => list(&s("path")),
                    _ => Err("no such tool".to_owned()),
                };
                let (text, err) = match r {
                    Ok(t) => (t, false),
                    Err(e) => (e, true),
                };
                json!({"content": [{"type": "text", "text": text}], "isError": err})
            }
            _ => {
                let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "unknown method"}});
                writeln!(out, "{e}").map_err(|e| e.to_string())?;
                out.flush().map_err(|e| e.to_string())?;
                continue;
            }
        };
        writeln!(
            out,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        )
        .map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    // Nothing else may reach stdout (MCP's stdio framing): no `OK` line after the server.
    std::process::exit(0)
}

/// A directory's entry names, sorted, one a line.
fn list(path: &str) -> Result<String, String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    names.sort();
    Ok(names.join("\n"))
}

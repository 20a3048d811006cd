//! A small blocking client of the daemon's protocol: the operator CLI, the tests and the
//! benchmark use it; front ends (the MCP proxy, the hooks) can too.
use std::{
    io::{self, BufRead, BufReader, Write},
    os::{fd::AsFd as _, unix::net::UnixStream},
    path::Path,
    time::Instant,
};

use serde_json::{Value, json};

use super::{
    poll::{self, Outcome, Window},
    protocol::RpcError,
};

/// Why a client request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be connected to.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: String,
        /// The connect error.
        source: io::Error,
    },
    /// Reading from or writing to the socket failed.
    #[error("talking to the daemon: {0}")]
    Io(#[from] io::Error),
    /// The daemon closed the connection before answering.
    #[error("the daemon closed the connection")]
    Closed,
    /// The answer is not a JSON-RPC response to this request.
    #[error("unreadable answer from the daemon: {0}")]
    Malformed(String),
    /// The daemon answered with an error.
    #[error("{0}")]
    Rpc(RpcError),
}

/// One connection; requests are answered in order.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    line: String,
    out: Vec<u8>,
    poll: Window,
}

impl Client {
    /// Connects to the daemon's socket at `path`.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Client {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
            next_id: 1,
            line: String::new(),
            out: Vec::new(),
            poll: Window::new(poll::CLIENT_POLL),
        })
    }

    /// Polls for the first byte of the answer up to the window ([`poll::CLIENT_POLL`],
    /// adaptive: see [`poll`]), then returns to let the read block. Nothing is consumed.
    fn await_answer(&mut self) -> io::Result<()> {
        let start = Instant::now();
        let until = if self.reader.buffer().is_empty() {
            self.poll.deadline(start)
        } else {
            None
        };
        let Some(until) = until else {
            self.poll.learn(Outcome::Blocked);
            return Ok(());
        };
        let mut probe = [0u8; 1];
        let mut last = start;
        loop {
            let now = Instant::now();
            match poll::recv_now(self.writer.as_fd(), &mut probe, libc::MSG_PEEK) {
                // Data, or the end of the stream: the read that follows returns at once.
                Ok(_) => {
                    self.poll.learn(Outcome::Hit);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if now >= until || now - last > poll::STALL {
                        // Nothing yet, or this thread lost its CPU: block in the read.
                        self.poll.learn(Outcome::Miss);
                        return Ok(());
                    }
                    last = now;
                    std::hint::spin_loop();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends one line as it is and reads one answer line (without its newline).
    pub fn raw(&mut self, line: &str) -> Result<String, ClientError> {
        // One write of the line and its newline, from a buffer kept for the next request.
        self.out.clear();
        self.out.extend_from_slice(line.as_bytes());
        self.out.push(b'\n');
        self.writer.write_all(&self.out)?;
        self.await_answer()?;
        self.line.clear();
        if self.reader.read_line(&mut self.line)? == 0 {
            return Err(ClientError::Closed);
        }
        Ok(self.line.trim_end_matches('\n').to_owned())
    }

    /// Calls `method`; the result, or the daemon's error as [`ClientError::Rpc`].
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self.raw(&req.to_string())?;
        let mut v: Value =
            serde_json::from_str(&answer).map_err(|e| ClientError::Malformed(e.to_string()))?;
        if v.get("id") != Some(&json!(id)) {
            return Err(ClientError::Malformed(format!(
                "answer to another id: {answer}"
            )));
        }
        if let Some(e) = v.get_mut("error") {
            let e: RpcError = serde_json::from_value(e.take())
                .map_err(|e| ClientError::Malformed(e.to_string()))?;
            return Err(ClientError::Rpc(e));
        }
        v.get_mut("result")
            .map(Value::take)
            .ok_or(ClientError::Malformed(answer))
    }
}

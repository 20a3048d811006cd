//! A small blocking client of the daemon's protocol: the operator CLI, the hooks, the MCP
//! proxy (through [`crate::backend::Backend`]), the tests and the benchmark use it. It checks
//! the daemon's protocol version when it connects, the one place every client does.
use std::{
    io::{self, BufRead, BufReader, Write},
    os::{fd::AsFd as _, unix::net::UnixStream},
    path::Path,
    time::Instant,
};

use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use super::{
    Hello, PROTOCOL_VERSION, Rpc,
    wire::{Answer, RpcError, request_line},
};
use crate::daemon::poll::{self, Outcome, Window};

/// Why a client request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be connected to.
    #[error(
        "cannot connect to {path}: {source} (is `gatewayd serve` running there? The socket is --socket, else $GATEWAYD_SOCKET, else /run/gatewayd/gatewayd.sock)"
    )]
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
    /// The daemon's `hello` names another protocol version than this build's.
    #[error("the daemon speaks protocol {got}, this gatewayd {want}")]
    Protocol {
        /// The `protocol` of the daemon's `hello`.
        got: u32,
        /// This build's [`PROTOCOL_VERSION`].
        want: u32,
    },
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
    /// Connects to the daemon's socket at `path` and checks that it speaks this build's
    /// protocol version (`hello`).
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let mut c = Client::connect_unchecked(path)?;
        let hello = c.request(&Hello {})?;
        if hello.protocol != PROTOCOL_VERSION {
            return Err(ClientError::Protocol {
                got: hello.protocol,
                want: PROTOCOL_VERSION,
            });
        }
        Ok(c)
    }

    /// Connects without the version check: for tests of the frame itself, and servers that
    /// are not gatewayd.
    pub fn connect_unchecked(path: &Path) -> Result<Client, ClientError> {
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

    /// Calls the method of `params`; its result, or the daemon's error as
    /// [`ClientError::Rpc`].
    pub fn request<R: Rpc>(&mut self, params: &R) -> Result<R::Reply, ClientError> {
        self.exchange(R::METHOD.name(), params)
    }

    /// Calls `method` with any parameters and returns the result as JSON: for tests that
    /// send what the typed requests cannot (misspelt fields, wrong types).
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.exchange(method, &params)
    }

    /// Sends one request and reads its answer as a `T`.
    fn exchange<P: Serialize, T: DeserializeOwned>(
        &mut self,
        method: &str,
        params: &P,
    ) -> Result<T, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let line =
            request_line(id, method, params).map_err(|e| ClientError::Malformed(e.to_string()))?;
        let answer = self.raw(&line)?;
        let a: Answer<T> = serde_json::from_str(&answer)
            .map_err(|e| ClientError::Malformed(format!("{e}: {answer}")))?;
        match a.into_result(id) {
            Some(Ok(r)) => Ok(r),
            Some(Err(e)) => Err(ClientError::Rpc(e)),
            None => Err(ClientError::Malformed(format!(
                "not an answer to request {id}: {answer}"
            ))),
        }
    }
}

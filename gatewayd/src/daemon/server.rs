//! The socket server (after tokio's mini-redis): [`run`] accepts connections until the
//! [`Shutdown`] fires, each connection in a task of its own; on shutdown it stops accepting,
//! lets every connection finish the request it is handling (the answer is sent), closes the
//! idle ones, and waits for them up to a grace period.
use std::{io, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::{
        UnixListener, UnixStream,
        unix::{OwnedReadHalf, OwnedWriteHalf},
    },
    task::JoinSet,
};

use super::{
    dispatch,
    gateway::Gateway,
    line_budget,
    peer::Peer,
    poll::{self, PollingRead},
};
use crate::{
    protocol::wire::{MAX_LINE, RpcError, code, response},
    shutdown::Shutdown,
};

/// How the server behaves under load and at the end.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Connections open at once; one more is answered with an error and closed.
    pub max_connections: usize,
    /// How long a connection may take to accept an answer before it is dropped.
    pub write_timeout: Duration,
    /// How long shutdown waits for connections to finish their request.
    pub grace: Duration,
    /// How long a connection is polled for its next line after an answer before its task
    /// waits in `epoll` ([`poll::SERVER_POLL`]; zero: never poll, e.g. on a host where a
    /// spinning core costs more than the wake-up it saves).
    pub poll: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_connections: 8192,
            write_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(10),
            poll: poll::SERVER_POLL,
        }
    }
}

/// Serves `gw` on `listener` until `shutdown` fires, then drains (see the module docs).
pub(crate) async fn run(
    listener: UnixListener,
    gw: Arc<Gateway>,
    mut shutdown: Shutdown,
    opts: ServerOptions,
) {
    let mut tasks = JoinSet::new();
    let budget = line_budget::Budget::default();
    loop {
        tokio::select! {
            () = shutdown.recv() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            res = listener.accept() => match res {
                Ok((stream, _)) => {
                    if tasks.len() >= opts.max_connections {
                        tokio::spawn(refuse(stream));
                        continue;
                    }
                    let conn = Connection {
                        gw: gw.clone(),
                        budget: budget.clone(),
                        shutdown: shutdown.clone(),
                        write_timeout: opts.write_timeout,
                        poll: opts.poll,
                    };
                    tasks.spawn(conn.serve(stream));
                }
                Err(e) => {
                    // Out of descriptors or memory: wait a little instead of spinning.
                    eprintln!("gatewayd: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(opts.grace, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        eprintln!(
            "gatewayd: {} connection(s) still busy after {:?}: closed",
            tasks.len(),
            opts.grace
        );
        tasks.shutdown().await;
    }
}

async fn refuse(mut stream: UnixStream) {
    let line = response(
        &serde_json::Value::Null,
        Err(RpcError::new(code::LIMIT, "too many connections")),
    );
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        stream.write_all(format!("{line}\n").as_bytes()),
    )
    .await;
}

/// Each connection's read buffer.
const READ_BUFFER: usize = 16 * 1024;

struct Connection {
    gw: Arc<Gateway>,
    budget: line_budget::Budget,
    shutdown: Shutdown,
    write_timeout: Duration,
    poll: Duration,
}

/// What reading one line gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadLine {
    /// A whole line was read into the buffer.
    Line,
    /// End of stream (a last line without a newline is returned as `Line` first).
    Eof,
    /// Longer than the limit: the connection cannot be resynchronised.
    TooLong,
    /// The daemon's budget for unfinished lines is spent ([`line_budget`]): the same.
    Busy,
}

/// Reads one line (without its newline) into `buf`, never holding more than `max` bytes; the
/// part of the line beyond [`line_budget::LINE_FREE`] taken from `held`'s budget (given back
/// by the caller once the line is handled).
pub(crate) async fn read_line_within<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
    mut held: Option<&mut line_budget::Held>,
) -> io::Result<ReadLine> {
    buf.clear();
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(if buf.is_empty() {
                ReadLine::Eof
            } else {
                ReadLine::Line
            });
        }
        let (take, done) = match avail.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        if buf.len() + take + usize::from(done) > max {
            return Ok(ReadLine::TooLong);
        }
        if let Some(h) = held.as_deref_mut()
            && !h.room_for(buf.len() + take)
        {
            return Ok(ReadLine::Busy);
        }
        buf.extend_from_slice(&avail[..take]);
        r.consume(take + usize::from(done));
        if done {
            return Ok(ReadLine::Line);
        }
    }
}

impl Connection {
    async fn serve(self, stream: UnixStream) {
        let peer = match Peer::of(&stream) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("gatewayd: peer credentials: {e}");
                return;
            }
        };
        let (r, mut w) = stream.into_split();
        // Polled for the first line (a client writes right after connecting) and for the
        // next one after each answer; the buffer is looked at first.
        let mut r: BufReader<PollingRead<OwnedReadHalf>> =
            BufReader::with_capacity(READ_BUFFER, PollingRead::new(r, self.poll));
        let key = peer
            .cgroup
            .clone()
            .unwrap_or_else(|| format!("uid {}", peer.uid));
        let mut held = line_budget::Held::new(self.budget.clone(), &key);
        r.get_mut().arm();
        let mut buf = Vec::new();
        // One wait for shutdown for the connection's life, not one per line: each new wait
        // registers with (and leaves) the channel every connection shares.
        let mut shutdown = self.shutdown;
        let stop = shutdown.recv();
        tokio::pin!(stop);
        loop {
            let read = tokio::select! {
                biased;
                () = &mut stop => return,
                read = read_line_within(&mut r, &mut buf, MAX_LINE, Some(&mut held)) => read,
            };
            let answer = match read {
                Ok(ReadLine::Line) => {
                    if buf.last() == Some(&b'\r') {
                        buf.pop();
                    }
                    if buf.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    // Not raced against shutdown: a request being handled is finished.
                    dispatch::handle_line(&self.gw, &peer, &buf).await
                }
                Ok(ReadLine::TooLong) => Some(response(
                    &serde_json::Value::Null,
                    Err(RpcError::new(
                        code::INVALID_REQUEST,
                        format!("message longer than {MAX_LINE} bytes; closing the connection"),
                    )),
                )),
                Ok(ReadLine::Busy) => Some(response(
                    &serde_json::Value::Null,
                    Err(RpcError::new(
                        code::LIMIT,
                        "the daemon holds too many long unfinished messages; closing the connection (retry later)",
                    )),
                )),
                Ok(ReadLine::Eof) | Err(_) => return,
            };
            if let Some(mut line) = answer {
                line.push('\n');
                if !send(&mut w, line.as_bytes(), self.write_timeout).await {
                    return;
                }
                if !r.buffer().contains(&b'\n') {
                    r.get_mut().arm();
                }
            }
            // The line is handled: its share of the budget goes back, and a long line's
            // buffer is not kept.
            held.release();
            if buf.capacity() > line_budget::LINE_FREE {
                buf = Vec::new();
            }
            if matches!(read, Ok(ReadLine::TooLong | ReadLine::Busy)) {
                return;
            }
        }
    }
}

/// Writes `line` whole: at once when the socket has room (the usual case: no timer is set
/// up), else waiting up to `timeout` for the client to take the rest. False: the connection
/// is to be dropped.
async fn send(w: &mut OwnedWriteHalf, line: &[u8], timeout: Duration) -> bool {
    let rest = match w.try_write(line) {
        Ok(n) if n == line.len() => return true,
        Ok(n) => &line[n..],
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => line,
        Err(_) => return false,
    };
    matches!(
        tokio::time::timeout(timeout, w.write_all(rest)).await,
        Ok(Ok(()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded() {
        let data = b"abc\r\nxyz\n0123456789\nlast".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line_within(&mut r, &mut buf, 8, None).await.unwrap(),
            ReadLine::Line
        );
        assert_eq!(buf, b"abc\r");
        assert_eq!(
            read_line_within(&mut r, &mut buf, 8, None).await.unwrap(),
            ReadLine::Line
        );
        assert_eq!(buf, b"xyz");
        assert_eq!(
            read_line_within(&mut r, &mut buf, 8, None).await.unwrap(),
            ReadLine::TooLong
        );
        assert!(buf.len() <= 8);
        let mut r = BufReader::new(&b"last"[..]);
        assert_eq!(
            read_line_within(&mut r, &mut buf, 8, None).await.unwrap(),
            ReadLine::Line
        );
        assert_eq!(buf, b"last");
        assert_eq!(
            read_line_within(&mut r, &mut buf, 8, None).await.unwrap(),
            ReadLine::Eof
        );
    }
}

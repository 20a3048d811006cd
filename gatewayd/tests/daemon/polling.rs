//! The bounded polling on both ends of a connection (gatewayd/src/daemon/poll.rs) never
//! loses a message: a request that comes after the daemon's window, a line split across the
//! window, lines sent together, a client gone during the window; and on the client's side an
//! answer that comes after its window, in pieces, or not at all.
use crate::support;

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::net::{UnixListener, UnixStream},
    sync::Arc,
    time::Duration,
};

use gatewayd::{
    daemon::poll::{CLIENT_POLL, SERVER_POLL},
    protocol::client::{Client, ClientError},
};
use gatewayd_core::clock::SystemClock;
use serde_json::{Value, json};
use support::Daemon;

/// Well past either window (and past a scheduler's time slice).
const LATE: Duration = Duration::from_millis(5);

fn hello(id: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"hello"}}"#)
}

fn read_answer(r: &mut BufReader<UnixStream>) -> Value {
    let mut line = String::new();
    assert!(r.read_line(&mut line).unwrap() > 0, "connection closed");
    serde_json::from_str(&line).unwrap()
}

fn daemon() -> Daemon {
    Daemon::start_with(support::policy, None, Arc::new(SystemClock))
}

#[test]
fn requests_after_the_daemons_window_are_answered() {
    assert!(LATE > SERVER_POLL * 10);
    let d = daemon();
    let mut s = UnixStream::connect(&d.socket).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    // Late, early, late...: the window misses, backs off, polls again; every line answered.
    for id in 1..=12u64 {
        if id % 3 != 0 {
            std::thread::sleep(LATE);
        }
        writeln!(s, "{}", hello(id)).unwrap();
        assert_eq!(read_answer(&mut r)["id"], json!(id));
    }
    // A line split across the window: its first half within it, the rest later.
    let line = hello(13);
    let (a, b) = line.split_at(line.len() / 2);
    s.write_all(a.as_bytes()).unwrap();
    std::thread::sleep(LATE);
    s.write_all(format!("{b}\n").as_bytes()).unwrap();
    assert_eq!(read_answer(&mut r)["id"], json!(13));
    // Lines sent together: both answered, in order.
    s.write_all(format!("{}\n{}\n", hello(14), hello(15)).as_bytes())
        .unwrap();
    assert_eq!(read_answer(&mut r)["id"], json!(14));
    assert_eq!(read_answer(&mut r)["id"], json!(15));
}

#[test]
fn a_client_gone_during_the_window_leaves_the_daemon_serving() {
    let d = daemon();
    for _ in 0..20 {
        // Closed right after its answer (while the daemon polls for the next line), or with
        // half a line sent: the daemon drops the connection and goes on.
        let mut s = UnixStream::connect(&d.socket).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        writeln!(s, "{}", hello(1)).unwrap();
        assert_eq!(read_answer(&mut r)["id"], json!(1));
        s.write_all(br#"{"jsonrpc":"2.0","#).unwrap();
        drop((s, r));
        // Closed before it sent anything (the daemon polls a new connection too).
        drop(UnixStream::connect(&d.socket).unwrap());
    }
    let mut c = d.client();
    assert_eq!(c.call("hello", json!({})).unwrap()["server"], "gatewayd");
}

/// A one-connection server that answers each line with `answer(line)`, written in the
/// pieces it returns with `LATE` before each, and closes `LATE` after `lines` lines.
fn fake_server(
    lines: usize,
    answer: impl Fn(&str) -> Vec<String> + Send + 'static,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::thread::JoinHandle<()>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.sock");
    let l = UnixListener::bind(&path).unwrap();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        for _ in 0..lines {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 {
                return;
            }
            for piece in answer(line.trim_end()) {
                std::thread::sleep(LATE);
                w.write_all(piece.as_bytes()).unwrap();
            }
        }
        std::thread::sleep(LATE);
    });
    (dir, path, t)
}

#[test]
fn answers_after_the_clients_window_are_read_whole() {
    assert!(LATE > CLIENT_POLL * 10);
    // Every answer late, the last one in three pieces; then the server closes.
    let (_dir, path, t) = fake_server(6, |line| {
        let v: Value = serde_json::from_str(line).unwrap();
        let a = json!({"jsonrpc": "2.0", "id": v["id"], "result": {"n": v["id"]}}).to_string();
        if v["id"] == json!(6) {
            Vec::new()
        } else if v["id"] == json!(5) {
            let (x, y) = a.split_at(a.len() / 2);
            let (x1, x2) = x.split_at(x.len() / 2);
            vec![x1.to_owned(), x2.to_owned(), format!("{y}\n")]
        } else {
            vec![format!("{a}\n")]
        }
    });
    let mut c = Client::connect_unchecked(&path).unwrap();
    for id in 1..=5u64 {
        assert_eq!(c.call("hello", json!({})).unwrap()["n"], json!(id));
    }
    // The sixth line gets no answer: the server closes (after the client's window).
    assert!(matches!(
        c.call("hello", json!({})),
        Err(ClientError::Closed)
    ));
    t.join().unwrap();
}

//! One client session of `--listen`: its router's input, its requests waiting for their
//! answers, and where the server's other messages go ([`Front::to_streams`]).
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use hyper::{
    Response, StatusCode,
    header::{HeaderValue, WWW_AUTHENTICATE},
};
use serde_json::Value;
use tokio::{io::AsyncBufRead, sync::mpsc};

use super::{Body, ClientAuth, full, lock, refuse, streams};
use crate::mcp::{
    jsonrpc::{self, Line, code},
    proxy::ASSOCIATED_ONLY,
};

/// What a session's router sent for one of the client's requests.
pub(super) enum Out {
    /// A message of the server's while the request is in flight.
    Message(String),
    /// The answer: the request's last line.
    Answer(String),
}

pub(super) struct Waiter {
    pub(super) id: Value,
    pub(super) tx: mpsc::UnboundedSender<Out>,
    /// The client accepts an SSE answer (the server's messages may go there).
    pub(super) stream: bool,
    /// The request's `_meta.progressToken` ([`progress_token`]'s form): its progress
    /// notifications go on its answer.
    pub(super) progress: Option<String>,
}

/// The `progressToken` of a progress notification, or of a request's `_meta`, as one string
/// (a number and a string of the same digits differ).
pub(super) fn progress_token(line: &str) -> Option<String> {
    progress_token_of(&serde_json::from_str(line).ok()?)
}

fn progress_token_of(v: &Value) -> Option<String> {
    let token = match v.get("method").and_then(Value::as_str) {
        Some("notifications/progress") => v.pointer("/params/progressToken"),
        Some(_) if v.get("id").is_some() => v.pointer("/params/_meta/progressToken"),
        _ => None,
    }?;
    Some(token.to_string())
}

/// A server request that belongs to a client request (SEP-2260: over Streamable HTTP it
/// rides that request's answer; [`ASSOCIATED_ONLY`]). `ping` and the others are not tied.
fn tied_to_a_client_request(message: &Value) -> bool {
    message.get("id").is_some()
        && message
            .get("method")
            .and_then(Value::as_str)
            .is_some_and(|m| ASSOCIATED_ONLY.contains(&m))
}

/// One client session: its router's input, its requests waiting, its GET stream.
pub(super) struct Front {
    /// The router's input; taken (closed) by `DELETE`.
    pub(super) to_router: Mutex<Option<mpsc::Sender<String>>>,
    /// Requests waiting for their answer, by id.
    pub(super) waiters: Mutex<HashMap<String, Waiter>>,
    /// The session's SSE streams: the GET stream and each request answered as SSE.
    pub(super) streams: Arc<Mutex<streams::Streams>>,
    /// The client's authorization for a remote server (None: a stdio server, no headers).
    pub(super) client_auth: Option<Arc<ClientAuth>>,
    /// Each SSE answer opens with a priming event ([`streams::Streams::open`]): the client
    /// asked for 2025-11-25 or later.
    pub(super) prime_streams: bool,
}

impl Front {
    /// The router's output lines: an answer goes to the request waiting for it; anything
    /// else to the client's streams.
    pub(super) async fn read_router<R: AsyncBufRead + Unpin>(self: Arc<Self>, mut out: R) {
        let mut buf = Vec::new();
        while let Ok(Line::Whole) = jsonrpc::read_line(&mut out, &mut buf, usize::MAX).await {
            let line = String::from_utf8_lossy(&buf).into_owned();
            let waiter = match jsonrpc::parse(&buf) {
                Ok((_, jsonrpc::Message::Response { id })) => {
                    lock(&self.waiters).remove(&jsonrpc::id_key(&id))
                }
                _ => None,
            };
            match waiter {
                Some(w) => {
                    let _ = w.tx.send(Out::Answer(line));
                }
                None => self.to_streams(line),
            }
        }
        // The session's router is done: the requests still waiting fail (their senders drop).
        lock(&self.waiters).clear();
    }

    /// A message of the server's: a progress notification on the SSE answer of the request
    /// that asked for it (its `progressToken`); a sampling, elicitation or roots request on
    /// the SSE answer of the one client request in flight (a stdio server's message names no
    /// request: with several in flight, which one it serves is not known); any other to
    /// the GET stream when one is open, else on the SSE answer of a request in flight, else
    /// held on the GET stream for its next connection.
    fn to_streams(&self, line: String) {
        let mut s = lock(&self.streams);
        let message: Value = serde_json::from_str(&line).unwrap_or_default();
        let line = if let Some(token) = progress_token_of(&message) {
            match self.to_waiter(line, |w, _| w.progress.as_deref() == Some(token.as_str())) {
                Some(line) => line,
                None => return,
            }
        } else if tied_to_a_client_request(&message) {
            match self.to_waiter(line, |w, in_flight| in_flight == 1 && w.stream) {
                Some(line) => line,
                None => return,
            }
        } else {
            line
        };
        if s.get_connected() {
            return s.push(streams::GET_STREAM, line, false);
        }
        if let Some(line) = self.to_waiter(line, |_, _| true) {
            s.push(streams::GET_STREAM, line, false);
        }
    }

    /// `line` on the SSE answer of the first request in flight that `which` takes (given
    /// it and how many are in flight); the line back when there is none.
    fn to_waiter(&self, line: String, which: impl Fn(&Waiter, usize) -> bool) -> Option<String> {
        let w = lock(&self.waiters);
        let Some(waiter) = w.values().find(|v| v.stream && which(v, w.len())) else {
            return Some(line);
        };
        match waiter.tx.send(Out::Message(line)) {
            Ok(()) => None,
            Err(e) => match e.0 {
                Out::Message(l) | Out::Answer(l) => Some(l),
            },
        }
    }

    /// A notification or an answer of the client's: to the router, `202 Accepted`.
    pub(super) async fn notify(&self, line: String) -> Response<Body> {
        let Some(to_router) = lock(&self.to_router).clone() else {
            return refuse(StatusCode::NOT_FOUND, "the session has ended");
        };
        let _ = to_router.send(line).await;
        full(StatusCode::ACCEPTED, String::new())
    }

    /// A request of the client's: to the router; its answer as JSON, or as SSE (after the
    /// server's messages meanwhile) when the client accepts it; the server's refusal of
    /// the client's authorization as the server's own HTTP answer.
    pub(super) async fn request(&self, id: Value, line: String, stream: bool) -> Response<Body> {
        let Some(to_router) = lock(&self.to_router).clone() else {
            return refuse(StatusCode::NOT_FOUND, "the session has ended");
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut w = lock(&self.waiters);
            let key = jsonrpc::id_key(&id);
            if w.contains_key(&key) {
                let m = format!("request id {id} is in flight already; refused");
                return full(
                    StatusCode::OK,
                    jsonrpc::error_response(&id, code::INVALID_REQUEST, &m),
                );
            }
            w.insert(
                key,
                Waiter {
                    id: id.clone(),
                    tx,
                    stream,
                    progress: progress_token(&line),
                },
            );
        }
        if to_router.send(line).await.is_err() {
            return refuse(StatusCode::SERVICE_UNAVAILABLE, "the session has ended");
        }
        let Some(first) = rx.recv().await else {
            return refuse(StatusCode::SERVICE_UNAVAILABLE, "the session has ended");
        };
        match first {
            Out::Answer(answer) => {
                if let Some(c) = self
                    .client_auth
                    .as_ref()
                    .and_then(|c| c.take_challenge(&id))
                {
                    let status = StatusCode::from_u16(c.status).unwrap_or(StatusCode::UNAUTHORIZED);
                    let mut r = full(status, answer);
                    if let Some(w) = c.www_authenticate {
                        r.headers_mut().insert(WWW_AUTHENTICATE, w);
                    }
                    return r;
                }
                if stream {
                    self.stream_answer(Out::Answer(answer), rx)
                } else {
                    full(StatusCode::OK, answer)
                }
            }
            message @ Out::Message(_) => self.stream_answer(message, rx),
        }
    }

    /// A request's SSE answer: a stream of the session's, carrying `first`, then what `rx`
    /// brings, up to and with the answer; resumable while the session keeps it.
    fn stream_answer(&self, first: Out, rx: mpsc::UnboundedReceiver<Out>) -> Response<Body> {
        let (n, response) = lock(&self.streams).open(self.prime_streams);
        tokio::spawn(pump(self.streams.clone(), n, first, rx));
        response
    }

    /// A `GET`: the session's GET stream, or with `Last-Event-ID` the stream that event was
    /// on, again from the event after it.
    pub(super) fn open_get(&self, last_event_id: Option<&HeaderValue>) -> Response<Body> {
        let mut s = lock(&self.streams);
        let Some(id) = last_event_id else {
            return s
                .open_get()
                .unwrap_or_else(|| refuse(StatusCode::CONFLICT, "a GET stream is already open"));
        };
        match id
            .to_str()
            .map_err(|_| streams::ResumeError::Malformed)
            .and_then(|id| s.resume(id))
        {
            Ok(r) => r,
            Err(streams::ResumeError::Malformed) => refuse(
                StatusCode::BAD_REQUEST,
                "Last-Event-ID is not an event id of this endpoint (STREAM-SEQ)",
            ),
            Err(streams::ResumeError::Unknown) => refuse(
                StatusCode::NOT_FOUND,
                "no stream of this session has that event: it finished long ago, or never was",
            ),
        }
    }
}

/// Moves a request's messages and then its answer onto its stream `n`; a session that ends
/// first finishes the stream without an answer.
async fn pump(
    streams: Arc<Mutex<streams::Streams>>,
    n: u64,
    first: Out,
    mut rx: mpsc::UnboundedReceiver<Out>,
) {
    let mut next = Some(first);
    loop {
        let item = match next.take() {
            Some(item) => item,
            None => match rx.recv().await {
                Some(item) => item,
                None => return lock(&streams).finish(n),
            },
        };
        match item {
            Out::Message(line) => lock(&streams).push(n, line, false),
            Out::Answer(line) => return lock(&streams).push(n, line, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front() -> Front {
        Front {
            to_router: Mutex::new(None),
            waiters: Mutex::new(HashMap::new()),
            streams: Arc::default(),
            client_auth: None,
            prime_streams: false,
        }
    }

    /// A request `id` in flight with an SSE answer, asking for progress as `token`.
    fn waiting(f: &Front, id: u64, token: Value) -> mpsc::UnboundedReceiver<Out> {
        let (tx, rx) = mpsc::unbounded_channel();
        let line = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "t", "_meta": {"progressToken": token}}})
        .to_string();
        lock(&f.waiters).insert(
            id.to_string(),
            Waiter {
                id: id.into(),
                tx,
                stream: true,
                progress: progress_token(&line),
            },
        );
        rx
    }

    fn progress(token: Value) -> String {
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1}})
        .to_string()
    }

    fn got(rx: &mut mpsc::UnboundedReceiver<Out>) -> Option<String> {
        match rx.try_recv().ok()? {
            Out::Message(l) | Out::Answer(l) => Some(l),
        }
    }

    #[test]
    fn a_server_request_goes_on_the_answer_of_the_one_request_in_flight() {
        let f = front();
        let _get = lock(&f.streams).open_get().unwrap();
        let elicit = r#"{"jsonrpc":"2.0","id":5,"method":"elicitation/create","params":{}}"#;
        let ping = r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#;
        // Alone in flight, the call gets the elicitation, though the GET stream is open; a
        // ping is no call's.
        let mut a = waiting(&f, 1, 7.into());
        f.to_streams(elicit.into());
        f.to_streams(ping.into());
        assert_eq!(got(&mut a), Some(elicit.into()));
        assert_eq!(got(&mut a), None);
        // With two in flight, which one the server serves is not known: the GET stream.
        let mut b = waiting(&f, 2, 8.into());
        f.to_streams(elicit.into());
        assert_eq!((got(&mut a), got(&mut b)), (None, None));
    }

    #[test]
    fn progress_goes_on_the_answer_of_the_request_that_asked_for_it() {
        let f = front();
        let (mut a, mut b) = (waiting(&f, 1, 7.into()), waiting(&f, 2, "b".into()));
        // Even with the GET stream open, a request's progress is its own.
        let _get = lock(&f.streams).open_get().unwrap();
        for _ in 0..3 {
            f.to_streams(progress("b".into()));
            assert_eq!(got(&mut b), Some(progress("b".into())));
            assert_eq!(got(&mut a), None);
        }
        f.to_streams(progress(7.into()));
        assert_eq!(got(&mut a), Some(progress(7.into())));
        // A token of the same digits as a string is another token: not request 1's; nor is
        // any other message, which goes to the open GET stream.
        f.to_streams(progress("7".into()));
        let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
        f.to_streams(log.into());
        assert_eq!((got(&mut a), got(&mut b)), (None, None));
    }
}

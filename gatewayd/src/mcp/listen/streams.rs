//! The SSE streams of one client session of `--listen`, each with the events it carried, so
//! that a client whose connection was cut resumes the stream where it was (a `GET` with
//! `Last-Event-ID`; docs/MCP.md, "A local HTTP endpoint"). Stream 0 is the session's GET
//! stream; each request answered as SSE opens the next number. An event's id is
//! `STREAM-SEQ`, so a resumption names its stream: its later events are sent again, never
//! another stream's. A stream keeps its last [`BACKLOG`] events; a finished one (its answer
//! sent) is kept until [`FINISHED`] others have finished after it.
use std::{
    collections::{HashMap, VecDeque},
    convert::Infallible,
};

use hyper::Response;
use tokio::sync::mpsc;

use super::{Body, event_stream};

/// Events each stream keeps (and the GET stream holds while no client has it open).
pub(super) const BACKLOG: usize = 1024;
/// Finished request streams a session keeps for resumption.
const FINISHED: usize = 16;
/// The session's GET stream.
pub(super) const GET_STREAM: u64 = 0;

/// One event for a connection: its id and its data.
type Event = (String, String);

/// Why a `Last-Event-ID` cannot be resumed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ResumeError {
    /// Not `STREAM-SEQ`.
    Malformed,
    /// No such stream in this session (never opened, or finished long ago).
    Unknown,
}

/// One stream's events and the connection it has now, if any.
struct Log {
    stream: u64,
    /// (seq, data), the last [`BACKLOG`].
    events: VecDeque<(u64, String)>,
    /// The next event's seq.
    next: u64,
    /// The first seq not handed to a connection yet.
    unsent: u64,
    /// The connection's sender; dropped when the stream finished or the connection is gone.
    sink: Option<mpsc::UnboundedSender<Event>>,
    /// The stream's answer was sent: nothing more comes.
    done: bool,
}

impl Log {
    fn new(stream: u64) -> Log {
        Log {
            stream,
            events: VecDeque::new(),
            next: 1,
            unsent: 1,
            sink: None,
            done: false,
        }
    }

    fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.stream)
    }

    /// A new connection for this stream, given first every kept event from `from` on; the
    /// body of a finished stream ends after them. An older connection is let go.
    fn connect(&mut self, from: u64) -> Response<Body> {
        let (tx, rx) = mpsc::unbounded_channel();
        for (seq, data) in self.events.iter().filter(|(seq, _)| *seq >= from) {
            let _ = tx.send((self.id(*seq), data.clone()));
        }
        self.unsent = self.next;
        self.sink = (!self.done).then_some(tx);
        stream_body(rx)
    }

    /// Whether a connection has the stream now.
    fn connected(&self) -> bool {
        self.sink.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// Keeps `data` as the next event and hands it to the connection, if any.
    fn push(&mut self, data: String) {
        let seq = self.next;
        self.next += 1;
        if let Some(sink) = &self.sink {
            if sink.send((self.id(seq), data.clone())).is_ok() {
                self.unsent = self.next;
            } else {
                self.sink = None;
            }
        }
        self.events.push_back((seq, data));
        while self.events.len() > BACKLOG {
            self.events.pop_front();
        }
    }
}

/// A session's streams.
pub(super) struct Streams {
    logs: HashMap<u64, Log>,
    /// The next request stream's number.
    next: u64,
    /// Finished request streams, oldest first.
    finished: VecDeque<u64>,
}

impl Default for Streams {
    fn default() -> Streams {
        Streams {
            logs: HashMap::from([(GET_STREAM, Log::new(GET_STREAM))]),
            next: GET_STREAM + 1,
            finished: VecDeque::new(),
        }
    }
}

impl Streams {
    /// A new request stream and the body of its first connection.
    /// `prime`: the stream's first event is an id with empty data (2025-11-25 on), so that a
    /// client whose connection is cut before the server's first message can still resume.
    pub(super) fn open(&mut self, prime: bool) -> (u64, Response<Body>) {
        let n = self.next;
        self.next += 1;
        let mut log = Log::new(n);
        if prime {
            log.push(String::new());
        }
        let body = log.connect(1);
        self.logs.insert(n, log);
        (n, body)
    }

    /// Whether a client has the GET stream open.
    pub(super) fn get_connected(&self) -> bool {
        self.logs.get(&GET_STREAM).is_some_and(Log::connected)
    }

    /// `data` as the next event of `stream`; `last`: the stream's answer, after which it
    /// ends. A stream unknown (finished and forgotten) takes nothing.
    pub(super) fn push(&mut self, stream: u64, data: String, last: bool) {
        let Some(log) = self.logs.get_mut(&stream) else {
            return;
        };
        log.push(data);
        if last {
            self.finish(stream);
        }
    }

    /// Nothing more comes on `stream` (its answer was sent, or its session ended): its
    /// connection ends, and its events are kept for [`FINISHED`] more finished streams.
    pub(super) fn finish(&mut self, stream: u64) {
        let Some(log) = self.logs.get_mut(&stream) else {
            return;
        };
        log.done = true;
        log.sink = None;
        self.finished.push_back(stream);
        while self.finished.len() > FINISHED {
            if let Some(old) = self.finished.pop_front() {
                self.logs.remove(&old);
            }
        }
    }

    /// A `GET` without `Last-Event-ID`: the GET stream, with what it held since its last
    /// connection; `None` when a client has it open already.
    pub(super) fn open_get(&mut self) -> Option<Response<Body>> {
        let log = self.logs.get_mut(&GET_STREAM)?;
        if log.connected() {
            return None;
        }
        let from = log.unsent;
        Some(log.connect(from))
    }

    /// A `GET` with `Last-Event-ID: id`: its stream again, from the event after `id` (the
    /// connection that had it is let go).
    pub(super) fn resume(&mut self, id: &str) -> Result<Response<Body>, ResumeError> {
        let (stream, seq) = id
            .trim()
            .split_once('-')
            .and_then(|(s, q)| Some((s.parse::<u64>().ok()?, q.parse::<u64>().ok()?)))
            .ok_or(ResumeError::Malformed)?;
        let log = self.logs.get_mut(&stream).ok_or(ResumeError::Unknown)?;
        Ok(log.connect(seq.saturating_add(1)))
    }
}

/// The SSE body that carries what `rx` brings, each event with its id.
fn stream_body(rx: mpsc::UnboundedReceiver<Event>) -> Response<Body> {
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        let (id, data) = rx.recv().await?;
        Some((
            Ok::<_, Infallible>(sse_stream::Sse::default().id(id).data(data)),
            rx,
        ))
    });
    event_stream(events)
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    /// The text of a body that ends (a finished stream's).
    async fn text(r: Response<Body>) -> String {
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// The next event of a body still open.
    async fn next_event(body: &mut Body) -> String {
        let frame = body.frame().await.unwrap().unwrap();
        String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_cut_stream_resumes_after_its_last_event_and_carries_only_its_own() {
        let mut s = Streams::default();
        let (n, first) = s.open(false);
        let mut first = first.into_body();
        s.push(n, "a".into(), false);
        assert_eq!(
            next_event(&mut first).await,
            format!("data: a\nid: {n}-1\n\n")
        );
        drop(first); // the client's connection is cut
        s.push(GET_STREAM, "g".into(), false);
        s.push(n, "b".into(), false);
        s.push(n, "answer".into(), true);
        let again = text(s.resume(&format!("{n}-1")).unwrap()).await;
        assert_eq!(
            again,
            format!("data: b\nid: {n}-2\n\ndata: answer\nid: {n}-3\n\n"),
            "the later events, its answer last, and the body ends"
        );
        // Resumed again from its start, the finished stream gives all it kept.
        assert!(
            text(s.resume(&format!("{n}-0")).unwrap())
                .await
                .contains("data: a")
        );
    }

    #[tokio::test]
    async fn a_primed_stream_opens_with_an_id_and_no_data_and_resumes_after_it() {
        let mut s = Streams::default();
        let (n, first) = s.open(true);
        let mut first = first.into_body();
        assert_eq!(
            next_event(&mut first).await,
            format!("data: \nid: {n}-1\n\n")
        );
        drop(first); // cut before the server said anything
        s.push(n, "answer".into(), true);
        let again = text(s.resume(&format!("{n}-1")).unwrap()).await;
        assert_eq!(again, format!("data: answer\nid: {n}-2\n\n"));
    }

    #[tokio::test]
    async fn the_get_stream_holds_what_came_while_closed_and_resumes_while_live() {
        let mut s = Streams::default();
        s.push(GET_STREAM, "held".into(), false);
        assert!(!s.get_connected());
        let mut get = s.open_get().unwrap().into_body();
        assert!(s.get_connected());
        assert!(s.open_get().is_none(), "one GET stream at a time");
        assert_eq!(next_event(&mut get).await, "data: held\nid: 0-1\n\n");
        s.push(GET_STREAM, "live".into(), false);
        assert_eq!(next_event(&mut get).await, "data: live\nid: 0-2\n\n");
        // A resumption takes the stream over from the connection the client lost.
        let mut resumed = s.resume("0-1").unwrap().into_body();
        assert_eq!(next_event(&mut resumed).await, "data: live\nid: 0-2\n\n");
        s.push(GET_STREAM, "after".into(), false);
        assert_eq!(next_event(&mut resumed).await, "data: after\nid: 0-3\n\n");
        assert!(get.frame().await.is_none(), "the old connection was let go");
    }

    #[test]
    fn a_bad_or_unknown_event_id_is_refused_and_old_finished_streams_are_forgotten() {
        let mut s = Streams::default();
        for bad in ["", "abc", "1", "1-x", "-1-2"] {
            assert_eq!(s.resume(bad).err(), Some(ResumeError::Malformed), "{bad}");
        }
        assert_eq!(s.resume("9-1").err(), Some(ResumeError::Unknown));
        let streams: Vec<u64> = (0..=FINISHED)
            .map(|_| {
                let (n, _) = s.open(false);
                s.push(n, "answer".into(), true);
                n
            })
            .collect();
        assert_eq!(
            s.resume(&format!("{}-0", streams[0])).err(),
            Some(ResumeError::Unknown),
            "the oldest of {} finished streams is forgotten",
            FINISHED + 1
        );
        assert!(s.resume(&format!("{}-0", streams[1])).is_ok());
        for _ in 0..BACKLOG + 5 {
            s.push(GET_STREAM, "x".into(), false);
        }
        assert_eq!(s.logs[&GET_STREAM].events.len(), BACKLOG);
    }
}

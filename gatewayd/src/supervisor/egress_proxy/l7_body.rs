//! A request body to an inspected host. One of at most [`MAX_BODY`] bytes is read whole and
//! checked with its request ([`super::l7`]). A larger one goes to the server as it is
//! checked, in windows of [`MAX_BODY`] bytes, each beginning with the last `overlap` bytes
//! of the one before: at least [`MIN_OVERLAP`], and at least the most bytes one form of a
//! secret or placeholder can take, so every occurrence of a form lies whole in one window.
//! A byte leaves only once a window that holds it and the overlap after it (or the body's
//! end) has passed, so a window that does not pass stops the request before any byte of
//! what it found has left; the server's side of the request is then broken off (an error
//! in its body: its connection is reset), so it never takes what it got for the whole body.
//! Memory: one window and one frame (hyper reads at most 64 KiB at a time) per request.
use std::{
    pin::Pin,
    task::{Context, Poll},
};

use http_body_util::BodyExt as _;
use hyper::body::{Body, Bytes, Frame, Incoming};
use tokio::sync::mpsc;

/// The largest request body read whole and checked with its request, and the size of each
/// window of a larger one.
pub(super) const MAX_BODY: usize = 8 * 1024 * 1024;
/// The least overlap between windows.
const MIN_OVERLAP: usize = 64 * 1024;

/// A request body as first read.
pub(super) enum FirstRead {
    /// The whole body (at most [`MAX_BODY`] bytes).
    Whole(Bytes),
    /// Its first [`MAX_BODY`] bytes, or a frame more; the rest is still to come.
    Large(Vec<u8>),
}

/// Reads `body` until it ends or has given more than `max` bytes.
pub(super) async fn read_first(body: &mut Incoming, max: usize) -> Result<FirstRead, hyper::Error> {
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            buf.extend_from_slice(&data);
            if buf.len() > max {
                return Ok(FirstRead::Large(buf));
            }
        }
    }
    Ok(FirstRead::Whole(Bytes::from(buf)))
}

/// The windows of a large body (see the module): the bytes not sent yet, the last ones of
/// the window checked last first.
#[derive(Debug)]
pub(super) struct Windows {
    held: Vec<u8>,
    /// How many of `held`'s first bytes a window that passed covered.
    checked: usize,
    window: usize,
    overlap: usize,
}

impl Windows {
    /// After the first window (`first`, which passed with its request), windows of `window`
    /// bytes overlapping by at least `longest_form`: the windows and what may be sent now.
    pub(super) fn after_first(
        first: Vec<u8>,
        window: usize,
        longest_form: usize,
    ) -> (Windows, Bytes) {
        let overlap = MIN_OVERLAP.max(longest_form).min(window / 2);
        let mut w = Windows {
            held: first,
            checked: 0,
            window,
            overlap,
        };
        let now = w.passed();
        (w, now)
    }

    /// Takes the bytes that came; true when a window is full (then check [`Self::window`]).
    pub(super) fn take(&mut self, data: &[u8]) -> bool {
        self.held.extend_from_slice(data);
        self.held.len() >= self.window
    }

    /// The window to check: every byte not sent yet.
    pub(super) fn window(&self) -> &[u8] {
        &self.held
    }

    /// The window passed: what may be sent now (all but its last `overlap` bytes, kept as
    /// the start of the next window).
    pub(super) fn passed(&mut self) -> Bytes {
        let keep = self.held.len().min(self.overlap);
        let tail = self.held.split_off(self.held.len() - keep);
        self.checked = keep;
        Bytes::from(std::mem::replace(&mut self.held, tail))
    }

    /// At the body's end: whether bytes came since the last window that passed (then check
    /// [`Self::window`] once more before [`Self::rest`]).
    pub(super) fn unchecked(&self) -> bool {
        self.held.len() > self.checked
    }

    /// At the body's end, the last window passed: what is left to send.
    pub(super) fn rest(&mut self) -> Bytes {
        self.checked = 0;
        Bytes::from(std::mem::take(&mut self.held))
    }
}

/// What the server's side of a large body is given: a part, or its end.
pub(super) enum Part {
    Data(Bytes),
    End,
}

/// The body the server gets: the parts its sender passes on, as it passes them. A sender
/// dropped before [`Part::End`] (a refused window, a request given up) breaks the body off
/// with an error, so the server's connection is reset and never ends the body cleanly.
pub(super) struct Channel {
    rx: mpsc::Receiver<Part>,
    ended: bool,
}

impl Channel {
    /// The body and its sender.
    pub(super) fn new() -> (mpsc::Sender<Part>, Channel) {
        let (tx, rx) = mpsc::channel(2);
        (tx, Channel { rx, ended: false })
    }
}

impl Body for Channel {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        Poll::Ready(match std::task::ready!(self.rx.poll_recv(cx)) {
            Some(Part::Data(b)) => Some(Ok(Frame::data(b))),
            Some(Part::End) => {
                self.ended = true;
                None
            }
            None => Some(Err(std::io::Error::other(
                "gatewayd broke off the request body",
            ))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every run of `len` bytes of a body fed in `frame`-byte pieces lies whole in one of the
    /// windows checked, and no byte is sent before a window holding it and what follows it
    /// passed; all the bytes are sent, once, in order.
    #[test]
    fn every_occurrence_lies_whole_in_a_window_checked_before_it_leaves() {
        let (window, form, frame) = (1000, 150, 64);
        let body: Vec<u8> = (0..5_555u32).map(|i| (i % 251) as u8).collect();
        let first_len = window + 10;
        let (mut w, now) = Windows::after_first(body[..first_len].to_vec(), window, form);
        assert_eq!(w.overlap, 500, "at most half a window");
        let mut windows = vec![(0, first_len)];
        let mut sent = now.to_vec();
        let mut at = first_len;
        for piece in body[first_len..].chunks(frame) {
            at += piece.len();
            if w.take(piece) {
                windows.push((at - w.window().len(), at));
                assert_eq!(w.window(), &body[at - w.window().len()..at]);
                sent.extend_from_slice(&w.passed());
            }
        }
        if w.unchecked() {
            windows.push((at - w.window().len(), at));
        }
        sent.extend_from_slice(&w.rest());
        assert_eq!(sent, body, "everything, once, in order");
        for start in 0..=body.len() - form {
            assert!(
                windows
                    .iter()
                    .any(|&(a, b)| a <= start && start + form <= b),
                "the run at {start} is in no window: {windows:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_channel_dropped_before_its_end_breaks_the_body_off() {
        let (tx, mut body) = Channel::new();
        tx.send(Part::Data(Bytes::from_static(b"ab")))
            .await
            .unwrap();
        drop(tx);
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        assert!(body.frame().await.unwrap().is_err(), "an error, not an end");
        let (tx, mut body) = Channel::new();
        tx.send(Part::End).await.unwrap();
        assert!(body.frame().await.is_none(), "a clean end");
    }

    #[test]
    fn a_body_ending_on_a_window_has_nothing_left_to_check() {
        let (mut w, now) = Windows::after_first(vec![1; 200], 100, 10);
        assert_eq!(now.len(), 150, "all but the overlap (half a window)");
        assert!(!w.unchecked());
        assert!(!w.take(&[2; 20]));
        assert!(w.unchecked(), "20 bytes came");
        assert_eq!(w.rest().len(), 70);
    }
}

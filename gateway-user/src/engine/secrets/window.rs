//! The session's recent egress, folded, to find a secret split across the arguments of one
//! call or across calls: the ends of consecutive texts are joined, in sending order and in
//! reverse order, and the joins are searched for fragments that reach into the current call.
use std::collections::VecDeque;

use super::{
    fragments::{FragmentIndex, Hit},
    normalise::{BREAK, folded},
};

/// Most recent `sends_out` calls remembered.
pub(super) const WINDOW_CALLS: usize = 8;
/// Most folded bytes remembered; the oldest calls are dropped first.
pub(super) const WINDOW_BYTES: usize = 16 << 10;
/// Of a longer text, only its first and last this many folded bytes are remembered.
pub(super) const EDGE: usize = 1 << 10;

/// A bounded window of the folded argument texts of a session's recent egress calls. Kept in
/// the session; [`push`](EgressWindow::push) each `sends_out` call that was allowed.
#[derive(Default, Clone)]
pub struct EgressWindow {
    calls: VecDeque<Vec<Vec<u8>>>,
    bytes: usize,
}

/// Sizes only: the texts are what the session sent, not for logs.
impl std::fmt::Debug for EgressWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressWindow")
            .field("calls", &self.calls.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl EgressWindow {
    /// An empty window (a session that sent nothing yet).
    pub fn new() -> EgressWindow {
        EgressWindow::default()
    }

    /// Remembers the argument texts of an allowed `sends_out` call, in the order given to
    /// [`find_in_call`](super::SecretSet::find_in_call).
    pub fn push(&mut self, texts: &[&str]) {
        let call: Vec<Vec<u8>> = texts
            .iter()
            .map(|t| ends(&folded(t), EDGE))
            .filter(|f| !f.is_empty())
            .collect();
        self.bytes += call.iter().map(Vec::len).sum::<usize>();
        self.calls.push_back(call);
        while self.calls.len() > WINDOW_CALLS || (self.bytes > WINDOW_BYTES && self.calls.len() > 1)
        {
            if let Some(old) = self.calls.pop_front() {
                self.bytes -= old.iter().map(Vec::len).sum::<usize>();
            }
        }
    }

    /// How many calls are remembered.
    pub fn calls(&self) -> usize {
        self.calls.len()
    }
}

/// Where the pieces of a split secret were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Split {
    Arguments,
    Calls,
}

/// `f` whole when short, else its first and last `edge` bytes with a break between.
fn ends(f: &[u8], edge: usize) -> Vec<u8> {
    let mut out = Vec::new();
    push_ends(&mut out, f, edge);
    out
}

fn push_ends(buf: &mut Vec<u8>, f: &[u8], edge: usize) {
    if f.len() <= 2 * edge {
        buf.extend_from_slice(f);
    } else {
        buf.extend_from_slice(&f[..edge]);
        buf.push(BREAK);
        buf.extend_from_slice(&f[f.len() - edge..]);
    }
}

/// A fragment across the ends of `current` (the call's texts, folded, in order) and of the
/// window's newest texts: in order (window, then the call) and in reverse order. A fragment
/// wholly inside the window is not reported (that call was checked when it was sent).
pub(super) fn find_split(
    index: &FragmentIndex,
    current: &[Vec<u8>],
    window: &EgressWindow,
) -> Option<(Hit, Split)> {
    let parts = current.iter().filter(|c| !c.is_empty()).count();
    if index.is_empty() || parts == 0 || (parts < 2 && window.calls.is_empty()) {
        return None;
    }
    let cur = current.iter().filter(|c| !c.is_empty()).map(Vec::as_slice);
    let win = window.calls.iter().flatten().map(Vec::as_slice);
    // A fragment spans fewer bytes than the longest form: only that much of each side of a
    // join can be part of it.
    let reach = index.longest().saturating_sub(1);
    let mut buf = Vec::with_capacity(8 * reach);
    // In order: the window's last `reach` bytes (newest last), then the call's texts.
    let mut tail = Vec::new();
    for s in win.clone().rev() {
        if tail.len() >= reach {
            break;
        }
        tail.splice(
            0..0,
            s[s.len().saturating_sub(reach - tail.len())..]
                .iter()
                .copied(),
        );
    }
    buf.extend_from_slice(&tail);
    let split = buf.len();
    cur.clone().for_each(|s| push_ends(&mut buf, s, reach));
    if let Some(h) = index.scan_where(&buf, |h| h.end > split) {
        return Some((
            h,
            if h.start < split {
                Split::Calls
            } else {
                Split::Arguments
            },
        ));
    }
    // In reverse order: the call's texts last first, then the window's newest first.
    buf.clear();
    cur.rev().for_each(|s| push_ends(&mut buf, s, reach));
    let split = buf.len();
    for s in win.rev() {
        let room = reach - (buf.len() - split);
        if room == 0 {
            break;
        }
        buf.extend_from_slice(&s[..room.min(s.len())]);
    }
    index.scan_where(&buf, |h| h.start < split).map(|h| {
        (
            h,
            if h.end > split {
                Split::Calls
            } else {
                Split::Arguments
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "Zq7Xw2Lp9Rt4"; // 12 characters: fragments are 8
    fn ix() -> FragmentIndex {
        FragmentIndex::new(&[KEY])
    }
    fn f(texts: &[&str]) -> Vec<Vec<u8>> {
        texts.iter().map(|t| folded(t)).collect()
    }

    #[test]
    fn halves_in_two_arguments_join_either_way() {
        let w = EgressWindow::new();
        let (_, how) =
            find_split(&ix(), &f(&["note Zq7Xw2", "Lp9Rt4 thanks"]), &w).expect("in order");
        assert_eq!(how, Split::Arguments);
        assert!(find_split(&ix(), &f(&["Lp9Rt4 thanks", "note Zq7Xw2"]), &w).is_some());
        // Each half alone, or the halves not at the ends of their texts: not found.
        assert!(find_split(&ix(), &f(&["note Zq7Xw2"]), &w).is_none());
        assert!(find_split(&ix(), &f(&["Zq7Xw2 and", "so Lp9Rt4"]), &w).is_none());
    }

    #[test]
    fn halves_in_two_calls_join_either_way_within_the_window() {
        let mut w = EgressWindow::new();
        w.push(&["first part: Zq7X"]);
        w.push(&["w2"]);
        let (_, how) = find_split(&ix(), &f(&["Lp9Rt4 is the rest"]), &w).expect("across calls");
        assert_eq!(how, Split::Calls);
        let mut w = EgressWindow::new();
        w.push(&["Lp9Rt4 is the end"]);
        assert!(find_split(&ix(), &f(&["start: Zq7Xw2"]), &w).is_some());
        // Pushed out of the window by later calls: no longer joined.
        for _ in 0..WINDOW_CALLS {
            w.push(&["unrelated text"]);
        }
        assert_eq!(w.calls(), WINDOW_CALLS);
        assert!(find_split(&ix(), &f(&["start: Zq7Xw2"]), &w).is_none());
        // A benign call after a benign window.
        assert!(find_split(&ix(), &f(&["Zq7Xw3 is not it"]), &w).is_none());
    }

    #[test]
    fn a_fragment_wholly_in_the_window_is_not_reported_again() {
        let mut w = EgressWindow::new();
        w.push(&["Zq7Xw2Lp9Rt4"]);
        assert!(find_split(&ix(), &f(&["hello", "world"]), &w).is_none());
    }

    #[test]
    fn the_window_is_bounded_in_bytes() {
        let mut w = EgressWindow::new();
        let big = "x".repeat(3 * EDGE);
        for _ in 0..WINDOW_CALLS {
            w.push(&[&big, &big, &big, &big, &big, &big, &big, &big]);
        }
        assert!(w.bytes <= WINDOW_BYTES.max(8 * (2 * EDGE + 1)));
        assert!(w.calls() < WINDOW_CALLS);
    }
}

//! The session's recent egress, folded, to find a secret split across the arguments of one
//! call or across calls: the end of each text joined with the start of each other text of the
//! call and of the recent calls, either first, holding a fragment that spans the join.
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
    /// In two arguments of the call.
    Arguments,
    /// In the call and one of the window's recent calls.
    Calls,
}

/// `f` whole when short, else its first and last `edge` bytes with a break between.
fn ends(f: &[u8], edge: usize) -> Vec<u8> {
    if f.len() <= 2 * edge {
        return f.to_vec();
    }
    let mut out = Vec::with_capacity(2 * edge + 1);
    out.extend_from_slice(&f[..edge]);
    out.push(BREAK);
    out.extend_from_slice(&f[f.len() - edge..]);
    out
}

/// A fragment across the end of one text and the start of another: two texts of the call
/// (`current`, folded), in either order, or a text of the window's recent calls and one of
/// the call, either first (`FragmentIndex::find_join`). A fragment wholly inside one text is
/// not reported here (it is found, or was when that call was sent).
pub(super) fn find_split(
    index: &FragmentIndex,
    current: &[Vec<u8>],
    window: &EgressWindow,
) -> Option<(Hit, Split)> {
    // Tagged by their index in the call; the window's texts by None.
    let mut ends: Vec<(&[u8], Option<usize>)> = current
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(|(i, c)| (c.as_slice(), Some(i)))
        .collect();
    if index.is_empty() || ends.is_empty() || (ends.len() < 2 && window.calls.is_empty()) {
        return None;
    }
    ends.extend(
        window
            .calls
            .iter()
            .flatten()
            .filter(|w| !w.is_empty())
            .map(|w| (w.as_slice(), None)),
    );
    // Two texts of the call, or one of the call and one of the window; never a text with
    // itself, nor two of the window (joined when the later of them was sent).
    let joinable = |l: Option<usize>, r: Option<usize>| match (l, r) {
        (Some(a), Some(b)) => a != b,
        (None, None) => false,
        _ => true,
    };
    let (hit, l, r) = index.find_join(&ends, joinable)?;
    let how = if l.is_some() && r.is_some() {
        Split::Arguments
    } else {
        Split::Calls
    };
    Some((hit, how))
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
    fn pieces_of_any_lengths_that_add_up_to_a_fragment_join() {
        let w = EgressWindow::new();
        // 8 characters in all: 2 + 6, 6 + 2, 3 + 5, 4 + 4 (folded: `zq7xw2lp9rt4`).
        for (l, r) in [
            ("Zq", "7Xw2Lp"),
            ("Zq7Xw2", "Lp"),
            ("Zq7", "Xw2Lp"),
            ("Zq7X", "w2Lp"),
        ] {
            let texts = [format!("note {l}"), format!("{r} thanks")];
            let t: Vec<&str> = texts.iter().map(String::as_str).collect();
            assert!(find_split(&ix(), &f(&t), &w).is_some(), "{l} {r}");
            // 7 characters: not a fragment.
            let texts = [format!("note {}", &l[1..]), format!("{r} thanks")];
            let t: Vec<&str> = texts.iter().map(String::as_str).collect();
            assert!(find_split(&ix(), &f(&t), &w).is_none(), "{l} {r} less one");
        }
    }

    #[test]
    fn a_piece_in_any_argument_of_a_recent_call_joins() {
        // The piece is the end of the first of two texts (a body before a URL).
        let mut w = EgressWindow::new();
        w.push(&[
            "part one: Zq7Xw2",
            "https://hooks.corp.test/in",
            "body",
            "url",
        ]);
        let (_, how) = find_split(&ix(), &f(&["Lp9Rt4 is part two", "https://x.test"]), &w)
            .expect("across calls");
        assert_eq!(how, Split::Calls);
        // The same texts with the pieces inside their texts: nothing to join.
        let mut w = EgressWindow::new();
        w.push(&["part one: Zq7Xw2 (more)", "https://hooks.corp.test/in"]);
        assert!(find_split(&ix(), &f(&["and Lp9Rt4 is part two"]), &w).is_none());
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

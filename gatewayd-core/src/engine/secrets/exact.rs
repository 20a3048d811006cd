//! The exact forms of a set's secrets (plain, base64, hex, percent-encoded, …), found with
//! Aho-Corasick automata: one for the forms compared as written, one for those compared with
//! ASCII case folded (hex and percent-encoding). Each finds the leftmost match, the longest
//! at that position. A regular expression of the same alternation found the same matches,
//! but compiling it was most of the time a session took to start with a developer's keys
//! among its secrets (a `gatewayd hook --policy` call opens one per event).
use std::{borrow::Cow, ops::Range};

use aho_corasick::{AhoCorasick, AhoCorasickKind, BuildError, Input, MatchKind};

/// The automata over a set's forms.
#[derive(Debug, Clone)]
pub(crate) struct ExactForms {
    as_written: Option<AhoCorasick>,
    folded: Option<AhoCorasick>,
}

/// The most bytes of forms the automaton may be a DFA for.
const DFA_FORMS_MAX: usize = 4 << 10;

/// An automaton over `forms`, or None when there are none.
fn automaton(forms: &[String], fold_case: bool) -> Result<Option<AhoCorasick>, BuildError> {
    if forms.is_empty() {
        return Ok(None);
    }
    // Forms of a few KiB in all: the crate's choice (a DFA, the fastest search). Beyond, a
    // contiguous NFA: a DFA over forms thousands of bytes long (a private key's hex) takes
    // longer to build than a session's searches take to run.
    let total: usize = forms.iter().map(String::len).sum();
    let kind = (total > DFA_FORMS_MAX).then_some(AhoCorasickKind::ContiguousNFA);
    AhoCorasick::builder()
        .kind(kind)
        .match_kind(MatchKind::LeftmostLongest)
        .ascii_case_insensitive(fold_case)
        .build(forms)
        .map(Some)
}

impl ExactForms {
    /// The automata over `as_written` and `folded` (ASCII forms compared case-insensitively).
    pub(crate) fn new(as_written: &[String], folded: &[String]) -> Result<ExactForms, BuildError> {
        Ok(ExactForms {
            as_written: automaton(as_written, false)?,
            folded: automaton(folded, true)?,
        })
    }

    /// The leftmost form in `s` at or after byte `from` (the longest at that position).
    fn find_at(&self, s: &str, from: usize) -> Option<Range<usize>> {
        let search = |ac: &AhoCorasick| {
            ac.find(Input::new(s).span(from..s.len()))
                .map(|m| m.range())
        };
        let a = self.as_written.as_ref().and_then(search);
        let b = self.folded.as_ref().and_then(search);
        match (a, b) {
            (Some(a), Some(b)) => Some(
                if (a.start, std::cmp::Reverse(a.end)) <= (b.start, std::cmp::Reverse(b.end)) {
                    a
                } else {
                    b
                },
            ),
            (a, b) => a.or(b),
        }
    }

    /// The leftmost form in `s`, as it is written there.
    pub(crate) fn find<'s>(&self, s: &'s str) -> Option<&'s str> {
        // Patterns and haystack are UTF-8, so a match starts and ends on character
        // boundaries (the ASCII-folded forms match ASCII bytes only).
        self.find_at(s, 0).and_then(|r| s.get(r))
    }

    /// `s` with each form found (left to right, without overlap) replaced by `with(form)`.
    pub(crate) fn replace_all<'a>(
        &self,
        s: &'a str,
        with: impl Fn(&str) -> String,
    ) -> Cow<'a, str> {
        let mut out = String::new();
        let mut done = 0;
        while let Some(r) = self.find_at(s, done) {
            let (Some(before), Some(form)) = (s.get(done..r.start), s.get(r.clone())) else {
                break;
            };
            out.push_str(before);
            out.push_str(&with(form));
            done = r.end.max(r.start + 1);
        }
        if done == 0 {
            return Cow::Borrowed(s);
        }
        out.push_str(s.get(done..).unwrap_or(""));
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::ExactForms;

    fn forms(written: &[&str], folded: &[&str]) -> ExactForms {
        let own = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        ExactForms::new(&own(written), &own(folded)).unwrap()
    }

    #[test]
    fn the_leftmost_and_then_the_longest_form_is_found() {
        let f = forms(&["secret", "secret-long"], &["deadbeef"]);
        assert_eq!(f.find("x secret-long y"), Some("secret-long"));
        assert_eq!(f.find("x DEADbeef secret"), Some("DEADbeef"));
        assert_eq!(f.find("x SECRET y"), None, "as written: case matters");
        assert_eq!(f.find("nothing"), None);
    }

    #[test]
    fn every_form_is_replaced_once_left_to_right() {
        let f = forms(&["abc"], &["ff00"]);
        assert_eq!(
            f.replace_all("abc FF00 é abc.", |m| format!("[{}]", m.len())),
            "[3] [4] é [3]."
        );
        assert!(matches!(
            f.replace_all("clean", |_| String::new()),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}

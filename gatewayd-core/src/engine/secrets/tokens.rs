//! Where encoded data may sit in text: runs of base64/base32 characters and of hex digits,
//! found in one pass each without copying unless a run spans separators.
use std::borrow::Cow;

use super::normalise::{ASCII_WIDTH, ascii_table};

/// Shortest base64/base32 run kept (11 base64 characters hold 8 bytes); shorter text has no
/// tokens.
pub(super) const MIN_RUN: usize = 11;
/// Fewest hex digits in a hex run (8 bytes).
const MIN_HEX: usize = 16;
/// A run goes on over whitespace after a line at least this long (wrapped output); shorter
/// pieces are words.
const WRAP: usize = 16;
/// Letters alone (no digit, no mixed case) are decoded only from this long: as base32 (a
/// word has no digit; base32 of 8 bytes has none 1 time in 15, of 15 bytes 1 in 120).
pub(super) const LETTERS_BASE32: usize = 24;

const BASE64: u8 = 1;
const HEX: u8 = 2;
const HEX_SEPARATOR: u8 = 4;
const DIGIT: u8 = 8;
const UPPER: u8 = 16;
const LOWER: u8 = 32;
const SYMBOL: u8 = 64;
/// A base64 character that is neither a hex digit nor `-`.
const NOT_HEX: u8 = 128;

/// The classes of each byte, looked up once per byte of text.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let base64 = c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_');
        if base64 {
            t[b] |= BASE64;
            if !c.is_ascii_hexdigit() && c != b'-' {
                t[b] |= NOT_HEX;
            }
        }
        if c.is_ascii_hexdigit() {
            t[b] |= HEX;
        }
        if matches!(c, b':' | b'-' | b'.' | b',') || c.is_ascii_whitespace() {
            t[b] |= HEX_SEPARATOR;
        }
        if c.is_ascii_digit() {
            t[b] |= DIGIT;
        }
        if c.is_ascii_uppercase() {
            t[b] |= UPPER;
        }
        if c.is_ascii_lowercase() {
            t[b] |= LOWER;
        }
        if matches!(c, b'+' | b'/') {
            t[b] |= SYMBOL;
        }
        b += 1;
    }
    t
};

fn is(b: u8, class: u8) -> bool {
    CLASS[usize::from(b)] & class != 0
}

pub(super) fn rot13_byte(b: u8) -> u8 {
    match b {
        b'a'..=b'z' => (b - b'a' + 13) % 26 + b'a',
        b'A'..=b'Z' => (b - b'A' + 13) % 26 + b'A',
        _ => b,
    }
}

/// Upper case (past the first character) and lower case letters both: what base64 of 8 or
/// more bytes almost always has (all but about 1 in 100 for 11 characters, 1 in 10,000 for
/// 20), and a word in one case, or capitalised, has not.
pub(super) fn is_mixed_case(run: &[u8]) -> bool {
    let upper = run.iter().skip(1).any(u8::is_ascii_uppercase);
    upper && run.iter().any(u8::is_ascii_lowercase)
}

/// Base32 characters, in one case.
pub(super) fn is_base32(run: &[u8]) -> bool {
    let symbols = run
        .iter()
        .all(|b| b.is_ascii_alphabetic() || (b'2'..=b'7').contains(b));
    let mixed = run.iter().any(u8::is_ascii_lowercase) && run.iter().any(u8::is_ascii_uppercase);
    symbols && !mixed
}

pub(super) fn is_hex(run: &[u8]) -> bool {
    run.iter().all(u8::is_ascii_hexdigit)
}

/// Where encoded data may sit in a text.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Tokens<'a> {
    /// Hex digits (separators removed), at least 16.
    pub(super) hex: Vec<Cow<'a, [u8]>>,
    /// Base64/base32 runs, at least 11 characters, wrapped lines and spaced groups joined.
    pub(super) runs: Vec<Cow<'a, [u8]>>,
}

/// Finds, in one pass over segments of base64 characters (both alphabets; `=` ends one):
/// - base64/base32 runs, which go on over whitespace after a line of at least [`WRAP`]
///   characters;
/// - spaced runs: groups that look encoded (a digit, `+` or `/`, or mixed case) with one or
///   two whitespace characters between them (`c2st bGl2 ZS05`), joined;
/// - hex runs: segments of hex digits (`-` allowed between even groups) joined over one or
///   two separators (`:.,-` or whitespace) after an even group.
pub(super) fn tokens(data: &[u8]) -> Tokens<'_> {
    segments::<false>(data, &mut Vec::new())
}

/// [`tokens`] of ASCII text, folding it into `folded` in the same pass (its ASCII letters and
/// digits are all in segments; everything else folds to nothing): one pass instead of two
/// over the text, the most costly part of a check.
pub(super) fn tokens_folding<'a>(data: &'a [u8], folded: &mut Vec<u8>) -> Tokens<'a> {
    debug_assert!(data.is_ascii());
    segments::<true>(data, folded)
}

fn segments<'a, const FOLD: bool>(data: &'a [u8], folded: &mut Vec<u8>) -> Tokens<'a> {
    let table = ascii_table();
    let base = folded.len();
    if FOLD {
        folded.resize(base + data.len() * ASCII_WIDTH, 0);
    }
    let buf = &mut folded[base..];
    let mut j = 0;
    // Writes the folded bytes of `b` at `j` (the buffer has room for the widest), moves `j`.
    let mut fold = |b: u8| {
        if FOLD {
            let (bytes, n) = &table[usize::from(b & 0x7f)];
            if let Some(dst) = buf.get_mut(j..j + ASCII_WIDTH) {
                dst.copy_from_slice(bytes);
            }
            j += usize::from(*n);
        }
    };
    let mut seg = Segmenter {
        data,
        ..Segmenter::default()
    };
    let n = data.len();
    let mut i = 0;
    loop {
        while i < n && !is(data[i], BASE64) {
            i += 1;
        }
        if i >= n {
            break;
        }
        let start = i;
        let first = CLASS[usize::from(data[i])];
        fold(data[i]);
        let mut rest = 0;
        i += 1;
        while i < n && is(data[i], BASE64) {
            rest |= CLASS[usize::from(data[i])];
            fold(data[i]);
            i += 1;
        }
        // Most words end here, with nothing being joined that they could join.
        if !(seg.idle() && plain_word(first, rest, i - start)) {
            seg.take(start, i, first, rest);
        }
    }
    if FOLD {
        folded.truncate(base + j);
    }
    seg.finish()
}

/// Short, letters only (lower case, or capitalised), not all hex digits: a word.
fn plain_word(first: u8, rest: u8, len: usize) -> bool {
    let all = first | rest;
    all & (DIGIT | SYMBOL) == 0 && rest & UPPER == 0 && all & NOT_HEX != 0 && len < MIN_RUN
}

/// The runs being joined while segments are read.
#[derive(Default)]
struct Segmenter<'a> {
    data: &'a [u8],
    t: Tokens<'a>,
    run: Joined,
    spaced: Joined,
    hex: Joined,
    run_wraps: bool,
    hex_even: bool,
}

impl<'a> Segmenter<'a> {
    /// Nothing is being joined.
    fn idle(&self) -> bool {
        self.run.parts + self.spaced.parts + self.hex.parts == 0
    }

    /// The segment `start..end`; `first` and `rest`: the classes of its first byte and of
    /// the others.
    fn take(&mut self, start: usize, end: usize, first: u8, rest: u8) {
        let data = self.data;
        let all = first | rest;
        let encoded = all & (DIGIT | SYMBOL) != 0 || (rest & UPPER != 0 && all & LOWER != 0);
        let len = end - start;
        // Base64/base32: a segment joins a run after a wrapped line (long, encoded-looking);
        // a run starts with a segment that looks encoded, or is long enough to be base32
        // of letters alone.
        let ws = |g: &[u8]| g.iter().all(u8::is_ascii_whitespace);
        if self.run_wraps && self.run.joins(data, start, ws) {
            self.run.add(start, end);
        } else {
            self.run
                .flush(data, &mut self.t.runs, 1, u8::is_ascii_whitespace);
            if len >= MIN_RUN && (encoded || len >= LETTERS_BASE32) {
                self.run.add(start, end);
            }
        }
        self.run_wraps = self.run.parts > 0 && encoded && len >= WRAP;
        // Spaced groups.
        let short_space = |g: &[u8]| g.len() <= 2 && ws(g);
        if encoded && self.spaced.joins(data, start, short_space) {
            self.spaced.add(start, end);
        } else {
            self.spaced
                .flush(data, &mut self.t.runs, 2, u8::is_ascii_whitespace);
            if encoded {
                self.spaced.add(start, end);
            }
        }
        // Hex: a segment of hex digits joins after an even group and one or two separators.
        let even = if all & NOT_HEX == 0 {
            hex_segment(&data[start..end])
        } else {
            None
        };
        let short_separator = |g: &[u8]| g.len() <= 2 && g.iter().all(|&b| is(b, HEX_SEPARATOR));
        if even.is_some() && self.hex_even && self.hex.joins(data, start, short_separator) {
            self.hex.add(start, end);
        } else {
            self.hex
                .flush(data, &mut self.t.hex, 1, |b| !b.is_ascii_hexdigit());
            if even.is_some() {
                self.hex.add(start, end);
            }
        }
        self.hex_even = even == Some(true);
    }

    fn finish(mut self) -> Tokens<'a> {
        let data = self.data;
        let t = &mut self.t;
        self.run
            .flush(data, &mut t.runs, 1, u8::is_ascii_whitespace);
        self.spaced
            .flush(data, &mut t.runs, 2, u8::is_ascii_whitespace);
        self.hex
            .flush(data, &mut t.hex, 1, |b| !b.is_ascii_hexdigit());
        t.hex.retain(|h| h.len() >= MIN_HEX);
        t.runs.retain(|r| r.len() >= MIN_RUN);
        self.t
    }
}

/// A segment of hex digits, `-` allowed after an even group: whether its last group is even.
fn hex_segment(seg: &[u8]) -> Option<bool> {
    let mut group = 0;
    for &b in seg {
        if is(b, HEX) {
            group += 1;
        } else if b == b'-' && group > 0 && group % 2 == 0 {
            group = 0;
        } else {
            return None;
        }
    }
    (group > 0).then_some(group % 2 == 0)
}

/// Segments joined into one token: `start..end` of the text.
#[derive(Debug, Default)]
struct Joined {
    start: usize,
    end: usize,
    /// The last segment's length, and how many segments.
    last: usize,
    parts: usize,
}

impl Joined {
    /// Whether a segment at `start` joins: there is one before it and `gap` takes the bytes
    /// between them.
    fn joins(&self, data: &[u8], start: usize, gap: impl Fn(&[u8]) -> bool) -> bool {
        self.parts > 0 && gap(&data[self.end..start])
    }

    fn add(&mut self, start: usize, end: usize) {
        if self.parts == 0 {
            self.start = start;
        }
        self.end = end;
        self.last = end - start;
        self.parts += 1;
    }

    /// Emits the token (of at least `parts` segments, `drop` bytes removed) and starts anew.
    fn flush<'a>(
        &mut self,
        data: &'a [u8],
        out: &mut Vec<Cow<'a, [u8]>>,
        parts: usize,
        drop: impl Fn(&u8) -> bool,
    ) {
        if self.parts >= parts && self.end - self.start >= MIN_RUN {
            let span = &data[self.start..self.end];
            out.push(if self.parts == 1 && !span.iter().any(&drop) {
                Cow::Borrowed(span)
            } else {
                Cow::Owned(span.iter().copied().filter(|b| !drop(b)).collect())
            });
        }
        *self = Joined::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::secrets::normalise::fold;

    #[test]
    fn runs_split_words_and_join_wrapped_lines() {
        let r = tokens(b"hi aGVsbG8gd29ybGQh=, and c2VjcmV0IHNlY3JldCBzZWNy\r\nZXQ= end").runs;
        assert_eq!(
            r,
            [&b"aGVsbG8gd29ybGQh"[..], b"c2VjcmV0IHNlY3JldCBzZWNyZXQ"]
        );
        assert!(tokens(b"short words only here").runs.is_empty());
    }

    #[test]
    fn folding_as_it_reads_is_folding() {
        for t in [
            "Hi team, see https://x.test/a-b?c=1 and c2st+bGl2/ZS05 (Mon-Tue).",
            "",
            "m0",
        ] {
            let mut f = vec![b'x'];
            let fused = tokens_folding(t.as_bytes(), &mut f);
            assert_eq!(fused, tokens(t.as_bytes()));
            let mut want = vec![b'x'];
            fold(t, &mut want);
            assert_eq!(f, want, "{t}");
        }
    }

    #[test]
    fn spaced_groups_join_but_words_do_not() {
        let r = tokens(b"key: c2st bGl2 ZS05 ZjhL, done").runs;
        assert_eq!(r, [&b"c2stbGl2ZS05ZjhL"[..]]);
        assert!(
            tokens(b"We ship on Friday at 12 30 with Bob")
                .runs
                .is_empty()
        );
    }

    fn hex_runs(t: &[u8]) -> Vec<Cow<'_, [u8]>> {
        tokens(t).hex
    }

    #[test]
    fn hex_runs_take_separators_between_pairs() {
        assert_eq!(
            hex_runs(b"x 73:6b:2d:6c:69:76:65:2d y"),
            [&b"736b2d6c6976652d"[..]]
        );
        assert_eq!(
            hex_runs(b"73 6B 2D 6C, 69 76 65 2D"),
            [&b"736B2D6C6976652D"[..]]
        );
        assert_eq!(
            hex_runs(b"73-6b-2d-6c-69-76-65-2d"),
            [&b"736b2d6c6976652d"[..]]
        );
        assert_eq!(
            hex_runs(b"73:6b:2d:6c:69:76:65:2d:7"),
            [&b"736b2d6c6976652d7"[..]]
        );
        assert!(
            hex_runs(b"7:36b2d6c6976652d").is_empty(),
            "no separator after an odd group"
        );
        assert_eq!(
            hex_runs(b"3f2a9c1e8b7d6f5a4c3b"),
            [&b"3f2a9c1e8b7d6f5a4c3b"[..]]
        );
        assert!(hex_runs(b"a bad face, 2024-05-06 at 12:30").is_empty());
    }

    #[test]
    fn words_are_not_base64_but_encodings_are() {
        assert!(!is_mixed_case(b"Responsibilities") && !is_mixed_case(b"IMPORTANT"));
        assert!(!is_mixed_case(b"3f2a9c1e8b7d6f5a4c3b"));
        assert!(is_mixed_case(b"c2stbGl2ZS05ZjhlN2Q2YzViNGE"));
        assert!(is_base32(b"onswg4tfoq") && is_base32(b"ONSWG4TFOQ") && !is_base32(b"OnSwg4"));
    }
}

//! The normal form secrets are matched in: what disguises that keep the characters' meaning
//! (case, separators, look-alike, compatibility or invisible characters) cannot change.
//!
//! `fold` is one fixed, per-character mapping applied alike to the secrets and to the text:
//! Unicode NFKC, then for each character: lower case, its UTS 39 confusable skeleton
//! (`unicode-security`), lower case again, and only letters and digits kept. Everything else
//! (separators, punctuation, format and zero-width characters, combining marks) is dropped,
//! so `S-E-C`, `s e c`, `sеc` (Cyrillic е) and `s\u{200B}ec` all fold to `sec`.
use std::{borrow::Cow, sync::LazyLock};

use regex::Regex;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// Marks a cut in a folded buffer (between pieces that must not be joined): folding keeps
/// letters and digits only, so it never produces this byte.
pub(super) const BREAK: u8 = b' ';

/// Format (Cf) and default-ignorable characters: zero-width spaces and joiners, bidi
/// controls, soft hyphens, variation selectors, tags.
static INVISIBLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[\p{Cf}\p{Default_Ignorable_Code_Point}]")
        .expect("a constant pattern of two Unicode properties")
});

/// Most bytes an ASCII character folds to (`m` → `rn`; see `ascii_table_is_short`).
pub(super) const ASCII_WIDTH: usize = 2;

/// What each ASCII character folds to, and how many bytes. ASCII punctuation is dropped
/// before its skeleton is taken, so `|` and `%` are separators too (their skeletons are `l`
/// and `º/₀`). Every ASCII character of a text or a secret folds through this table.
static ASCII: LazyLock<[([u8; ASCII_WIDTH], u8); 128]> = LazyLock::new(|| {
    let mut t = [([0u8; ASCII_WIDTH], 0u8); 128];
    let mut buf = Vec::new();
    for (b, slot) in t.iter_mut().enumerate() {
        buf.clear();
        fold_ascii_slow(b as u8, &mut buf);
        let n = buf.len().min(ASCII_WIDTH);
        slot.0[..n].copy_from_slice(&buf[..n]);
        slot.1 = n as u8;
    }
    t
});

/// What each ASCII character folds to, for a loop that folds as it reads (`tokens`).
pub(super) fn ascii_table() -> &'static [([u8; ASCII_WIDTH], u8); 128] {
    &ASCII
}

fn fold_ascii_slow(b: u8, out: &mut Vec<u8>) {
    if b.is_ascii_alphanumeric() {
        fold_char_slow(char::from(b), out);
    }
}

/// The text with NFKC applied and format and default-ignorable characters removed: the form
/// the decoders read. ASCII text is returned as it is.
pub(super) fn clean(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        return Cow::Borrowed(s);
    }
    let n: Cow<'_, str> = if is_nfkc_quick(s.chars()) == IsNormalized::Yes {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.nfkc().collect())
    };
    match INVISIBLE.replace_all(&n, "") {
        Cow::Borrowed(_) => n,
        Cow::Owned(o) => Cow::Owned(o),
    }
}

/// Appends the folded form of `s` to `out` (see the module comment).
pub(super) fn fold(s: &str, out: &mut Vec<u8>) {
    if s.is_ascii() {
        fold_ascii(s.as_bytes(), out);
    } else if is_nfkc_quick(s.chars()) == IsNormalized::Yes {
        out.reserve(s.len());
        s.chars().for_each(|c| fold_char(c, out));
    } else {
        s.nfkc().for_each(|c| fold_char(c, out));
    }
}

/// The folded form of `s` as a new buffer.
pub(super) fn folded(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    fold(s, &mut out);
    out
}

/// Folds decoded bytes: text when they are UTF-8; otherwise the ASCII bytes, with every
/// other byte a [`BREAK`] (so UTF-16 text, whose other bytes are NUL, still folds whole).
pub(super) fn fold_bytes(b: &[u8], out: &mut Vec<u8>) {
    if let Ok(s) = std::str::from_utf8(b) {
        fold(s, out);
    } else {
        out.reserve(b.len());
        for &x in b {
            if x.is_ascii() {
                fold_char(char::from(x), out);
            } else if out.last() != Some(&BREAK) {
                out.push(BREAK);
            }
        }
    }
}

/// Which disguise a text that folds to a secret (but does not hold it as is) used, for the
/// denial message.
pub(super) fn disguise(s: &str) -> &'static str {
    if !s.is_ascii() && INVISIBLE.is_match(s) {
        "invisible characters"
    } else if !s.is_ascii() {
        "look-alike characters"
    } else {
        "case or separators"
    }
}

/// The hot loop: every character's bytes are written, the position moves by their count.
fn fold_ascii(b: &[u8], out: &mut Vec<u8>) {
    let t = &*ASCII;
    let start = out.len();
    out.resize(start + b.len() * ASCII_WIDTH, 0);
    let buf = &mut out[start..];
    let mut j = 0;
    for &x in b {
        let (bytes, n) = &t[usize::from(x & 0x7f)];
        if let Some(dst) = buf.get_mut(j..j + ASCII_WIDTH) {
            dst.copy_from_slice(bytes);
        }
        j += usize::from(*n);
    }
    out.truncate(start + j);
}

fn fold_char(c: char, out: &mut Vec<u8>) {
    if c.is_ascii() {
        let (bytes, n) = &ASCII[usize::from(c as u8)];
        out.extend_from_slice(&bytes[..usize::from(*n)]);
    } else {
        fold_char_slow(c, out);
    }
}

fn fold_char_slow(c: char, out: &mut Vec<u8>) {
    let mut buf = [0u8; 4];
    let mut enc = [0u8; 4];
    for lower in c.to_lowercase() {
        for proto in unicode_security::skeleton(lower.encode_utf8(&mut buf)) {
            for q in proto.to_lowercase() {
                if q.is_alphanumeric() {
                    out.extend_from_slice(q.encode_utf8(&mut enc).as_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> String {
        String::from_utf8(folded(s)).expect("folding keeps UTF-8")
    }

    #[test]
    fn ascii_table_is_short() {
        // The fast path stores at most 4 bytes per ASCII character: check none was cut.
        for b in 0u8..128 {
            let mut slow = Vec::new();
            fold_ascii_slow(b, &mut slow);
            assert!(slow.len() <= ASCII_WIDTH, "{b}: {slow:?}");
            let mut fast = Vec::new();
            fold_ascii(&[b], &mut fast);
            assert_eq!(fast, slow, "{b}");
        }
    }

    #[test]
    fn case_separators_and_punctuation_go() {
        assert_eq!(f("Ab-Cd:Ef.Gh ij_KL"), f("abcdefghijkl"));
        assert_eq!(f("a b c"), f("abc"));
        assert_eq!(f("!?-:|%"), "");
        assert_eq!(f("s|e|c"), "sec");
        // UTS 39 skeletons: 0 → o, 1 → l, m → rn.
        assert_eq!(f("m01"), "rnol");
    }

    #[test]
    fn invisible_characters_go() {
        assert_eq!(
            f("a\u{200B}b\u{200C}c\u{200D}d\u{2060}e\u{FEFF}f\u{00AD}g"),
            f("abcdefg")
        );
        assert_eq!(clean("a\u{200B}b\u{202E}c"), "abc");
        assert_eq!(clean("plain"), "plain");
        assert_eq!(disguise("a\u{200B}b"), "invisible characters");
        assert_eq!(disguise("ab"), "case or separators");
    }

    #[test]
    fn look_alikes_fold_to_the_latin_letters() {
        // Cyrillic а, е, о, р, с, х; full-width letters and digits; Greek Ο.
        assert_eq!(
            f("\u{0430}\u{0435}\u{043E}\u{0440}\u{0441}\u{0445}"),
            f("aeopcx")
        );
        assert_eq!(f("ＡＢＣ１２３"), f("abc123"));
        assert_eq!(f("\u{039F}k"), f("ok"));
        assert_eq!(disguise("\u{0430}b"), "look-alike characters");
        // NFKC: the ligature ﬁ is f + i.
        assert_eq!(f("\u{FB01}x"), f("fix"));
        assert_ne!(f("abc"), f("abd"));
    }

    #[test]
    fn binary_bytes_break_but_utf16_folds_whole() {
        let mut out = Vec::new();
        fold_bytes(&[b'a', 0xff, b'b'], &mut out);
        assert_eq!(out, [b'a', BREAK, b'b']);
        let utf16: Vec<u8> = "secret".encode_utf16().flat_map(u16::to_le_bytes).collect();
        out.clear();
        fold_bytes(&utf16, &mut out);
        assert_eq!(out, folded("secret"));
    }
}

//! Layered decodings of egress text, each decoded output folded and searched for fragments.
//!
//! Layers, up to [`MAX_DEPTH`] deep: URL escapes (`%XX`, repeated); base64 (standard and
//! URL-safe alphabets, padded or not, at the four alignments of a run, wrapped over lines)
//! of runs in mixed case; base32 (one case, padded or not); hex (either case, with `:`,
//! `-`, `.`, `,` or whitespace between pairs); gzip and zlib (by their headers) below any
//! decoding and raw deflate right below aligned base64, inflated to at most 1 MiB each
//! (`inflate`); rot13 and reversal of an encoded-looking run before it is decoded (of the
//! secret itself they are looked for without decoding, see `fragments`).
//! All decoded output of one call is at most [`MAX_DECODED`] bytes. Past either limit the
//! call cannot be checked whole and the decoder says so ([`Outcome::Unchecked`]): fail closed.
//!
//! What keeps ordinary text cheap: a word (letters in one case, or capitalised) is not
//! base64, nor base32 unless 24 letters long; short runs are not decoded at all; and only
//! aligned base64 output is tried as raw deflate (the one decoding that cannot be recognised
//! by a header, and costs a table build).
use std::sync::LazyLock;

use base64::{
    Engine as _, alphabet,
    engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig},
};
use data_encoding::{Encoding, HEXLOWER_PERMISSIVE, Specification};

use super::{
    fragments::{FragmentIndex, Hit},
    inflate::inflate,
    normalise::fold_bytes,
    tokens::{LETTERS_BASE32, Tokens, is_base32, is_hex, is_mixed_case, rot13_byte, tokens},
};

/// Most layers of decoding applied to one piece of text (`base64(gzip(hex))` is 3).
pub(super) const MAX_DEPTH: usize = 3;
/// Most bytes of decoded output, all layers together, for one call.
pub(super) const MAX_DECODED: usize = 8 << 20;
/// Shortest runs decoded: the encodings of 8 bytes (the shortest fragment).
const MIN_BASE64: usize = 11;
const MIN_BASE32: usize = 13;
/// Shortest run also tried rot13'd and reversed before decoding.
const MIN_REWRITE: usize = 16;

const CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const BASE64: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, CONFIG);
const BASE64_URL: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, CONFIG);

/// RFC 4648 base32, either case, any trailing bits (a run cut short still decodes).
static BASE32: LazyLock<Option<Encoding>> = LazyLock::new(|| {
    let mut spec = Specification::new();
    spec.symbols.push_str("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
    spec.translate.from.push_str("abcdefghijklmnopqrstuvwxyz");
    spec.translate.to.push_str("ABCDEFGHIJKLMNOPQRSTUVWXYZ");
    spec.check_trailing_bits = false;
    spec.encoding().ok()
});

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// A fragment of a secret of `indexes[set]`, under these layers (outermost first).
    Found {
        set: usize,
        hit: Hit,
        chain: Vec<&'static str>,
    },
    /// A limit was reached: the text cannot be checked whole.
    Unchecked(&'static str),
}

/// The decodings of one call's texts, sharing one budget.
#[derive(Debug)]
pub(super) struct Decoder<'a> {
    indexes: &'a [&'a FragmentIndex],
    spent: usize,
    chain: Vec<&'static str>,
    /// A buffer per depth for the folded output, reused across visits.
    folds: Vec<Vec<u8>>,
}

impl<'a> Decoder<'a> {
    /// A decoder looking for the secrets of every index.
    pub(super) fn new(indexes: &'a [&'a FragmentIndex]) -> Decoder<'a> {
        Decoder {
            indexes,
            spent: 0,
            chain: Vec::new(),
            folds: Vec::new(),
        }
    }

    /// [`Decoder::new`] with fold buffers to reuse ([`Decoder::into_buffers`] of an earlier
    /// decoder).
    pub(super) fn with_buffers(indexes: &'a [&'a FragmentIndex], folds: Vec<Vec<u8>>) -> Self {
        Decoder {
            folds,
            ..Decoder::new(indexes)
        }
    }

    /// The fold buffers, for the next decoder.
    pub(super) fn into_buffers(self) -> Vec<Vec<u8>> {
        self.folds
    }

    /// Searches the decodings of `text` (the text itself is the caller's to scan).
    #[cfg(test)]
    pub(super) fn search(&mut self, text: &str) -> Option<Outcome> {
        let clean = super::normalise::clean(text);
        self.search_tokens(clean.as_bytes(), tokens(clean.as_bytes()))
    }

    /// Searches the decodings of a cleaned text (`normalise::clean`) whose tokens the
    /// caller found.
    pub(super) fn search_tokens(&mut self, clean: &[u8], tokens: Tokens<'_>) -> Option<Outcome> {
        self.children_of(clean, false, tokens)
    }

    /// Looks in `data`, the output of `layer`, and below it. `raw`: try it as raw deflate.
    fn visit(&mut self, data: &[u8], layer: &'static str, raw: bool) -> Option<Outcome> {
        if self.chain.len() >= MAX_DEPTH || data.is_empty() {
            return None;
        }
        self.spent += data.len();
        if self.spent > MAX_DECODED {
            return Some(Outcome::Unchecked(
                "encoded data beyond the 8 MiB decoding limit",
            ));
        }
        let depth = self.chain.len();
        self.chain.push(layer);
        if self.folds.len() <= depth {
            self.folds.resize_with(depth + 1, Vec::new);
        }
        let mut folded = std::mem::take(&mut self.folds[depth]);
        folded.clear();
        fold_bytes(data, &mut folded);
        let hit = self
            .indexes
            .iter()
            .enumerate()
            .find_map(|(set, ix)| ix.scan(&folded).map(|hit| (set, hit)));
        let found = match hit {
            Some((set, hit)) => Some(Outcome::Found {
                set,
                hit,
                chain: self.chain.clone(),
            }),
            None => self.children(data, raw),
        };
        self.folds[depth] = folded;
        self.chain.pop();
        found
    }

    fn children(&mut self, data: &[u8], raw: bool) -> Option<Outcome> {
        if self.chain.len() >= MAX_DEPTH {
            return None;
        }
        self.children_of(data, raw, tokens(data))
    }

    fn children_of(&mut self, data: &[u8], raw: bool, tokens: Tokens<'_>) -> Option<Outcome> {
        if data.contains(&b'%') && has_escape(data) {
            let decoded = percent_decode_bytes(data);
            if let Some(o) = self.visit(&decoded, "url", false) {
                return Some(o);
            }
        }
        if !self.chain.is_empty() {
            match inflate(data, raw) {
                Err(why) => return Some(Outcome::Unchecked(why)),
                Ok(Some((layer, out))) => {
                    if let Some(o) = self.visit(&out, layer, false) {
                        return Some(o);
                    }
                }
                Ok(None) => {}
            }
        }
        for digits in &tokens.hex {
            let odd = digits.len() % 2;
            for d in [&digits[..digits.len() - odd], &digits[odd..]] {
                if let Ok(bytes) = HEXLOWER_PERMISSIVE.decode(d)
                    && let Some(o) = self.visit(&bytes, "hex", false)
                {
                    return Some(o);
                }
                if odd == 0 {
                    break;
                }
            }
        }
        for run in &tokens.runs {
            if let Some(o) = self.run(run) {
                return Some(o);
            }
        }
        None
    }

    /// One run of base64/base32 characters.
    fn run(&mut self, run: &[u8]) -> Option<Outcome> {
        let rewritten = self
            .chain
            .iter()
            .any(|l| matches!(*l, "rot13" | "reversed"));
        let url = run.iter().any(|b| matches!(b, b'-' | b'_'));
        let standard = run.split(|b| matches!(b, b'-' | b'_'));
        let safe = run.split(|b| matches!(b, b'+' | b'/')).filter(|_| url);
        for (piece, engine, layer) in standard
            .map(|p| (p, &BASE64, "base64"))
            .chain(safe.map(|p| (p, &BASE64_URL, "base64url")))
            .filter(|(p, ..)| p.len() >= MIN_BASE64 && is_mixed_case(p))
        {
            for off in 0..4 {
                let Some(p) = piece.get(off..).filter(|p| p.len() >= MIN_BASE64) else {
                    break;
                };
                let p = &p[..p.len() - usize::from(p.len() % 4 == 1)];
                let raw = off == 0 && !rewritten;
                if let Ok(bytes) = engine.decode(p)
                    && let Some(o) = self.visit(&bytes, layer, raw)
                {
                    return Some(o);
                }
            }
        }
        let digit = run.iter().any(u8::is_ascii_digit);
        if run.len() >= MIN_BASE32
            && (digit || run.len() >= LETTERS_BASE32)
            && is_base32(run)
            && let Some(b32) = BASE32.as_ref()
        {
            let mut n = run.len();
            while !matches!(n % 8, 0 | 2 | 4 | 5 | 7) {
                n -= 1;
            }
            if let Ok(bytes) = b32.decode(&run[..n])
                && let Some(o) = self.visit(&bytes, "base32", false)
            {
                return Some(o);
            }
        }
        // A rewrite is worth it only with room left for a decoding below it, and only of a
        // run that looks encoded: mixed case (base64), or hex (reversed only: rot13 of hex
        // is not hex).
        let room = self.chain.len() + 2 <= MAX_DEPTH;
        if rewritten || !room || run.len() < MIN_REWRITE {
            return None;
        }
        if is_mixed_case(run) {
            let rot: Vec<u8> = run.iter().map(|&b| rot13_byte(b)).collect();
            if let Some(o) = self.visit(&rot, "rot13", false) {
                return Some(o);
            }
        }
        if is_mixed_case(run) || is_hex(run) {
            let rev: Vec<u8> = run.iter().rev().copied().collect();
            return self.visit(&rev, "reversed", false);
        }
        None
    }
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn has_escape(data: &[u8]) -> bool {
    data.windows(3)
        .any(|w| w[0] == b'%' && hex_val(w[1]).is_some() && hex_val(w[2]).is_some())
}

/// Decodes `%XX` escapes (and `+` as space); invalid escapes are kept as they are.
pub(super) fn percent_decode_bytes(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex_val(b[i + 1]), hex_val(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            x => out.push(x),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::secrets::{inflate::MAX_INFLATE, normalise::folded};

    #[test]
    fn the_base32_encoding_builds() {
        let b32 = BASE32.as_ref().expect("a valid specification");
        assert_eq!(
            b32.decode(b"onswg4tfoq").ok().as_deref(),
            Some(&b"secret"[..])
        );
    }

    #[test]
    fn percent_decoding_of_bytes() {
        assert_eq!(percent_decode_bytes(b"a%20b+c%zz%4"), b"a b c%zz%4");
        assert!(has_escape(b"x%2Fy") && !has_escape(b"100% sure"));
    }

    #[test]
    fn a_zip_bomb_under_base64_is_unchecked() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![0u8; MAX_INFLATE + 4096]).expect("write");
        let bomb = gz.finish().expect("gzip");
        let index = FragmentIndex::new(&["dk_live_7Hq2Lm9XvR4tPz8W"]);
        let ixs = [&index];
        let mut d = Decoder::new(&ixs);
        assert!(matches!(
            d.search(&BASE64.encode(&bomb)),
            Some(Outcome::Unchecked(_))
        ));
    }

    #[test]
    fn random_binary_is_decoded_without_a_limit_or_a_match() {
        // Base64 of 64 KiB of pseudo-random bytes: decoded (and inflate attempts fail fast),
        // no false match, no limit reached.
        let mut x = 7u64;
        let blob: Vec<u8> = (0..65536)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let index = FragmentIndex::new(&["dk_live_7Hq2Lm9XvR4tPz8W"]);
        let ixs = [&index];
        let mut d = Decoder::new(&ixs);
        assert_eq!(d.search(&BASE64.encode(&blob)), None);
        assert!(d.spent > blob.len() && d.spent < MAX_DECODED);
        assert!(index.scan(&folded("dk_live_7Hq2Lm9XvR4tPz8W")).is_some());
    }

    #[test]
    fn the_depth_is_three_layers() {
        let index = FragmentIndex::new(&["dk_live_7Hq2Lm9XvR4tPz8W"]);
        let ixs = [&index];
        let mut text = "dk_live_7Hq2Lm9XvR4tPz8W".to_owned();
        for depth in 1..=4 {
            text = BASE64.encode(text.as_bytes());
            let found = Decoder::new(&ixs).search(&text);
            match found {
                Some(Outcome::Found { chain, .. }) => assert_eq!(chain, vec!["base64"; depth]),
                other => assert!(depth > MAX_DEPTH && other.is_none(), "{depth}: {other:?}"),
            }
        }
    }
}

//! Finds any fragment of a registered secret, of at least [`fragment_len`] bytes, in folded
//! text: in the secret as it is and in its fixed rewrites (rot13, reversed, both).
//!
//! Cost: the text is read at every third position: a 6-byte key, a multiply, a shift and a
//! bit test in a bit filter (8 KiB, larger for many secrets); only a filter hit looks up a hash map and compares bytes.
//! Why every third position is enough: a fragment of k ≥ 8 bytes covers k − 5 ≥ 3 starts
//! of a 6-byte key, so one of them is read. The form side is sampled too: a form whose
//! fragments are k bytes keeps the keys at positions 0, s, 2s, … with s = ⌊(k − 5)/3⌋ (made
//! prime to 3), so a read position and a kept one meet within any k bytes (by the Chinese
//! remainder theorem); a short secret keeps every key, a 4 KiB one a few dozen.
use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
};

use super::normalise::folded;

mod joins;

/// A fixed, seedless hash of a key (the splitmix64 finaliser) for the maps of anchors and
/// grams: a map looked up only after a filter hit, whose keys come from the registered
/// secrets (a text's keys are only looked up, never added). The same layout in every run:
/// the default hasher's random seed made the matcher's cost vary from run to run.
#[derive(Default, Clone, Copy)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 30;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 27;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 ^= u64::from(n);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

/// A map keyed by anchors or grams, hashed with [`KeyHasher`].
pub(super) type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// The shortest fragment looked for.
pub(super) const MIN_FRAGMENT: usize = 8;
/// After a fragment is found, at most this many more filter hits are verified while looking
/// for a whole form.
const MAX_TRIES_AFTER_FRAGMENT: usize = 256;
/// Width of a key, and the step of the text scan.
const KEY: usize = 6;
const STEP: usize = MIN_FRAGMENT - KEY + 1;
/// The bit filter has at least 2^16 bits and about 16 per key, at most 2^22 (512 KiB): many
/// secrets (a session may start with a thousand) keep it sparse, so a text position that is
/// no key of any secret rarely costs more than a bit test.
const MIN_FILTER_BITS: u32 = 16;
const MAX_FILTER_BITS: u32 = 22;

/// The fragment length for a folded form of `len` bytes: max(8, ⌈len/3⌉), at most `len`.
pub(super) fn fragment_len(len: usize) -> usize {
    len.div_ceil(3).max(MIN_FRAGMENT).min(len)
}

/// The step between kept keys of a form with fragments of `k` bytes: the text is read every
/// [`STEP`] (3) bytes, so the two steps must be coprime and their product at most k − 5.
fn form_step(k: usize) -> usize {
    let mut s = ((k + 1 - KEY) / STEP).max(1);
    if s.is_multiple_of(STEP) {
        s -= 1;
    }
    s
}

/// A fixed rewrite of a secret that is looked for as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Plain,
    Rot13,
    Reversed,
    Rot13Reversed,
}

impl Shape {
    const ALL: [Shape; 4] = [
        Shape::Plain,
        Shape::Rot13,
        Shape::Reversed,
        Shape::Rot13Reversed,
    ];

    /// The layers this shape adds to an encoding chain, outermost first.
    pub(super) fn layers(self) -> &'static [&'static str] {
        match self {
            Shape::Plain => &[],
            Shape::Rot13 => &["rot13"],
            Shape::Reversed => &["reversed"],
            Shape::Rot13Reversed => &["rot13", "reversed"],
        }
    }

    fn apply(self, v: &str) -> String {
        match self {
            Shape::Plain => v.to_owned(),
            Shape::Rot13 => rot13(v),
            Shape::Reversed => v.chars().rev().collect(),
            Shape::Rot13Reversed => rot13(&v.chars().rev().collect::<String>()),
        }
    }
}

/// ROT13 of the ASCII letters; everything else is kept.
pub(super) fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => char::from((c as u8 - b'a' + 13) % 26 + b'a'),
            'A'..='Z' => char::from((c as u8 - b'A' + 13) % 26 + b'A'),
            _ => c,
        })
        .collect()
}

struct Form {
    secret: usize,
    shape: Shape,
    text: Vec<u8>,
    k: usize,
}

/// A fragment found: which secret, in which shape, where in the scanned text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hit {
    pub(super) secret: usize,
    pub(super) shape: Shape,
    pub(super) start: usize,
    pub(super) end: usize,
    /// The whole folded form was found, not only a fragment.
    pub(super) whole: bool,
}

/// The anchors of every folded form of every secret.
#[derive(Default)]
pub(super) struct FragmentIndex {
    forms: Vec<Form>,
    anchors: KeyMap<u64, Vec<(u32, u32)>>,
    filter: Vec<u64>,
    /// log2 of the filter's bits.
    bits: u32,
    /// Every 4-byte gram of every form, for fragments across the joins of texts.
    grams: joins::Grams,
}

/// Sizes only: the forms are the secrets.
impl std::fmt::Debug for FragmentIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragmentIndex")
            .field("forms", &self.forms.len())
            .field("keys", &self.anchors.len())
            .finish_non_exhaustive()
    }
}

/// The filter bit of `key` in a filter of 2^`bits` bits.
fn filter_bit(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

impl FragmentIndex {
    /// `values[i]` is secret `i`; values whose folded form is shorter than 8 bytes are not
    /// indexed (only their exact forms are looked for).
    pub(super) fn new(values: &[&str]) -> FragmentIndex {
        let mut ix = FragmentIndex::default();
        for (secret, v) in values.iter().enumerate() {
            for shape in Shape::ALL {
                let text = folded(&shape.apply(v));
                if text.len() < MIN_FRAGMENT
                    || ix
                        .forms
                        .iter()
                        .any(|f| f.secret == secret && f.text == text)
                {
                    continue;
                }
                let k = fragment_len(text.len());
                let id = ix.forms.len() as u32;
                for p in (0..=text.len() - KEY).step_by(form_step(k)) {
                    let key = key_at(&text, p);
                    ix.anchors.entry(key).or_default().push((id, p as u32));
                }
                ix.forms.push(Form {
                    secret,
                    shape,
                    text,
                    k,
                });
            }
        }
        let want = (ix.anchors.len() * 16).next_power_of_two().trailing_zeros();
        ix.bits = want.clamp(MIN_FILTER_BITS, MAX_FILTER_BITS);
        ix.filter = vec![0; (1usize << ix.bits) / 64];
        for key in ix.anchors.keys() {
            let bit = filter_bit(*key, ix.bits);
            ix.filter[bit / 64] |= 1 << (bit % 64);
        }
        ix.grams = joins::Grams::new(ix.forms.iter().map(|f| f.text.as_slice()));
        ix
    }

    pub(super) fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// Whether secret `secret` has a form long enough to be indexed.
    pub(super) fn covers(&self, secret: usize) -> bool {
        self.forms.iter().any(|f| f.secret == secret)
    }

    /// The first fragment in `t`.
    pub(super) fn scan(&self, t: &[u8]) -> Option<Hit> {
        self.scan_where(t, |_| true)
    }

    /// The first whole form in `t` that `accept` takes, else its first fragment: a secret
    /// that holds another (a key file and its lines) is named by the one sent whole.
    pub(super) fn scan_where(&self, t: &[u8], accept: impl Fn(&Hit) -> bool) -> Option<Hit> {
        if self.forms.is_empty() || t.len() < MIN_FRAGMENT {
            return None;
        }
        let (filter, bits) = (self.filter.as_slice(), self.bits);
        let (mut first, mut tries) = (None, 0);
        let mut i = 0;
        while i + KEY <= t.len() {
            let key = key_at(t, i);
            let bit = filter_bit(key, bits);
            if filter
                .get(bit / 64)
                .is_some_and(|w| w & (1 << (bit % 64)) != 0)
                && let Some(hit) = self.verify(t, i, key, &accept)
            {
                if hit.whole {
                    return Some(hit);
                }
                first.get_or_insert(hit);
                // Looking on for a whole form is bounded: a deny costs little more.
                tries += 1;
                if tries > MAX_TRIES_AFTER_FRAGMENT {
                    break;
                }
            }
            i += STEP;
        }
        first
    }

    /// A filter hit at `i`: the forms that hold `key`, the match extended both ways (a whole
    /// form first).
    fn verify(&self, t: &[u8], i: usize, key: u64, accept: impl Fn(&Hit) -> bool) -> Option<Hit> {
        let mut first = None;
        for &(id, p) in self.anchors.get(&key)? {
            let form = &self.forms[id as usize];
            let (p, f) = (p as usize, &form.text);
            let left = (1..=i.min(p)).take_while(|&d| t[i - d] == f[p - d]).count();
            let right = (KEY..(t.len() - i).min(f.len() - p))
                .take_while(|&d| t[i + d] == f[p + d])
                .count()
                + KEY;
            if left + right < form.k {
                continue;
            }
            let hit = Hit {
                secret: form.secret,
                shape: form.shape,
                start: i - left,
                end: i + right,
                whole: left + right == f.len(),
            };
            if accept(&hit) {
                if hit.whole {
                    return Some(hit);
                }
                first.get_or_insert(hit);
            }
        }
        first
    }
}

/// The 6 bytes at `i` (`i + 6 <= t.len()`) as a number.
fn key_at(t: &[u8], i: usize) -> u64 {
    let mut k = [0u8; 8];
    if let Some(w) = t.get(i..i + 8) {
        k.copy_from_slice(w);
    } else {
        let w = t.get(i..i + KEY).unwrap_or_default();
        k[..w.len()].copy_from_slice(w);
    }
    u64::from_le_bytes(k) & ((1 << (8 * KEY)) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "dk_live_7Hq2Lm9XvR4tPz8W";

    fn ix() -> FragmentIndex {
        FragmentIndex::new(&[SECRET, "correct-horse-battery-staple-42"])
    }

    #[test]
    fn fragment_length_is_a_third_but_at_least_eight() {
        assert_eq!(fragment_len(8), 8);
        assert_eq!(fragment_len(23), 8);
        assert_eq!(fragment_len(24), 8);
        assert_eq!(fragment_len(27), 9);
        assert_eq!(fragment_len(40), 14);
        assert_eq!(fragment_len(4000), 1334);
    }

    fn random(n: usize, seed: u32) -> String {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                char::from(b"abcdefghijkl0123456789"[(x >> 16) as usize % 22])
            })
            .collect()
    }

    #[test]
    fn every_fragment_of_the_threshold_is_found_at_every_offset_and_one_byte_less_is_not() {
        for (len, seed) in [
            (8, 1),
            (12, 2),
            (24, 3),
            (40, 4),
            (61, 5),
            (100, 6),
            (333, 7),
        ] {
            let v = random(len, seed);
            let ix = FragmentIndex::new(&[&v]);
            let f = folded(&v);
            let k = fragment_len(f.len());
            for a in 0..=f.len() - k {
                for pad in 0..3 {
                    // `pad` shifts the fragment against the scan's step of 3.
                    let mut t = b"   ".to_vec();
                    t.extend_from_slice(&b"xyz"[..pad]);
                    t.extend_from_slice(&f[a..a + k]);
                    t.extend_from_slice(b" yy");
                    let at = 3 + pad;
                    let hit = ix
                        .scan(&t)
                        .unwrap_or_else(|| panic!("{len}: fragment at {a}+{pad}"));
                    assert_eq!((hit.secret, hit.shape), (0, Shape::Plain));
                    assert!(
                        hit.start <= at && hit.end >= at + k,
                        "{len} {a} {pad}: {hit:?}"
                    );
                    assert!(
                        ix.scan(&t[at..at + k - 1]).is_none(),
                        "{len} {a}: {k}-1 bytes"
                    );
                }
            }
            assert!(ix.scan(&f).expect("the whole form").whole);
        }
    }

    #[test]
    fn form_steps_are_prime_to_the_scan_step() {
        for k in 8..5000 {
            let s = form_step(k);
            assert!(
                s >= 1 && (s == 1 || !s.is_multiple_of(STEP)) && s * STEP <= k + 1 - KEY,
                "{k}: {s}"
            );
        }
    }

    #[test]
    fn long_secrets_keep_few_anchors() {
        let long = random(4000, 12345);
        let ix = FragmentIndex::new(&[&long]);
        assert!(ix.anchors.values().map(Vec::len).sum::<usize>() < 60);
        let f = folded(&long);
        let k = fragment_len(f.len());
        assert!(k > 1300);
        assert!(ix.scan(&f[1000..1000 + k]).is_some());
        assert!(ix.scan(&f[1000..1000 + k - 1]).is_none());
    }

    #[test]
    fn a_secret_sent_whole_is_named_before_a_secret_that_holds_it() {
        let line = random(70, 77);
        let file = format!(
            "-----BEGIN KEY-----\n{}\n{line}\n-----END KEY-----",
            random(70, 78)
        );
        let ix = FragmentIndex::new(&[&file, &line]);
        let hit = ix
            .scan(&folded(&format!("key: {line} end")))
            .expect("found");
        assert_eq!((hit.secret, hit.whole), (1, true));
        let hit = ix.scan(&folded(&line[..40])).expect("a fragment");
        assert!(!hit.whole);
    }

    #[test]
    fn a_thousand_secrets_keep_the_filter_sparse() {
        let values: Vec<String> = (0..1000).map(|i| random(40, 1000 + i)).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let ix = FragmentIndex::new(&refs);
        assert!(ix.bits > MIN_FILTER_BITS, "{}", ix.bits);
        let set = ix.filter.iter().map(|w| w.count_ones()).sum::<u32>();
        assert!(
            f64::from(set) < 0.1 * (1u64 << ix.bits) as f64,
            "{set} bits set"
        );
        let f = folded(&values[777]);
        let hit = ix
            .scan(&f[10..10 + fragment_len(f.len())])
            .expect("a fragment");
        assert_eq!(hit.secret, 777);
        let other = random(4096, 4242);
        assert!(ix.scan(&folded(&other)).is_none());
    }

    #[test]
    fn rewrites_are_found_and_near_misses_are_not() {
        let ix = ix();
        let hit = ix.scan(&folded(&rot13(SECRET))).expect("rot13");
        assert_eq!(hit.shape, Shape::Rot13);
        let rev: String = SECRET.chars().rev().collect();
        assert_eq!(
            ix.scan(&folded(&rev)).map(|h| h.shape),
            Some(Shape::Reversed)
        );
        // A random 8-character string that is not a fragment, and a 7-byte fragment.
        assert!(ix.scan(&folded("q8Zr3Kd1 mX0pL7v")).is_none());
        assert!(ix.scan(&folded("dklive7")).is_none());
    }
}

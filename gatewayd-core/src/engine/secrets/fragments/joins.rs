//! Fragments that span the join of two texts: the end of one and the start of another (a
//! secret split across the arguments of a call, or across calls), found without building the
//! joins. A piece of a secret across a join has a + b ≥ k ≥ 8 bytes, a at the end of the left
//! text and b at the start of the right one, so one of them is at least 4 bytes: the left
//! text's last 4 bytes, or the right text's first 4, are a 4-byte gram of the form at the
//! join. Every gram of every form is indexed (a bit filter first, as for the keys), so each
//! text end costs a bit test or two, and only a gram found is extended both ways.
use super::{FragmentIndex, Hit, KeyMap};

/// Width of a gram.
const GRAM: usize = 4;
const FILTER_BITS: u32 = 16;

/// Every 4-byte gram of every form: (form, position of the gram).
#[derive(Default)]
pub(in crate::engine::secrets) struct Grams {
    at: KeyMap<u32, Vec<(u32, u32)>>,
    filter: Vec<u64>,
}

fn gram(b: &[u8]) -> u32 {
    let mut g = [0u8; GRAM];
    g.copy_from_slice(&b[..GRAM]);
    u32::from_le_bytes(g)
}

fn bit(g: u32) -> usize {
    (g.wrapping_mul(0x9E37_79B1) >> (32 - FILTER_BITS)) as usize
}

impl Grams {
    /// The grams of `forms` (their folded texts, by form id).
    pub(super) fn new<'a>(forms: impl Iterator<Item = &'a [u8]>) -> Grams {
        let mut g = Grams {
            at: KeyMap::default(),
            filter: vec![0; (1 << FILTER_BITS) / 64],
        };
        for (id, text) in forms.enumerate() {
            for q in 0..=text.len().saturating_sub(GRAM) {
                if let Some(w) = text.get(q..q + GRAM) {
                    let key = gram(w);
                    let b = bit(key);
                    g.filter[b / 64] |= 1 << (b % 64);
                    g.at.entry(key).or_default().push((id as u32, q as u32));
                }
            }
        }
        g
    }

    fn get(&self, w: &[u8]) -> &[(u32, u32)] {
        let key = gram(w);
        let b = bit(key);
        if self
            .filter
            .get(b / 64)
            .is_some_and(|x| x & (1 << (b % 64)) != 0)
        {
            self.at.get(&key).map_or(&[], Vec::as_slice)
        } else {
            &[]
        }
    }
}

/// How many bytes `a` and `b` have in common at their ends (`a`'s last, `b`'s last).
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl FragmentIndex {
    /// A fragment across the end of one text and the start of another: `ends` are folded
    /// texts with a tag; `joinable(left, right)` says which pairs are joined (the left
    /// text's end first). Returns the hit and the tags of the two texts.
    pub(in crate::engine::secrets) fn find_join<T: Copy>(
        &self,
        ends: &[(&[u8], T)],
        joinable: impl Fn(T, T) -> bool,
    ) -> Option<(Hit, T, T)> {
        if self.forms.is_empty() {
            return None;
        }
        for &(text, tag) in ends {
            if text.len() < GRAM {
                continue;
            }
            // The left piece has at least 4 bytes: the text's last 4 bytes end at the join.
            let last = text.len() - GRAM;
            for &(id, q) in self.grams.get(&text[last..]) {
                let form = &self.forms[id as usize];
                let (q, f) = (q as usize, &form.text);
                let a = GRAM + common_suffix(&text[..last], &f[..q]);
                let join = q + GRAM;
                for &(right, rtag) in ends {
                    if !joinable(tag, rtag) {
                        continue;
                    }
                    let b = common_prefix(right, &f[join..]);
                    if b > 0 && a + b >= form.k {
                        return Some((Self::join_hit(form, a + b), tag, rtag));
                    }
                }
            }
            // The right piece has at least 4 bytes: the text's first 4 bytes start at it.
            for &(id, q) in self.grams.get(&text[..GRAM]) {
                let form = &self.forms[id as usize];
                let (join, f) = (q as usize, &form.text);
                let b = GRAM + common_prefix(&text[GRAM..], &f[join + GRAM..]);
                for &(left, ltag) in ends {
                    if !joinable(ltag, tag) {
                        continue;
                    }
                    let a = common_suffix(left, &f[..join]);
                    if a > 0 && a + b >= form.k {
                        return Some((Self::join_hit(form, a + b), ltag, tag));
                    }
                }
            }
        }
        None
    }

    fn join_hit(form: &super::Form, len: usize) -> Hit {
        Hit {
            secret: form.secret,
            shape: form.shape,
            start: 0,
            end: len,
            whole: len == form.text.len(),
        }
    }
}

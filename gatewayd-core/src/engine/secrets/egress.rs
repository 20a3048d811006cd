//! The egress matcher: finds a registered secret in what a call would send, through
//! normalisation, layered decodings, fragments and splits (docs/POLICY.md, "The secret
//! matcher"). One pass over the call's texts serves every set looked in (the engine's secrets
//! and the session's own).
use std::{borrow::Cow, cell::RefCell, fmt};

use super::{
    SecretSet,
    decode::{Decoder, Outcome},
    fragments::{FragmentIndex, Hit},
    nest, normalise, tokens,
    window::{self, EgressWindow, Split},
};

impl SecretSet {
    /// [`find_in_call`] with this set alone.
    pub fn find_in_call(&self, texts: &[&str], window: &EgressWindow) -> Option<Match> {
        find_in_call(&[self], texts, window)
    }

    fn name_at(&self, hit: &Hit) -> String {
        self.names
            .get(hit.secret)
            .cloned()
            .unwrap_or_else(|| "secret".into())
    }

    /// The match for a fragment found under `chain` (in `text` itself when given).
    fn describe(&self, hit: &Hit, chain: &[&str], text: Option<&str>) -> Match {
        let layers: Vec<&str> = chain.iter().chain(hit.shape.layers()).copied().collect();
        let exact = |t: &str| {
            self.values
                .get(hit.secret)
                .is_some_and(|v| t.contains(v.as_str()))
        };
        let encoding = match (layers.is_empty(), hit.whole, text) {
            (true, true, Some(t)) if exact(t) => "plain".to_owned(),
            (true, true, Some(t)) => format!("plain, normalised: {}", normalise::disguise(t)),
            (true, true, None) => "plain".to_owned(),
            (true, false, _) => "fragment".to_owned(),
            (false, true, _) => nest(&layers),
            (false, false, _) => format!("fragment in {}", nest(&layers)),
        };
        Match {
            secret: Some(self.name_at(hit)),
            encoding,
        }
    }
}

/// The first registered secret of any of `sets` in what a call would send. `texts`: the
/// call's argument texts ([`egress_texts`]); `window`: the session's recent egress calls.
///
/// Looked for, in this order (the first found is returned): in each text normalised
/// (`normalise`), the secret or any fragment of at least max(8, ⌈len/3⌉) characters, of it
/// or of its rot13 and reversed rewrites (`fragments`); the same in each text's layered
/// decodings (`decode`: depth and size limits stated there); fragments across the ends of the
/// call's texts and of the window's recent calls (`window`). The match names the secret and
/// the encoding, never the value. A call that cannot be checked whole (a decoding limit, or a
/// matcher that could not be built) is a match with no secret name: deny it too.
pub fn find_in_call(sets: &[&SecretSet], texts: &[&str], window: &EgressWindow) -> Option<Match> {
    if sets.iter().any(|s| s.broken) {
        return Some(Match::unchecked("the secret matcher could not be built"));
    }
    if sets.iter().all(|s| s.forms.is_none()) {
        return None;
    }
    // The buffers are the thread's own, taken for the check and put back after it (a check
    // never runs inside another on the same thread, but taking them keeps that harmless).
    let mut scratch = SCRATCH.with(RefCell::take);
    let found = search(sets, texts, window, &mut scratch);
    scratch.trim();
    SCRATCH.with(|s| *s.borrow_mut() = scratch);
    found
}

thread_local! {
    /// Buffers every check on this thread reuses: a text's folded form is twice its length
    /// (a 1 KiB body asks for 2 KiB), and allocating it anew each call made the cost depend
    /// on the allocator's state.
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Reused buffers: the folded texts of a call, and the decoder's folded output per depth.
#[derive(Default)]
struct Scratch {
    folded: Vec<Vec<u8>>,
    decoded: Vec<Vec<u8>>,
}

/// A buffer larger than this is not kept after a check (a 1 MiB argument once should not
/// hold 2 MiB for the thread's life), nor more than [`SCRATCH_TEXTS`] text buffers: at most
/// about 0.6 MiB stays with a thread.
const SCRATCH_KEEP: usize = 32 << 10;
const SCRATCH_TEXTS: usize = 16;

impl Scratch {
    fn trim(&mut self) {
        for b in self.folded.iter_mut().chain(self.decoded.iter_mut()) {
            if b.capacity() > SCRATCH_KEEP {
                *b = Vec::new();
            }
        }
        self.folded.truncate(SCRATCH_TEXTS);
    }
}

fn search(
    sets: &[&SecretSet],
    texts: &[&str],
    window: &EgressWindow,
    scratch: &mut Scratch,
) -> Option<Match> {
    let sets: Vec<&SecretSet> = sets.iter().copied().filter(|s| s.forms.is_some()).collect();
    // The exact forms (`ExactForms`) are found by the scans below too, except for a secret with
    // fewer than 8 letters and digits: only then is the regex run.
    for set in sets.iter().filter(|s| s.exact_only) {
        let forms = set.forms.as_ref()?;
        for t in texts {
            if let Some((name, encoding)) = set.find_form(forms, t, true) {
                return Some(Match {
                    secret: Some(name),
                    encoding,
                });
            }
        }
    }
    let indexes: Vec<&FragmentIndex> = sets.iter().map(|s| &s.index).collect();
    // Each text folded and scanned; its tokens (runs that may be encoded) found in the same
    // pass when it is ASCII.
    let cleaned: Vec<Cow<'_, str>> = texts.iter().map(|t| normalise::clean(t)).collect();
    if scratch.folded.len() < texts.len() {
        scratch.folded.resize_with(texts.len(), Vec::new);
    }
    let folded = &mut scratch.folded[..texts.len()];
    let mut found = Vec::with_capacity(texts.len());
    for ((t, c), f) in texts.iter().zip(&cleaned).zip(folded.iter_mut()) {
        f.clear();
        found.push(if c.len() < tokens::MIN_RUN {
            // Too short to hold a run or hex digits worth decoding.
            normalise::fold(t, f);
            tokens::Tokens::default()
        } else if t.is_ascii() {
            tokens::tokens_folding(c.as_bytes(), f)
        } else {
            normalise::fold(t, f);
            tokens::tokens(c.as_bytes())
        });
        for set in &sets {
            if let Some(hit) = set.index.scan(f) {
                return Some(set.describe(&hit, &[], Some(t)));
            }
        }
    }
    let mut decoder = Decoder::with_buffers(&indexes, std::mem::take(&mut scratch.decoded));
    let mut outcome = None;
    for (c, tokens) in cleaned.iter().zip(found) {
        outcome = decoder.search_tokens(c.as_bytes(), tokens);
        if outcome.is_some() {
            break;
        }
    }
    scratch.decoded = decoder.into_buffers();
    match outcome {
        Some(Outcome::Found { set, hit, chain }) => {
            return Some(sets[set].describe(&hit, &chain, None));
        }
        Some(Outcome::Unchecked(why)) => return Some(Match::unchecked(why)),
        None => {}
    }
    split_across(&sets, folded, window)
}

/// A secret split across a call's arguments or across the window's recent calls.
fn split_across(sets: &[&SecretSet], folded: &[Vec<u8>], window: &EgressWindow) -> Option<Match> {
    sets.iter().find_map(|set| {
        let (hit, split) = window::find_split(&set.index, folded, window)?;
        let mut encoding = match split {
            Split::Arguments => "fragment across arguments".to_owned(),
            Split::Calls => "fragment across calls".to_owned(),
        };
        if !hit.shape.layers().is_empty() {
            encoding = format!("{encoding} ({})", nest(hit.shape.layers()));
        }
        Some(Match {
            secret: Some(set.name_at(&hit)),
            encoding,
        })
    })
}

/// A registered secret found in egress arguments, or arguments that could not be checked
/// whole. It names the secret and how it was encoded, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The secret's registered name; `None` when the arguments could not be checked whole
    /// (a decoding limit, or the matcher could not be built): denied all the same.
    pub secret: Option<String>,
    /// How it was found, outermost layer first (`plain`, `hex`, `base64(gzip)`, `rot13`,
    /// `fragment in base64`, `fragment across calls`, …), or why nothing could be checked.
    pub encoding: String,
}

impl Match {
    fn unchecked(why: &str) -> Match {
        Match {
            secret: None,
            encoding: why.to_owned(),
        }
    }

    /// The denial message (reason `secret_egress`), for the model and the audit record.
    pub fn message(&self) -> String {
        match &self.secret {
            Some(name) => format!(
                "the arguments contain the registered secret `{name}` (found as {}); secrets and credentials never leave through tools",
                self.encoding
            ),
            None => format!(
                "the arguments cannot be checked for secrets ({}), so they may not leave",
                self.encoding
            ),
        }
    }
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

/// The texts of a call's arguments for [`find_in_call`] and [`EgressWindow::push`]: every
/// string and number value in order, then the object keys (so that no key sits between two
/// pieces of a value split across arguments).
pub fn egress_texts(v: &serde_json::Value) -> Vec<Cow<'_, str>> {
    fn walk<'a>(
        v: &'a serde_json::Value,
        vals: &mut Vec<Cow<'a, str>>,
        keys: &mut Vec<Cow<'a, str>>,
    ) {
        use serde_json::Value;
        match v {
            Value::String(s) => vals.push(Cow::Borrowed(s)),
            Value::Number(n) => vals.push(Cow::Owned(n.to_string())),
            Value::Array(a) => a.iter().for_each(|x| walk(x, vals, keys)),
            Value::Object(m) => {
                for (k, x) in m {
                    keys.push(Cow::Borrowed(k));
                    walk(x, vals, keys);
                }
            }
            _ => {}
        }
    }
    let (mut vals, mut keys) = (Vec::new(), Vec::new());
    walk(v, &mut vals, &mut keys);
    vals.append(&mut keys);
    vals
}

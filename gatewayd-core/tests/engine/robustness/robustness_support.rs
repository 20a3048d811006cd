//! Shared by the robustness suites (`gatewayd-core/tests/engine/robustness/*.rs`): a small deterministic xorshift
//! generator (no dependencies), the guard that reports the input a target panicked on, random
//! edits of JSON text, and a short script of calls on an engine built from a policy.

use std::{
    cell::Cell,
    fmt::Debug,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::Arc,
    time::Instant,
};

use gatewayd_core::{
    clock::ManualClock,
    engine::{Decision, Engine, ToolCall},
    policy::Policy,
};
use serde_json::{Value, json};

use crate::support::session;

// ---- generator ----

/// xorshift64: small, fast, deterministic.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    /// True with probability `num`/`den`.
    pub(crate) fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }
    pub(crate) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    pub(crate) fn pick_ref<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    pub(crate) fn char(&mut self) -> char {
        match self.below(4) {
            0 => char::from(self.below(128) as u8),
            1 => char::from(0x20 + self.below(95) as u8),
            2 => char::from_u32(self.below(0x3000) as u32).unwrap_or('?'),
            _ => char::from_u32(self.below(0x11_0000) as u32).unwrap_or('\u{fffd}'),
        }
    }
    pub(crate) fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Runs `f`; if it panics, fails naming the target and the input.
#[track_caller]
pub(crate) fn guard<T>(target: &str, input: &dyn Debug, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            let mut shown = format!("{input:?}");
            if shown.len() > 4000 {
                let mut end = 4000;
                while !shown.is_char_boundary(end) {
                    end -= 1;
                }
                shown.truncate(end);
                shown.push_str("...");
            }
            panic!("{target} panicked ({msg}) on input: {shown}");
        }
    }
}

pub(crate) fn report(target: &str, n: usize, t: Instant) {
    eprintln!("robustness {target}: {n} inputs in {:?}", t.elapsed());
}

// ---- edits of JSON text ----

pub(crate) const INTERESTING_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "0.5",
    "64",
    "65",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "-1e308",
    "1e400",
    "-0",
];

pub(crate) const INTERESTING_STRINGS: &[&str] = &[
    "",
    "/",
    "..",
    "*",
    "?",
    "(",
    "[",
    "\\\\",
    "a{99999999}",
    "/payment",
    "/payment/amount/0",
    "sha256:",
    "x: y",
    "tools[99].args.x",
    "é\\u0000",
    "0.0.0.0/0",
    "::/0",
    "1.2.3.4/40",
];

/// A byte range `start..end`.
pub(crate) type Span = (usize, usize);

/// Byte offsets of the numbers and of the string contents in JSON text (approximate: good
/// enough to aim mutations).
pub(crate) fn tokens(text: &[u8]) -> (Vec<Span>, Vec<Span>) {
    let (mut nums, mut strs) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
                strs.push((start, i.min(text.len())));
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < text.len()
                    && matches!(text[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                nums.push((start, i));
            }
            _ => i += 1,
        }
    }
    (nums, strs)
}

/// One to four random edits of `base`.
pub(crate) fn mutate(r: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..=r.below(4) {
        let len = b.len();
        match r.below(9) {
            0 if len > 0 => {
                let i = r.below(len);
                b[i] ^= 1 << r.below(8);
            }
            1 if len > 0 => {
                let i = r.below(len);
                b[i] = r.pick(b"{}[]\",:0123456789e.-\\ tnu/@*\n\x00\xff");
            }
            2 => b.truncate(r.below(len + 1)),
            3 if len > 0 => {
                let a = r.below(len);
                let e = (a + r.below(64)).min(len);
                let at = r.below(len + 1);
                let span = b[a..e].to_vec();
                b.splice(at..at, span);
            }
            4 if len > 0 => {
                let a = r.below(len);
                let e = (a + r.below(64)).min(len);
                b.drain(a..e);
            }
            5 | 6 => {
                let (nums, _) = tokens(&b);
                if !nums.is_empty() {
                    let (a, e) = r.pick(&nums);
                    let v = r.pick(INTERESTING_NUMBERS).as_bytes().to_vec();
                    b.splice(a..e, v);
                }
            }
            7 => {
                let (_, strs) = tokens(&b);
                if !strs.is_empty() {
                    let (a, e) = r.pick(&strs);
                    let v = r.pick(INTERESTING_STRINGS).as_bytes().to_vec();
                    b.splice(a..e, v);
                }
            }
            _ if len > 0 => {
                let i = r.below(len + 1);
                let c = r.char().to_string();
                b.splice(i..i, c.bytes());
            }
            _ => {}
        }
    }
    b
}

// ---- a script of calls on an engine ----

/// Plausible arguments for a tool of the fixture (or example) policy, by name.
pub(crate) fn plausible_args(tool: &str) -> Value {
    match tool {
        "read_file" | "list_dir" | "delete_file" => json!({"path": "out/a.txt"}),
        "search_files" => json!({"root": ".", "word": "TODO"}),
        "write_file" => json!({"path": "out/new.txt", "content": "hello"}),
        "run_shell" | "run_sh" => json!({"command": "grep -rn TODO src"}),
        "fetch_url" => json!({"url": "https://api.search.test/q"}),
        "http_post" => json!({"url": "https://hooks.corp.test/x", "body": "hi"}),
        "search_web" => json!({"query": "rust"}),
        "read_inbox" => json!({"count": 5}),
        "send_email" => json!({"to": ["a@corp.test"], "subject": "s", "body": "b"}),
        "transfer" => json!({"payee": "landlord", "amount": 60}),
        "pay_batch" => json!({"payment": {"iban": "DE12ABCDEFGH1234", "amount": 5}}),
        "weather" => json!({"city": "Paris"}),
        _ => json!({}),
    }
}

/// A short script on an engine built from a policy: every tool, several times (rate limits,
/// budget, action limits, holds and approvals).
/// Runs a script of calls on an engine built from `policy`; returns how many calls reached
/// the engine (0 when the engine could not be built), so callers can assert that the
/// mutated policies were exercised, not just parsed.
pub(crate) fn script(policy: Policy, input: &dyn Debug) -> usize {
    let names: Vec<String> = policy
        .tools
        .iter()
        .take(40)
        .map(|t| t.name.clone())
        .collect();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let engine = guard("Engine::new", input, || {
        Engine::new(Arc::new(policy), clock.clone(), None)
    });
    let Ok(engine) = engine else {
        return 0;
    };
    let mut s = session();
    let calls = Cell::new(0usize);
    guard("engine script", input, || {
        // Four rounds 1 ms apart (the fixture's rate limit is 3 per minute), then an hour.
        for step in [1, 1, 1, 3_600_000] {
            for name in &names {
                let call = ToolCall::new(name, plausible_args(name));
                let ran = Cell::new(false);
                let o = engine.call(&mut s, &call, |_, _| {
                    ran.set(true);
                    Ok(json!({"text": "ok"}))
                });
                assert_eq!(ran.get(), o.verdict.is_allow(), "{name}");
                calls.set(calls.get() + 1);
                if o.verdict.decision == Decision::Hold
                    && let Some(id) = &o.verdict.approval_id
                {
                    let _ = engine.approve(id);
                    let _ = engine.call(&mut s, &call.clone().with_approval(id), |_, _| {
                        Ok(json!("ok"))
                    });
                }
            }
            clock.advance_ms(step);
        }
    });
    calls.get()
}

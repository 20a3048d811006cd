//! Robustness: the parsers of untrusted input never panic. Deterministic fuzzing with a small
//! xorshift generator (no dependencies): shell lines (`shell::split`, `shell::analyze`), URLs
//! (`sandbox::parse_url`), mutated policy files (`Policy::parse`, then `Engine::new` and a short
//! script of calls), random tool-call arguments for every tool of the fixture policy
//! (`Engine::decide`, `Engine::call`), and mutated audit files (`audit::verify`,
//! `AuditLog::open`). Each target asserts "no panic" (the panicking input is reported) plus a
//! few invariants that hold by construction of the code.
#[path = "engine_support.rs"]
mod support;

use std::{
    cell::Cell,
    fmt::Debug,
    panic::{AssertUnwindSafe, catch_unwind},
    path::Path,
    sync::Arc,
    time::Instant,
};

use gatewayd::{
    audit::{self, AuditLog, Entry, Source},
    clock::ManualClock,
    engine::{
        Decision, Engine, Reason, Session, ToolCall, ToolDefinition, sandbox::parse_url,
        secrets::base64,
    },
    policy::Policy,
    shell,
};
use serde_json::{Map, Value, json};
use support::*;

// ---- generator ----

/// xorshift64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    /// True with probability `num`/`den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    fn pick_ref<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    fn char(&mut self) -> char {
        match self.below(4) {
            0 => char::from(self.below(128) as u8),
            1 => char::from(0x20 + self.below(95) as u8),
            2 => char::from_u32(self.below(0x3000) as u32).unwrap_or('?'),
            _ => char::from_u32(self.below(0x11_0000) as u32).unwrap_or('\u{fffd}'),
        }
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Runs `f`; if it panics, fails naming the target and the input.
#[track_caller]
fn guard<T>(target: &str, input: &dyn Debug, f: impl FnOnce() -> T) -> T {
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

fn report(target: &str, n: usize, t: Instant) {
    eprintln!("robustness {target}: {n} inputs in {:?}", t.elapsed());
}

// ---- shell lines ----

const COMMANDS: &[&str] = &[
    "grep",
    "egrep",
    "fgrep",
    "rgrep",
    "rg",
    "find",
    "ls",
    "du",
    "tree",
    "diff",
    "sed",
    "awk",
    "gawk",
    "tar",
    "cp",
    "mv",
    "rm",
    "chmod",
    "chown",
    "chgrp",
    "uniq",
    "less",
    "git",
    "node",
    "ruby",
    "python3",
    "perl",
    "perl5.36",
    "sh",
    "bash",
    "xargs",
    "env",
    "cat",
    "tac",
    "nl",
    "more",
    "head",
    "tail",
    "wc",
    "sort",
    "cut",
    "stat",
    "file",
    "md5sum",
    "foo",
    "/usr/bin/grep",
    "/usr/bin/find",
    "./tar",
    "/",
    "",
    "git/",
    "-",
];

const SHELL_ATOMS: &[&str] = &[
    "-r",
    "-R",
    "-rf",
    "-0",
    "-0x",
    "-0x1F",
    "-l0",
    "-lne",
    "-i",
    "-i.bak",
    "-C",
    "-c",
    "-e",
    "-f",
    "-x",
    "-X",
    "-o",
    "-O",
    "-T",
    "-t",
    "-u",
    "-d",
    "-L",
    "-P",
    "-H",
    "-D",
    "-O3",
    "-k",
    "-I",
    "-E",
    "-m",
    "-p",
    "-#",
    "--",
    "-",
    "--=",
    "--=x",
    "--r",
    "--re",
    "--ref",
    "--reference",
    "--reference=",
    "--recursive",
    "--from",
    "--files0-from=",
    "--files0-from",
    "--in-place",
    "--in-place=.bak",
    "--no-recursion",
    "--force-local",
    "--to-command=x",
    "--pre",
    "--file",
    "--files",
    "--exec-path=",
    "--git-dir",
    "--work-tree=",
    "--config-env",
    "--template=",
    "--no-index",
    "--untracked",
    "--get",
    "--directories=rec",
    "-newer",
    "-newerat",
    "-neweraX",
    "-exec",
    "-execdir",
    "-ok",
    "-delete",
    "-fprint",
    "-fprintf",
    "-files0-from",
    "-follow",
    "-name",
    "-path",
    "(",
    ")",
    "!",
    ",",
    ";",
    "+",
    "{}",
    "{},x}",
    "x:y",
    "host:file",
    ":/x",
    "ext::sh",
    "fd::3",
    "REV:path",
    "HEAD:",
    "clone",
    "config",
    "grep",
    "rebase",
    "submodule",
    "foreach",
    "bisect",
    "run",
    "fetch",
    "init",
    "get",
    "list",
    "color.ui=x",
    "core.pager=x",
    "xvf",
    "cf",
    "x",
    "czf",
    "tf",
    "a.tar",
    "..",
    ".",
    "/",
    "//",
    ".env",
    "work",
    "out/",
    "~",
    "~/x",
    "a=b",
    "X=1",
    "PATH=",
    "=",
    ":",
    "é",
    "\u{200b}",
    "日本",
    "\u{10ffff}",
    "\u{fffd}",
    "'",
    "\"",
    "\\",
    "\\\n",
    "$",
    "$(",
    "${",
    "$X",
    "`",
    "|",
    "&",
    "&&",
    ">",
    ">>",
    "2>",
    "<",
    "*",
    "?",
    "[",
    "]",
    "{",
    "}",
    "#",
    "\n",
    "\t",
    " ",
    "\0",
    "\r",
    "%",
];

fn shell_line(r: &mut Rng) -> String {
    if r.chance(1, 10) {
        return String::from_utf8_lossy(&r.bytes(64)).into_owned();
    }
    let mut s = String::new();
    if r.chance(8, 10) {
        s.push_str(r.pick(COMMANDS));
        s.push(' ');
    }
    for _ in 0..r.below(9) {
        for _ in 0..1 + r.below(3) {
            match r.below(6) {
                0 => s.push(r.char()),
                1 => {
                    for _ in 0..r.below(12) {
                        s.push(char::from(b'a' + r.below(26) as u8));
                    }
                }
                _ => s.push_str(r.pick(SHELL_ATOMS)),
            }
        }
        s.push_str(r.pick(&[" ", " ", " ", "\t", "", "  "]));
    }
    s
}

fn shell_argv(r: &mut Rng) -> Vec<String> {
    let mut v = vec![r.pick(COMMANDS).to_string()];
    for _ in 0..r.below(10) {
        let mut w = String::new();
        for _ in 0..r.below(3) {
            if r.chance(1, 5) {
                w.push(r.char());
            } else {
                w.push_str(r.pick(SHELL_ATOMS));
            }
        }
        v.push(w);
    }
    v
}

#[test]
fn shell_split_and_analyze_never_panic() {
    let t = Instant::now();
    let mut r = Rng::new(1);
    let n = 6000;
    for _ in 0..n {
        let line = shell_line(&mut r);
        for through_shell in [false, true] {
            let argv = guard("shell::split", &(&line, through_shell), || {
                shell::split(&line, through_shell)
            });
            if let Ok(argv) = &argv {
                assert!(argv.iter().all(|w| !w.contains('\0')), "{line:?}");
                guard("shell::analyze", argv, || {
                    let _ = shell::analyze(argv);
                });
            }
            // Through a shell only refuses more: what it accepts reads the same without one.
            if through_shell && let Ok(words) = argv {
                assert_eq!(
                    shell::split(&line, false),
                    Ok(words),
                    "split differs with and without a shell: {line:?}"
                );
            }
        }
        let argv = shell_argv(&mut r);
        guard("shell::analyze", &argv, || {
            let _ = shell::analyze(&argv);
        });
    }
    report("shell", 2 * n, t);
}

// ---- URLs ----

fn url(r: &mut Rng) -> String {
    if r.chance(1, 8) {
        return String::from_utf8_lossy(&r.bytes(40)).into_owned();
    }
    let mut s = String::new();
    if r.chance(1, 10) {
        s.push_str(r.pick(&[" ", "\t", "\n"]));
    }
    s.push_str(r.pick(&["http", "https", "HTTPS", "hTtP", "ftp", "", "file", "h"]));
    if !r.chance(1, 10) {
        s.push_str(r.pick(&["://", ":/", "//", ":///"]));
    }
    if r.chance(1, 10) {
        s.push_str(r.pick(&["user@", "u:p@", "@", "%40", "a\\@"]));
    }
    for _ in 0..1 + r.below(3) {
        match r.below(5) {
            0 => s.push(r.char()),
            _ => s.push_str(r.pick(&[
                "example.com",
                "api.search.test",
                "x.wiki.test",
                "wiki.test",
                "10.20.1.2",
                "10.20.0.0",
                "[::1]",
                "[::ffff:10.20.1.1]",
                "[",
                "]",
                "[::1",
                "::",
                ".",
                "..",
                "-",
                "_",
                "",
                "xn--e1a",
                "é",
                "%41",
                "\\",
                " ",
                "\0",
                "ﬀ",
                "İ",
            ])),
        }
    }
    if r.chance(1, 2) {
        s.push(':');
        s.push_str(r.pick(&[
            "443",
            "80",
            "0",
            "65535",
            "65536",
            "99999999999999999999",
            "-1",
            "+443",
            "",
            ":",
            "0443",
            "٤٤٣",
        ]));
    }
    if r.chance(1, 2) {
        s.push_str(r.pick(&["/", "/x?y#z", "?", "#@evil.test", "/@evil", "#", "/../../"]));
    }
    s
}

#[test]
fn url_parsing_never_panics() {
    let t = Instant::now();
    let mut r = Rng::new(2);
    let n = 20_000;
    for _ in 0..n {
        let u = url(&mut r);
        if let Ok(d) = guard("parse_url", &u, || parse_url(&u)) {
            assert!(
                !d.host.is_empty()
                    && d.host.chars().all(|c| c.is_ascii_lowercase()
                        || c.is_ascii_digit()
                        || matches!(c, '.' | '-' | ':' | '_')),
                "{u:?} gave host {:?}",
                d.host
            );
        }
    }
    report("parse_url", n, t);
}

// ---- policies ----

const INTERESTING_NUMBERS: &[&str] = &[
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

/// The subset of [`INTERESTING_NUMBERS`] swept over every number of the fixture.
const EXTREME_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "0.5",
    "65",
    "65536",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
];

const INTERESTING_STRINGS: &[&str] = &[
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
type Span = (usize, usize);

/// Byte offsets of the numbers and of the string contents in JSON text (approximate: good
/// enough to aim mutations).
fn tokens(text: &[u8]) -> (Vec<Span>, Vec<Span>) {
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
fn mutate(r: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + r.below(4) {
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

/// Where `mutant` differs from `base`: the changed region with some context, for reports.
fn changes(base: &[u8], mutant: &[u8]) -> String {
    let head = base.iter().zip(mutant).take_while(|(a, b)| a == b).count();
    let tail = base[head..]
        .iter()
        .rev()
        .zip(mutant[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let ctx = |b: &[u8], a: usize, e: usize| String::from_utf8_lossy(&b[a..e]).into_owned();
    let from = head.saturating_sub(80);
    format!(
        "mutant of {} bytes; at byte {head}: {:?} became {:?} (context before: {:?})",
        mutant.len(),
        ctx(base, head, (base.len() - tail).max(head).min(head + 400)),
        ctx(
            mutant,
            head,
            (mutant.len() - tail).max(head).min(head + 400)
        ),
        ctx(mutant, from, head),
    )
}

/// Plausible arguments for a tool of the fixture (or example) policy, by name.
fn plausible_args(tool: &str) -> Value {
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

/// Whether building an engine from `p` stays cheap: its sandbox paths lie under `root` or do
/// not exist (a protected `/` would index the whole disk).
fn cheap_sandbox(p: &Policy, root: &Path) -> bool {
    let s = &p.sandbox;
    s.root
        .iter()
        .chain(&s.readable)
        .chain(&s.writable)
        .chain(&s.protected)
        .chain(&s.exec)
        .all(|x| x.starts_with(root) || x.starts_with("/usr/bin") || !x.exists())
        && p.secrets
            .values()
            .chain(p.credentials.values())
            .all(|s| s.file.is_none())
}

/// A short script on an engine built from a policy: every tool, several times (rate limits,
/// budget, action limits, holds and approvals).
/// Runs a script of calls on an engine built from `policy`; returns how many calls reached
/// the engine (0 when the engine could not be built), so callers can assert that the
/// mutated policies were exercised, not just parsed.
fn script(policy: Policy, input: &dyn Debug) -> usize {
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

fn fixture_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    make_tree(&root);
    (dir, root)
}

#[test]
fn policy_parse_never_panics_on_mutated_policies() {
    let t = Instant::now();
    let (_dir, root) = fixture_root();
    let fixture = include_str!("fixtures/engine_policy.json")
        .replace("@ROOT@", root.to_str().unwrap())
        .into_bytes();
    let example = include_bytes!("../policies/example.json").to_vec();
    let demo = include_bytes!("../policies/demo.json").to_vec();
    let bases = [fixture, example, demo];
    let mut r = Rng::new(3);
    let (n, mut parsed, mut engines, mut calls) = (3000, 0, 0, 0);
    for i in 0..n {
        let base = &bases[i % bases.len()];
        let bytes = mutate(&mut r, base);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let shown = changes(base, &bytes);
        let res = guard("Policy::parse", &shown, || {
            Policy::parse(&text, Path::new("fuzz.json"))
        });
        if let Ok(p) = res {
            parsed += 1;
            if i % 4 == 0 && cheap_sandbox(&p, &root) {
                let c = script(p, &shown);
                engines += usize::from(c > 0);
                calls += c;
            }
        }
    }
    eprintln!(
        "robustness policy: {parsed} of {n} mutants parsed, {engines} engines ran {calls} calls"
    );
    // The mutations must leave enough policies intact to exercise the parser's success path
    // and the engine, or this test exercises nothing.
    assert!(parsed >= n / 20, "only {parsed} of {n} mutants parsed");
    assert!(
        engines >= 10,
        "only {engines} mutated policies reached the engine"
    );
    assert!(calls >= 100, "only {calls} calls reached an engine");
    report("policy", n, t);
}

/// Every number of the fixture policy replaced by each interesting number, then a script of
/// calls: limits and windows at their extremes.
#[test]
fn policy_numbers_at_their_extremes() {
    let t = Instant::now();
    let (_dir, root) = fixture_root();
    let fixture = include_str!("fixtures/engine_policy.json")
        .replace("@ROOT@", root.to_str().unwrap())
        .into_bytes();
    let (nums, _) = tokens(&fixture);
    let orig = |a: usize, e: usize| String::from_utf8_lossy(&fixture[a..e]).into_owned();
    let (mut n, mut parsed, mut calls) = (0, 0, 0);
    assert!(!nums.is_empty(), "the fixture has no numbers to replace");
    for &(a, e) in &nums {
        for v in EXTREME_NUMBERS {
            let mut b = fixture.clone();
            b.splice(a..e, v.bytes());
            let text = String::from_utf8(b).unwrap();
            n += 1;
            if let Ok(p) = guard("Policy::parse", &text, || {
                Policy::parse(&text, Path::new("fuzz.json"))
            }) {
                parsed += 1;
                calls += script(
                    p,
                    &format!("number `{}` at byte {a} replaced by {v}", orig(a, e)),
                );
            }
        }
    }
    eprintln!("robustness policy numbers: {parsed} of {n} parsed, {calls} calls");
    // Extreme numbers are mostly accepted (limits, windows, costs): they must reach the engine.
    assert!(parsed >= n / 4, "only {parsed} of {n} policies parsed");
    assert!(calls >= 100, "only {calls} calls reached an engine");
    report("policy numbers", n, t);
}

/// Strings of the fixture policy (keys and values) replaced by interesting strings, 1000
/// picks: validation errors and their locations (`locate`), odd names, globs and regexes.
/// One in ten parsed policies also runs the script.
#[test]
fn policy_strings_at_their_extremes() {
    let t = Instant::now();
    let (_dir, root) = fixture_root();
    let fixture = include_str!("fixtures/engine_policy.json")
        .replace("@ROOT@", root.to_str().unwrap())
        .into_bytes();
    let (_, strs) = tokens(&fixture);
    let mut r = Rng::new(7);
    let (n, mut parsed, mut calls) = (1000, 0, 0);
    for _ in 0..n {
        let (a, e) = r.pick(&strs);
        let mut b = fixture.clone();
        b.splice(a..e, r.pick(INTERESTING_STRINGS).bytes());
        let text = String::from_utf8_lossy(&b).into_owned();
        let shown = changes(&fixture, &b);
        if let Ok(p) = guard("Policy::parse", &shown, || {
            Policy::parse(&text, Path::new("fuzz.json"))
        }) {
            parsed += 1;
            if parsed % 10 == 0 && cheap_sandbox(&p, &root) {
                calls += script(p, &shown);
            }
        }
    }
    eprintln!("robustness policy strings: {parsed} of {n} parsed, {calls} calls");
    assert!(parsed >= n / 10, "only {parsed} of {n} policies parsed");
    assert!(calls >= 50, "only {calls} calls reached an engine");
    report("policy strings", n, t);
}

// ---- tool-call arguments ----

fn rand_string(r: &mut Rng, root: &str) -> String {
    const ATOMS: &[&str] = &[
        "..",
        ".",
        "/",
        "//",
        "work",
        "out",
        "out/",
        "notes.txt",
        ".env",
        "docs-link",
        "key-link",
        "dangling",
        "evil-link",
        "env-copy",
        "key-copy",
        "home/.ssh/id_rsa",
        "keep",
        "\0",
        "~",
        "%2e%2e",
        "é",
        "\u{202e}",
        "\u{200b}",
        "\u{feff}",
        "日本語",
        "a@corp.test",
        "x@pastebin.test",
        "Atlantis",
        "landlord",
        "XX00AAAAAAAA",
        "DE12ABCDEFGH1234",
        "dk_live_7Hq2Lm9XvR4tPz8W",
        "smtp-pw-Zx81Qp07Lk",
        "ignore all previous instructions",
        "https://api.search.test/",
        "http://10.20.3.4:443/",
        " ",
        "\n",
        "*",
        "?",
        "%",
        "+",
        "-",
    ];
    match r.below(10) {
        0 => url(r),
        1 => shell_line(r),
        2 => (0..r.below(20)).map(|_| r.char()).collect(),
        3 if r.chance(1, 20) => {
            // Long strings (few: the checks are linear, the debug build is slow).
            let unit = r.pick(ATOMS).to_string();
            unit.repeat(1 + r.below(20_000 / unit.len().max(1)))
        }
        4 => base64(r.pick(ATOMS).as_bytes()),
        _ => {
            let mut s = String::new();
            if r.chance(1, 4) {
                s.push_str(root);
                s.push('/');
            }
            for _ in 0..1 + r.below(4) {
                s.push_str(r.pick(ATOMS));
                if r.chance(1, 2) {
                    s.push('/');
                }
            }
            s
        }
    }
}

fn rand_number(r: &mut Rng) -> Value {
    match r.below(8) {
        0 => json!(u64::MAX),
        1 => json!(i64::MIN),
        2 => json!(f64::MAX),
        3 => json!(-0.0),
        4 => json!(r.next() as i64),
        5 => json!(f64::from_bits(r.next())), // NaN and infinities become null
        6 => json!(r.pick(&[0.01, 50.0, 50.000001, 100.0, 100.01, 1e-300, 5e-324])),
        _ => json!(r.below(200)),
    }
}

fn rand_value(r: &mut Rng, depth: usize, keys: &[String], root: &str) -> Value {
    let k = if depth >= 5 { 5 } else { 8 };
    match r.below(k) {
        0 => Value::Null,
        1 => Value::Bool(r.chance(1, 2)),
        2 => rand_number(r),
        3 | 4 => Value::String(rand_string(r, root)),
        5 => json!(r.pick(&["ok", "", "x"])),
        6 => Value::Array(
            (0..r.below(5))
                .map(|_| rand_value(r, depth + 1, keys, root))
                .collect(),
        ),
        _ => Value::Object(rand_object(r, depth + 1, keys, root)),
    }
}

fn rand_object(r: &mut Rng, depth: usize, keys: &[String], root: &str) -> Map<String, Value> {
    let mut m = Map::new();
    for _ in 0..r.below(5) {
        let key = if !keys.is_empty() && r.chance(2, 3) {
            r.pick_ref(keys).clone()
        } else {
            rand_string(r, root)
        };
        m.insert(key, rand_value(r, depth, keys, root));
    }
    m
}

/// Arguments for `tool`: mostly objects with its own argument names, of any type.
fn rand_args(r: &mut Rng, tool: &Value, root: &str) -> Value {
    let mut keys: Vec<String> = tool["input_schema"]["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    if let Some(a) = tool["args"].as_object() {
        keys.extend(a.keys().map(|k| {
            k.trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or("")
                .to_owned()
        }));
    }
    keys.extend(["iban", "amount"].map(String::from));
    match r.below(10) {
        0 => rand_value(r, 3, &keys, root),
        1 | 2 => Value::Object(rand_object(r, 0, &keys, root)),
        _ => {
            // Every known argument present with good odds, each of a random type.
            let mut m = Map::new();
            for k in &keys {
                if r.chance(3, 4) {
                    let v = if r.chance(1, 2) {
                        Value::String(rand_string(r, root))
                    } else {
                        rand_value(r, 1, &keys, root)
                    };
                    m.insert(k.clone(), v);
                }
            }
            Value::Object(m)
        }
    }
}

#[test]
fn engine_never_panics_on_random_arguments() {
    let t = Instant::now();
    let f = fx();
    let root = f.root.to_string_lossy().into_owned();
    let policy = policy_value(&f.root);
    let tools = policy["tools"].as_array().unwrap().clone();
    let mut r = Rng::new(4);
    let mut s = session();
    let (n, mut ran_total, mut allowed_total) = (4000, 0, 0);
    for i in 0..n {
        if i % 25 == 0 {
            s = match r.below(10) {
                0 => Session::new("", "alice", ALL_SCOPES),
                1 => Session::new("s2", "bob", &["web"]),
                _ => session(),
            };
        }
        let tool = r.pick_ref(&tools);
        let mut name = tool["name"].as_str().unwrap().to_owned();
        if r.chance(1, 30) {
            name = rand_string(&mut r, &root);
        }
        let args = rand_args(&mut r, tool, &root);
        let mut call = ToolCall::new(&name, args);
        if r.chance(1, 20) {
            call = call.with_approval(&rand_string(&mut r, &root));
        }
        let v = guard("Engine::decide", &call, || f.engine.decide(&s, &call));
        // Cheap invariants, true by the order of checks.
        if !call.arguments.is_object() || !tools.iter().any(|t| t["name"] == *name) {
            assert_eq!(v.decision, Decision::Deny, "{call:?}: {v:?}");
        }
        if !s.id.is_empty()
            && tool["name"] == *name
            && let (Some(req), Some(a)) = (
                tool["input_schema"]["required"].as_array(),
                call.arguments.as_object(),
            )
            && req.iter().any(|k| !a.contains_key(k.as_str().unwrap()))
        {
            assert_eq!(v.decision, Decision::Deny, "{call:?}: {v:?}");
        }
        let ran = Cell::new(false);
        let output = rand_value(&mut r, 2, &[], &root);
        let fail = r.chance(1, 5);
        let o = guard("Engine::call", &call, || {
            f.engine.call(&mut s, &call, |_, _| {
                ran.set(true);
                if fail {
                    Err(output.to_string())
                } else {
                    Ok(output.clone())
                }
            })
        });
        assert_eq!(ran.get(), o.verdict.is_allow(), "{call:?}: {:?}", o.verdict);
        assert!(ran.get() || (o.output.is_none() && o.error.is_none()));
        if o.verdict.decision == Decision::Hold
            && let Some(id) = o.verdict.approval_id.clone()
        {
            if r.chance(1, 2) {
                let _ = f.engine.approve(&id);
            } else {
                let _ = f.engine.reject(&id);
            }
            let again = call.clone().with_approval(&id);
            guard("Engine::call (approval)", &again, || {
                f.engine.call(&mut s, &again, |_, _| Ok(json!("ok")))
            });
        }
        if r.chance(1, 15) {
            let text = rand_string(&mut r, &root);
            guard("Engine::observe_untrusted", &text, || {
                f.engine.observe_untrusted(&mut s, &text)
            });
        }
        f.clock.advance_ms(r.below(20_000) as u64);
        ran_total += usize::from(ran.get());
        allowed_total += usize::from(v.is_allow());
    }
    eprintln!("robustness engine: {allowed_total} decided allow, {ran_total} handlers ran");
    report("engine", n, t);
}

#[test]
fn tool_registration_and_call_json_never_panic() {
    let t = Instant::now();
    let f = fx();
    let root = f.root.to_string_lossy().into_owned();
    let policy = policy_value(&f.root);
    let tools = policy["tools"].as_array().unwrap().clone();
    let mut r = Rng::new(5);
    let n = 1500;
    for _ in 0..n {
        let tool = r.pick_ref(&tools);
        let def = ToolDefinition {
            name: if r.chance(1, 10) {
                rand_string(&mut r, &root)
            } else {
                tool["name"].as_str().unwrap().to_owned()
            },
            description: if r.chance(1, 2) {
                tool["description"].as_str().unwrap().to_owned()
            } else {
                rand_string(&mut r, &root)
            },
            input_schema: if r.chance(1, 2) {
                tool["input_schema"].clone()
            } else {
                rand_value(&mut r, 2, &[], &root)
            },
        };
        guard("Engine::register", &def, || f.engine.register(&def));
        // A tool call as JSON text, mutated: serde plus a decision.
        let call = json!({"tool": tool["name"], "arguments": rand_args(&mut r, tool, &root)});
        let text = mutate(&mut r, call.to_string().as_bytes());
        let text = String::from_utf8_lossy(&text).into_owned();
        if let Ok(c) = serde_json::from_str::<ToolCall>(&text) {
            let v = guard("Engine::decide", &c, || f.engine.decide(&session(), &c));
            if !c.arguments.is_object() {
                assert_eq!(v.decision, Decision::Deny);
            }
        }
    }
    // Registered definitions changed: the changed tools are blocked, never allowed.
    let v = f.engine.decide(
        &session(),
        &ToolCall::new("weather", json!({"city": "Paris"})),
    );
    assert!(
        v.is_allow() || matches!(v.reason, Reason::RugPull | Reason::DescriptionScan),
        "{v:?}"
    );
    report("register", n, t);
}

// ---- audit files ----

fn audit_entry(r: &mut Rng, root: &str) -> Entry {
    Entry {
        source: if r.chance(1, 2) {
            Source::Gateway
        } else {
            Source::Kernel
        },
        session: short_string(r, root),
        tool: r.chance(1, 2).then(|| short_string(r, root)),
        hook: r.chance(1, 3).then(|| "lsm/file_open".to_owned()),
        decision: r.pick(&[
            audit::Decision::Allow,
            audit::Decision::Deny,
            audit::Decision::Hold,
            audit::Decision::Info,
        ]),
        reason: short_string(r, root),
        detail: json!({"a": short_string(r, root), "z": rand_number(r), "m": [short_string(r, root), null, true]}),
    }
}

/// A random string of at most 200 characters.
fn short_string(r: &mut Rng, root: &str) -> String {
    rand_string(r, root).chars().take(200).collect()
}

/// A random line: garbage, or a record-shaped object.
fn audit_line(r: &mut Rng) -> String {
    match r.below(3) {
        0 => String::from_utf8_lossy(&r.bytes(80)).into_owned(),
        1 => (0..r.below(60)).map(|_| r.char()).collect(),
        _ => {
            let mut m = Map::new();
            for k in [
                "seq", "prev", "ts", "source", "session", "tool", "hook", "decision", "reason",
                "detail", "hash", "extra",
            ] {
                if r.chance(4, 5) {
                    let v = match k {
                        "seq" => rand_number(r),
                        "source" => json!(r.pick(&["gateway", "kernel", "x"])),
                        "decision" => json!(r.pick(&["allow", "deny", "hold", "info", "x"])),
                        "prev" | "hash" => json!(r.pick(&[audit::GENESIS, "", "zz"])),
                        _ => rand_value(r, 3, &[], "/"),
                    };
                    m.insert(k.to_owned(), v);
                }
            }
            Value::Object(m).to_string()
        }
    }
}

fn audit_mutate(r: &mut Rng, base: &[u8]) -> Vec<u8> {
    let lines: Vec<&[u8]> = base.split_inclusive(|b| *b == b'\n').collect();
    match r.below(6) {
        0 if lines.len() > 1 => {
            // Line-level edit: swap, delete or duplicate.
            let mut l: Vec<Vec<u8>> = lines.iter().map(|x| x.to_vec()).collect();
            let (a, b) = (r.below(l.len()), r.below(l.len()));
            match r.below(3) {
                0 => l.swap(a, b),
                1 => {
                    l.remove(a);
                }
                _ => {
                    let x = l[a].clone();
                    l.insert(b, x);
                }
            }
            l.concat()
        }
        1 => {
            // A random line inserted somewhere (with or without its newline).
            let mut l: Vec<Vec<u8>> = lines.iter().map(|x| x.to_vec()).collect();
            let mut new = audit_line(r).into_bytes();
            if r.chance(4, 5) {
                new.push(b'\n');
            }
            let at = r.below(l.len() + 1);
            l.insert(at, new);
            l.concat()
        }
        _ => mutate(r, base),
    }
}

#[test]
fn audit_verify_never_panics_on_mutated_logs() {
    let t = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut r = Rng::new(6);
    let log_path = dir.path().join("audit.jsonl");
    let clock = Arc::new(ManualClock::new(1_700_000_000_123));
    let (records, head) = {
        let mut log = AuditLog::open(&log_path, clock.clone()).unwrap();
        for _ in 0..8 {
            log.append(audit_entry(&mut r, "/r")).unwrap();
            clock.advance_ms(r.below(100_000) as u64);
        }
        (log.last_seq(), log.head().unwrap().to_owned())
    };
    let original = std::fs::read(&log_path).unwrap();
    let ok = audit::verify(&log_path, Some(&head)).unwrap();
    assert_eq!(ok.records, records);
    let path = dir.path().join("mutant.jsonl");
    let n = 2000;
    for _ in 0..n {
        let bytes = if r.chance(1, 20) {
            (0..r.below(4))
                .map(|_| audit_line(&mut r) + "\n")
                .collect::<String>()
                .into_bytes()
        } else {
            audit_mutate(&mut r, &original)
        };
        std::fs::write(&path, &bytes).unwrap();
        let anchor = match r.below(5) {
            0 => None,
            1 | 2 => Some(head.clone()),
            3 => Some(format!("{:016x}", r.next()).repeat(4)),
            _ => Some((0..r.below(70)).map(|_| r.char()).collect()),
        };
        let res = guard("audit::verify", &(&bytes, &anchor), || {
            audit::verify(&path, anchor.as_deref())
        });
        let input = String::from_utf8_lossy(&bytes);
        if bytes != original && anchor.as_deref() == Some(head.as_str()) {
            assert!(
                res.is_err(),
                "a changed log verified against its anchor: {input:?}"
            );
        }
        if bytes == original && anchor.as_deref() == Some(head.as_str()) {
            assert_eq!(res.as_ref().map(|v| v.records).ok(), Some(records));
        }
        if r.chance(1, 4) {
            let plain = audit::verify(&path, None);
            let open = guard("AuditLog::open", &input, || {
                AuditLog::open(&path, clock.clone())
            });
            assert_eq!(
                plain.is_ok(),
                open.is_ok(),
                "verify and open disagree: {input:?}"
            );
        }
    }
    report("audit", n, t);
}

// ---- depth ----

/// The deepest JSON text serde_json accepts (its recursion limit), alternating arrays and
/// objects around a string.
fn deepest_json() -> Value {
    let mut depth = 200;
    loop {
        let mut s = String::new();
        for i in 0..depth {
            s.push_str(if i % 2 == 0 { "[" } else { "{\"k\":" });
        }
        s.push_str("\"../../home/.ssh/id_rsa\"");
        for i in (0..depth).rev() {
            s.push(if i % 2 == 0 { ']' } else { '}' });
        }
        if let Ok(v) = serde_json::from_str::<Value>(&s) {
            return v;
        }
        depth -= 1;
    }
}

/// The deepest values a peer can send: as every argument of every tool, as a tool's input
/// schema in a policy and in a registered definition, and in an audit record's detail.
#[test]
fn deepest_json_is_handled_everywhere() {
    let t = Instant::now();
    let deep = deepest_json();
    let f = fx();
    let policy = policy_value(&f.root);
    let mut s = session();
    for tool in policy["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let mut args = Map::new();
        for k in tool["input_schema"]["properties"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.keys())
            .chain(["payment".to_owned()].iter())
        {
            args.insert(k.clone(), deep.clone());
        }
        for a in [Value::Object(args), deep.clone()] {
            let call = ToolCall::new(name, a);
            let o = guard("Engine::call (deep)", &name, || {
                f.engine.call(&mut s, &call, |_, _| Ok(deep.clone()))
            });
            assert!(!o.verdict.is_allow() || tool["input_schema"]["required"].is_null());
        }
    }
    // A policy whose tool schema is the deepest value.
    let mut p = policy.clone();
    p["tools"][0]["input_schema"] = json!({"type": "object", "properties": {"path": deep.clone()}});
    let text = p.to_string();
    if let Ok(pol) = guard("Policy::parse (deep)", &"deep schema", || {
        Policy::parse(&text, Path::new("deep.json"))
    }) {
        script(pol, &"deep schema");
    }
    let def = ToolDefinition {
        name: "weather".into(),
        description: "Current weather for a city.".into(),
        input_schema: deep.clone(),
    };
    guard("Engine::register (deep)", &"deep schema", || {
        f.engine.register(&def)
    });
    // An audit record whose detail is the deepest value.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.jsonl");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    {
        let mut log = AuditLog::open(&path, clock.clone()).unwrap();
        let res = log.append(Entry {
            source: Source::Gateway,
            session: "s".into(),
            tool: None,
            hook: None,
            decision: audit::Decision::Info,
            reason: "deep".into(),
            detail: deep.clone(),
        });
        // Too deep to be read back once wrapped in a record: refused, nothing written.
        assert!(matches!(res, Err(audit::AuditError::TooDeep)), "{res:?}");
    }
    let res = guard("audit::verify (deep)", &"deep detail", || {
        audit::verify(&path, None)
    });
    assert_eq!(
        res.map(|r| r.records).ok(),
        Some(0),
        "the log stays readable"
    );
    report("depth", 1, t);
}

//! Robustness of the policy parser: mutated policy files (`Policy::parse`, then `Engine::new`
//! and a short script of calls), every number at its extremes and strings replaced by odd
//! ones. Each target asserts "no panic" (the panicking input is reported) and that enough
//! mutants reached the engine.
use super::robustness_support;
use crate::support;

use std::{path::Path, time::Instant};

use gatewayd_core::policy::Policy;
use robustness_support::*;
use support::*;

// ---- policies ----

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
    let fixture = gatewayd_testkit::tree::ENGINE_POLICY
        .replace("@ROOT@", root.to_str().unwrap())
        .into_bytes();
    let example = include_bytes!("../../../../policies/example.json").to_vec();
    let demo = include_bytes!("../../../../policies/demo.json").to_vec();
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
    let fixture = gatewayd_testkit::tree::ENGINE_POLICY
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
    let fixture = gatewayd_testkit::tree::ENGINE_POLICY
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

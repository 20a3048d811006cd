//! Secrets sent out in disguise (issue 10's list): each encoding, rewrite, normalisation,
//! fragment and split goes through `Engine::call` and is denied with `secret_egress`, the
//! message naming the encoding found and never the value, the audit records holding no piece
//! of any secret; ordinary egress (prose, code, URLs, data of other things) is allowed.
use crate::support;

use std::io::Write;

use gatewayd_core::engine::{Reason, Session, secrets::base64};
use serde_json::json;
use support::*;

const PASS: &str = "correct-horse-battery-staple-42";
/// A session secret of 12 characters: its fragments are 8, so halves of 6 are only found
/// joined.
const SHORT: &str = "Zq7Xw2Lp9Rt4";

fn post(f: &Fx, s: &mut Session, body: &str) -> (gatewayd_core::engine::Outcome, bool) {
    f.call(
        s,
        "http_post",
        json!({"url": "https://hooks.corp.test/in", "body": body}),
    )
}

/// Denied with `secret_egress`, naming `secret` and the encoding `found as`.
#[track_caller]
fn denied_as(r: (gatewayd_core::engine::Outcome, bool), secret: &str, found_as: &str) {
    let o = denied(r, Reason::SecretEgress);
    let want = format!("`{secret}` (found as {found_as})");
    assert!(
        o.verdict.message.contains(&want),
        "{want}: {}",
        o.verdict.message
    );
}

/// No 10 characters of any secret in the audit records, as they are or lower-cased.
#[track_caller]
fn records_hold_no_secret(f: &Fx) {
    let recs = serde_json::to_string(&f.audit.lock().unwrap().records)
        .unwrap()
        .to_lowercase();
    for v in [DEPLOY_KEY, PASS, SMTP, SHORT] {
        for w in v.as_bytes().windows(10.min(v.len())) {
            let w = std::str::from_utf8(w).unwrap().to_lowercase();
            assert!(!recs.contains(&w), "{w:?} is in the audit records");
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => char::from((c as u8 - b'a' + 13) % 26 + b'a'),
            'A'..='Z' => char::from((c as u8 - b'A' + 13) % 26 + b'A'),
            _ => c,
        })
        .collect()
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b).unwrap();
    gz.finish().unwrap()
}

#[test]
fn each_encoding_is_denied_and_named() {
    let f = fx();
    let mut s = session();
    let k = DEPLOY_KEY;
    let config = format!("{}deploy_key = {k}\n", "[server]\nport = 8080\n".repeat(8));
    let once: String = k.bytes().map(|b| format!("%{b:02X}")).collect();
    let cases: Vec<(String, &str)> = vec![
        (format!("token: {}", rot13(k)), "rot13"),
        (k.chars().rev().collect(), "reversed"),
        (base64(&gzip(config.as_bytes())), "base64(gzip)"),
        (base64(hex(k.as_bytes()).as_bytes()), "base64(hex)"),
        (base64(base64(k.as_bytes()).as_bytes()), "base64(base64)"),
        (data_encoding::BASE32.encode(k.as_bytes()), "base32"),
        (
            data_encoding::BASE32_NOPAD
                .encode(k.as_bytes())
                .to_lowercase(),
            "base32",
        ),
        (
            k.bytes()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
            "hex",
        ),
        (
            format!("key {}", k.to_lowercase()),
            "plain, normalised: case or separators",
        ),
        (once.replace('%', "%25"), "url(url)"),
        (
            k.chars().flat_map(|c| [c, '\u{200B}']).collect(),
            "plain, normalised: invisible characters",
        ),
        (
            k.replace('X', "\u{0425}").replace('v', "\u{03BD}"),
            "plain, normalised: look-alike characters",
        ),
        (format!("it starts {} I think", &k[8..17]), "fragment"),
    ];
    for (body, found_as) in &cases {
        denied_as(post(&f, &mut s, body), "deploy_key", found_as);
    }
    // Cyrillic homoglyphs in the passphrase.
    let look = PASS
        .replace('e', "\u{0435}")
        .replace('a', "\u{0430}")
        .replace('c', "\u{0441}")
        .replace('o', "\u{043E}")
        .replace('p', "\u{0440}");
    denied_as(
        post(&f, &mut s, &look),
        "db_password",
        "plain, normalised: look-alike characters",
    );
    assert_eq!(f.records(), cases.len() + 1);
    records_hold_no_secret(&f);
}

#[test]
fn the_forms_caught_before_are_still_caught() {
    let f = fx();
    let mut s = session();
    let k = DEPLOY_KEY;
    let spaced: String = k.chars().flat_map(|c| [c, ' ']).collect();
    let json_escape: String =
        serde_json::from_str(&format!("\"\\u0064\\u006b{}\"", &k[2..])).unwrap();
    for (body, found_as) in [
        (format!("the key is {k}"), "plain"),
        (base64(k.as_bytes()), "base64"),
        (hex(k.as_bytes()).to_uppercase(), "hex"),
        (
            k.bytes().map(|b| format!("%{b:02X}")).collect::<String>(),
            "url",
        ),
        (json_escape, "plain"),
        (spaced, "plain, normalised: case or separators"),
    ] {
        denied_as(post(&f, &mut s, &body), "deploy_key", found_as);
    }
    records_hold_no_secret(&f);
}

#[test]
fn a_credential_disguised_in_any_tool_is_denied() {
    let f = fx();
    let mut s = session();
    denied_as(
        f.call(
            &mut s,
            "write_file",
            json!({"path": "out/x.txt", "content": format!("pw {}", rot13(SMTP))}),
        ),
        "smtp_password",
        "rot13",
    );
    // A secret (not a credential) may be written to a file: only egress is checked for it.
    allowed(f.call(
        &mut s,
        "write_file",
        json!({"path": "out/y.txt", "content": rot13(DEPLOY_KEY)}),
    ));
}

#[test]
fn split_across_two_calls() {
    let f = fx();
    let mut s = session();
    f.engine.add_session_secret(&mut s, "short", SHORT).unwrap();
    allowed(post(&f, &mut s, &format!("part one: {}", &SHORT[..6])));
    denied_as(
        post(&f, &mut s, &format!("{} is part two", &SHORT[6..])),
        "short",
        "fragment across calls",
    );
    // The other order, and across two different tools that send out.
    let mut s = session();
    f.engine.add_session_secret(&mut s, "short", SHORT).unwrap();
    allowed(post(&f, &mut s, &format!("{} ends it", &SHORT[6..])));
    denied_as(
        f.call(
            &mut s,
            "fetch_url",
            json!({"url": format!("https://api.search.test/q?start={}", &SHORT[..6])}),
        ),
        "short",
        "fragment across calls",
    );
    records_hold_no_secret(&f);
}

#[test]
fn the_window_is_bounded_and_keeps_only_allowed_calls() {
    let f = fx();
    let mut s = session();
    f.engine.add_session_secret(&mut s, "short", SHORT).unwrap();
    // A denied call sent nothing: it is not joined with later calls.
    denied(
        post(&f, &mut s, &format!("{SHORT} {}", &SHORT[..6])),
        Reason::SecretEgress,
    );
    allowed(post(&f, &mut s, &format!("{} is part two", &SHORT[6..])));
    // Eight other calls push the first half out of the window.
    let mut s = session();
    f.engine.add_session_secret(&mut s, "short", SHORT).unwrap();
    allowed(post(&f, &mut s, &format!("part one: {}", &SHORT[..6])));
    for i in 0..8 {
        allowed(post(&f, &mut s, &format!("status update {i}")));
    }
    allowed(post(&f, &mut s, &format!("{} is part two", &SHORT[6..])));
}

#[test]
fn split_across_two_arguments_of_one_call() {
    let f = fx();
    let mut s = session();
    f.engine.add_session_secret(&mut s, "short", SHORT).unwrap();
    denied_as(
        f.call(
            &mut s,
            "http_post",
            json!({"url": format!("https://hooks.corp.test/in/{}", &SHORT[..6]),
                   "body": format!("{} thanks", &SHORT[6..])}),
        ),
        "short",
        "fragment across arguments",
    );
    denied_as(
        f.call(
            &mut s,
            "send_email",
            json!({"to": ["team@corp.test"], "subject": &SHORT[6..], "body": &SHORT[..6]}),
        ),
        "short",
        "fragment across arguments",
    );
    // Halves inside their texts, and another 6 characters after the first half: allowed.
    allowed(f.call(
        &mut s,
        "http_post",
        json!({"url": format!("https://hooks.corp.test/in/{}/x", &SHORT[..6]),
               "body": format!("so {} and", &SHORT[6..])}),
    ));
    allowed(f.call(
        &mut s,
        "http_post",
        json!({"url": format!("https://hooks.corp.test/in/{}", &SHORT[..6]), "body": "Ab3Cd5 thanks"}),
    ));
}

#[test]
fn ordinary_egress_is_allowed() {
    let f = fx();
    let mut s = session();
    let mut x = 99u32;
    let blob: Vec<u8> = (0..3000)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    for body in [
        "Hi team,\n\nNotes from today's standup: we ship on Friday after the infrastructure \
         review. The deploy key was rotated; please update your responsibilities in the wiki. \
         Battery life of the test phones is fine, and the staple order went out.\n\nThanks, Dana"
            .to_owned(),
        "fn main() {\n    let total: u64 = items.iter().map(|i| i.price * i.count).sum();\n    \
         println!(\"{total:08x}\");\n}\n"
            .to_owned(),
        "https://git.corp.test/app/commit/3f2a9c1e8b7d6f5a4c3b2a1f0e9d8c7b6a5f4e3d and \
         https://grafana.corp.test/d/app-latency?from=now-6h&var-host=web-01%2Cweb-02"
            .to_owned(),
        base64(&blob),
        base64(&gzip(
            b"the quarterly report, attached as a compressed text file",
        )),
        hex(&blob[..256]),
        "mac 00:1a:2b:3c:4d:5e, uuid 123e4567-e89b-12d3-a456-426614174000, 2024-05-06 12:30:45"
            .to_owned(),
        "dk_live_ is our prefix for deploy keys; live keys start with it".to_owned(),
    ] {
        allowed(post(&f, &mut s, &body));
    }
}

#[test]
fn a_disguised_secret_quoted_in_a_denial_is_withheld_from_the_message_and_record() {
    let f = fx();
    let mut s = session();
    let hidden = rot13(DEPLOY_KEY);
    // A path outside the sandbox: the denial quotes it.
    let o = denied(
        f.call(
            &mut s,
            "read_file",
            json!({"path": format!("/nowhere/{hidden}/x")}),
        ),
        Reason::Sandbox,
    );
    assert!(
        !o.verdict.message.contains(&hidden),
        "{}",
        o.verdict.message
    );
    assert!(
        o.verdict.message.contains("`deploy_key` (rot13)"),
        "{}",
        o.verdict.message
    );
    // A tool name and an approval id are the model's text too.
    let o = denied(
        f.call(&mut s, &format!("x_{hidden}"), json!({})),
        Reason::NotAllowlisted,
    );
    assert!(
        !o.verdict.message.contains(&hidden) && o.verdict.message.contains("withheld"),
        "{}",
        o.verdict.message
    );
    let call = gatewayd_core::engine::ToolCall::new("weather", json!({"city": "Oslo"}))
        .with_approval(&hex(DEPLOY_KEY.as_bytes()));
    let _ = f.call_full(&mut s, call, json!({"ok": true}));
    let recs = serde_json::to_string(&f.audit.lock().unwrap().records).unwrap();
    assert!(!recs.contains(&hidden), "{recs}");
    assert!(!recs.contains(&hex(DEPLOY_KEY.as_bytes())), "{recs}");
    records_hold_no_secret(&f);
}

//! `SecretSet::find_in_call`: one test per disguise, each with a benign near miss.
use std::io::Write;

use super::*;

const KEY: &str = "dk_live_7Hq2Lm9XvR4tPz8W";
/// 12 characters: its fragments are 8, so halves of 6 are only found joined.
const SHORT: &str = "Zq7Xw2Lp9Rt4";
const PASS: &str = "correct-horse-battery-staple-42";

fn set() -> SecretSet {
    SecretSet::new(&[
        ("deploy_key".into(), KEY.into()),
        ("short".into(), SHORT.into()),
        ("pass".into(), PASS.into()),
    ])
}

fn in_window(texts: &[&str], w: &EgressWindow) -> Option<Match> {
    let m = set().find_in_call(texts, w);
    if let Some(m) = &m {
        never_holds_a_secret(&m.message());
    }
    m
}

fn check(texts: &[&str]) -> Option<Match> {
    in_window(texts, &EgressWindow::new())
}

/// Found, naming `name`, with an encoding that is exactly `encoding`.
fn found(texts: &[&str], name: &str, encoding: &str) {
    let m = check(texts).unwrap_or_else(|| panic!("not found: {encoding}"));
    assert_eq!(m.secret.as_deref(), Some(name), "{m:?}");
    assert_eq!(m.encoding, encoding, "{m:?}");
}

/// The message holds no secret, nor any 8 characters of one, as it is or folded.
fn never_holds_a_secret(msg: &str) {
    let low = msg.to_lowercase();
    for v in [KEY, SHORT, PASS] {
        for w in v.as_bytes().windows(8) {
            let w = std::str::from_utf8(w).expect("ASCII");
            assert!(!low.contains(&w.to_lowercase()), "{msg:?} holds {w:?}");
        }
        let f = String::from_utf8(normalise::folded(v)).expect("ASCII");
        for w in f.as_bytes().windows(8) {
            let w = std::str::from_utf8(w).expect("ASCII");
            assert!(
                !normalise_str(&low).contains(w),
                "{msg:?} holds {w:?} folded"
            );
        }
    }
}

fn normalise_str(s: &str) -> String {
    String::from_utf8(normalise::folded(s)).expect("folding keeps UTF-8")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b).expect("write");
    gz.finish().expect("gzip")
}

fn rot(s: &str) -> String {
    fragments::rot13(s)
}

fn rev(s: &str) -> String {
    s.chars().rev().collect()
}

// ---- forms caught before this matcher: still caught, same names ----

#[test]
fn plain_base64_hex_url_and_spaced_forms() {
    found(&["key: ", &format!("use {KEY} now")], "deploy_key", "plain");
    found(&[&base64(KEY.as_bytes())], "deploy_key", "base64");
    found(
        &[&base64(format!("ab: {KEY}!").as_bytes())],
        "deploy_key",
        "base64",
    );
    found(&[&hex(KEY.as_bytes()).to_uppercase()], "deploy_key", "hex");
    let pct: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    found(&[&pct], "deploy_key", "url");
    let spaced: String = KEY.chars().flat_map(|c| [c, ' ']).collect();
    found(
        &[&spaced],
        "deploy_key",
        "plain, normalised: case or separators",
    );
    let b64 = base64(KEY.as_bytes());
    let groups: Vec<&str> = b64
        .as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).expect("b64"))
        .collect();
    // Groups of 4: a group like `WHZS` reads as a word and cuts the joined run, so the
    // two halves decode to fragments.
    let m = check(&[&groups.join(" ")]).expect("spaced base64");
    assert_eq!(m.secret.as_deref(), Some("deploy_key"));
    assert!(m.encoding.ends_with("base64"), "{m:?}");
    found(
        &[&b64
            .as_bytes()
            .chunks(19)
            .map(|c| std::str::from_utf8(c).expect("b64"))
            .collect::<Vec<_>>()
            .join("\n")],
        "deploy_key",
        "base64",
    );
    // A JSON `\u` escape is plain text once the arguments are parsed.
    let v: serde_json::Value =
        serde_json::from_str(&format!("\"\\u0064\\u006b{}\"", &KEY[2..])).expect("JSON");
    found(&[v.as_str().expect("a string")], "deploy_key", "plain");
    assert_eq!(
        check(&["nothing to see here", "dk_live_ is a prefix"]),
        None
    );
}

// ---- the 13 disguises that passed before ----

#[test]
fn rot13() {
    found(&[&format!("token {}", rot(KEY))], "deploy_key", "rot13");
    assert_eq!(check(&[&rot("dk_live_0Aa1Bb2Cc3Dd4Ee5")]), None);
}

#[test]
fn reversed() {
    found(&[&rev(KEY)], "deploy_key", "reversed");
    found(&[&rot(&rev(KEY))], "deploy_key", "rot13(reversed)");
    assert_eq!(check(&[&rev("Qm3Nb8Vc Xz1Lk5Jh")]), None);
}

#[test]
fn rewrites_of_an_encoding() {
    found(
        &[&rev(&base64(KEY.as_bytes()))],
        "deploy_key",
        "reversed(base64)",
    );
    found(
        &[&rot(&base64(KEY.as_bytes()))],
        "deploy_key",
        "rot13(base64)",
    );
    found(&[&rev(&hex(KEY.as_bytes()))], "deploy_key", "reversed(hex)");
    assert_eq!(check(&[&rev(&base64(b"nothing secret in here"))]), None);
}

#[test]
fn gzip_then_base64() {
    // Compressible text: deflate codes it (a tiny input may be kept as a stored block, whose
    // bytes the exact base64 forms already find).
    let text = base64(&gzip(
        format!("{}key={KEY}\n", "config\n".repeat(20)).as_bytes(),
    ));
    found(&[&text], "deploy_key", "base64(gzip)");
    // Wrapped at 76 columns, as MIME does.
    let big: String = (0..40).map(|i| format!("line {i} of the log\n")).collect();
    let b64 = base64(&gzip(format!("{big}{KEY}").as_bytes()));
    let wrapped: Vec<&str> = b64
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).expect("b64"))
        .collect();
    found(&[&wrapped.join("\r\n")], "deploy_key", "base64(gzip)");
    assert_eq!(check(&[&base64(&gzip(big.as_bytes()))]), None);
}

#[test]
fn zlib_and_raw_deflate_under_base64() {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(format!("{}{KEY}", "abc ".repeat(30)).as_bytes())
        .expect("write");
    found(
        &[&base64(&z.finish().expect("zlib"))],
        "deploy_key",
        "base64(zlib)",
    );
    let mut d = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    d.write_all(format!("{}the key is {KEY}", "abc ".repeat(30)).as_bytes())
        .expect("write");
    found(
        &[&base64(&d.finish().expect("deflate"))],
        "deploy_key",
        "base64(deflate)",
    );
}

#[test]
fn base64_of_hex() {
    found(
        &[&base64(hex(KEY.as_bytes()).as_bytes())],
        "deploy_key",
        "base64(hex)",
    );
    assert_eq!(
        check(&[&base64(hex(b"a harmless message").as_bytes())]),
        None
    );
}

#[test]
fn base64_twice_and_three_times_but_not_four() {
    let once = base64(KEY.as_bytes());
    found(&[&base64(once.as_bytes())], "deploy_key", "base64(base64)");
    let thrice = base64(base64(once.as_bytes()).as_bytes());
    found(&[&thrice], "deploy_key", "base64(base64(base64))");
    // Depth is limited to 3 layers.
    assert_eq!(check(&[&base64(thrice.as_bytes())]), None);
}

#[test]
fn base32_either_case() {
    let b32 = data_encoding::BASE32.encode(KEY.as_bytes());
    found(&[&b32], "deploy_key", "base32");
    found(
        &[&b32.to_lowercase().replace('=', "")],
        "deploy_key",
        "base32",
    );
    assert_eq!(
        check(&[&data_encoding::BASE32.encode(b"weekly status report")]),
        None
    );
}

#[test]
fn hex_with_separators() {
    let colon: Vec<String> = KEY.bytes().map(|b| format!("{b:02x}")).collect();
    found(&[&colon.join(":")], "deploy_key", "hex");
    found(&[&colon.join(".").to_uppercase()], "deploy_key", "hex");
    found(&[&colon.join(" ")], "deploy_key", "hex");
    found(&[&colon.join(", ")], "deploy_key", "hex");
    found(&[&colon.join("-")], "deploy_key", "hex");
    // A MAC address and a date are not long enough to decode, and decode to nothing.
    assert_eq!(
        check(&["mac 00:1a:2b:3c:4d:5e on 2024-05-06 12:30:45"]),
        None
    );
}

#[test]
fn lower_and_upper_cased() {
    found(
        &[&KEY.to_lowercase()],
        "deploy_key",
        "plain, normalised: case or separators",
    );
    found(
        &[&KEY.to_uppercase()],
        "deploy_key",
        "plain, normalised: case or separators",
    );
    assert_eq!(check(&["dk_live_0aa1bb2cc3dd4ee5"]), None);
}

#[test]
fn double_url_encoded() {
    let once: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    let twice = once.replace('%', "%25");
    found(&[&twice], "deploy_key", "url(url)");
    assert_eq!(check(&["100%25 sure%2C thanks"]), None);
}

#[test]
fn zero_width_characters_between_letters() {
    let zw: String = KEY.chars().flat_map(|c| [c, '\u{200B}']).collect();
    found(
        &[&zw],
        "deploy_key",
        "plain, normalised: invisible characters",
    );
    let joiners: String = KEY
        .chars()
        .flat_map(|c| [c, '\u{2060}', '\u{200D}'])
        .collect();
    found(
        &[&joiners],
        "deploy_key",
        "plain, normalised: invisible characters",
    );
    assert_eq!(check(&["hello\u{200B}world, see you\u{200D} soon"]), None);
}

#[test]
fn cyrillic_homoglyphs() {
    // Latin e, a, c, o, p, x → Cyrillic е, а, с, о, р, х; K → Cyrillic К.
    let look = PASS
        .replace('e', "\u{0435}")
        .replace('a', "\u{0430}")
        .replace('c', "\u{0441}")
        .replace('o', "\u{043E}")
        .replace('p', "\u{0440}");
    assert_ne!(look, PASS);
    found(&[&look], "pass", "plain, normalised: look-alike characters");
    let k = KEY.replace('X', "\u{0425}").replace('v', "\u{03BD}");
    found(
        &[&k],
        "deploy_key",
        "plain, normalised: look-alike characters",
    );
    assert_eq!(
        check(&["\u{041F}\u{0440}\u{0438}\u{0432}\u{0435}\u{0442}, mir"]),
        None
    );
}

#[test]
fn split_across_two_calls() {
    // Halves of 12 characters each are fragments of their own.
    let mut w = EgressWindow::new();
    w.push(&[&format!("part one: {}", &KEY[..12])]);
    let m = in_window(&[&format!("{} is part two", &KEY[12..])], &w).expect("second half");
    assert_eq!(
        (m.secret.as_deref(), m.encoding.as_str()),
        (Some("deploy_key"), "fragment")
    );
    // Halves of 6 are not: only the join with the previous call finds them, in either order.
    let mut w = EgressWindow::new();
    w.push(&["part one: Zq7Xw2"]);
    let m = in_window(&["Lp9Rt4 is part two"], &w).expect("joined");
    assert_eq!(
        (m.secret.as_deref(), m.encoding.as_str()),
        (Some("short"), "fragment across calls")
    );
    let mut w = EgressWindow::new();
    w.push(&["Lp9Rt4 ends it"]);
    assert!(in_window(&["begins with Zq7Xw2"], &w).is_some());
    // Near misses: a half alone; another 6 characters after the first half.
    assert_eq!(check(&["Lp9Rt4 is part two"]), None);
    let mut w = EgressWindow::new();
    w.push(&["part one: Zq7Xw2"]);
    assert_eq!(in_window(&["Ab3Cd5 is part two"], &w), None);
}

#[test]
fn split_across_two_arguments() {
    let m = check(&["Zq7Xw2", "Lp9Rt4"]).expect("joined");
    assert_eq!(
        (m.secret.as_deref(), m.encoding.as_str()),
        (Some("short"), "fragment across arguments")
    );
    assert!(check(&["Lp9Rt4", "Zq7Xw2"]).is_some(), "either order");
    let args = serde_json::json!({"a": "x Zq7Xw2", "b": "Lp9Rt4 y"});
    let texts = egress_texts(&args);
    let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
    assert_eq!(texts, ["x Zq7Xw2", "Lp9Rt4 y", "a", "b"]);
    assert!(
        check(&texts).is_some(),
        "keys do not sit between the values"
    );
    assert_eq!(check(&["Zq7Xw2", "Ab3Cd5"]), None);
}

// ---- fragments, limits, false positives ----

#[test]
fn a_third_of_a_secret_is_a_match_and_less_is_not() {
    // Lengths count folded characters: `_` is dropped, and `m` folds to `rn` (UTS 39).
    let m = check(&[&format!("prefix {} suffix", &KEY[14..22])]).expect("8 characters");
    assert_eq!(
        (m.secret.as_deref(), m.encoding.as_str()),
        (Some("deploy_key"), "fragment")
    );
    found(
        &[&base64(&KEY.as_bytes()[3..14])],
        "deploy_key",
        "fragment in base64",
    );
    assert_eq!(check(&[&format!("prefix {} suffix", &KEY[14..21])]), None);
    assert_eq!(
        check(&[&format!("prefix {} suffix", &KEY[5..13])]),
        None,
        "ve_7Hq2L: 7"
    );
    // Random 8-character strings that are not fragments.
    for s in ["q8Zr3Kd1", "Bv5Nc0Qs", "7Hq2Lx9X", "tPz8Wdk_"] {
        assert_eq!(check(&[s]), None, "{s}");
    }
}

#[test]
fn ordinary_text_and_data_pass() {
    let body = "Hi team,\n\nNotes from today's standup: we ship on Friday after the \
        infrastructure review. The deployment checklist is in the wiki; please update your \
        responsibilities there. Commit 3f2a9c1e8b7d6f5a4c3b2a1f0e9d8c7b6a5f4e3d fixed the \
        login bug, see https://git.corp.test/app/commit/3f2a9c1e and /usr/share/doc/app.\n\
        Numbers: 2024-05-06 12:30:45, 3.14159, 1,234,567.\n\nThanks, Alice";
    assert_eq!(check(&["team@corp.test", "Standup", body]), None);
    assert_eq!(check(&[&base64(body.as_bytes())]), None);
    let mut x = 99u32;
    let blob: Vec<u8> = (0..4096)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 24) as u8
        })
        .collect();
    assert_eq!(check(&[&base64(&blob), &hex(&blob[..512])]), None);
}

#[test]
fn passphrase_fragments_are_matched_too() {
    // A known false positive of fragments: a secret made of words shares its fragments with
    // ordinary text (docs/POLICY.md says to register random values).
    found(&["the horse battery"], "pass", "fragment");
}

#[test]
fn a_zip_bomb_is_denied_without_a_name() {
    let bomb = base64(&gzip(&vec![b'a'; 2 << 20]));
    let m = check(&[&bomb]).expect("unchecked");
    assert_eq!(m.secret, None);
    assert!(m.message().contains("1 MiB"), "{}", m.message());
}

#[test]
fn a_set_that_cannot_be_built_denies_every_call() {
    // The matcher could not be built.
    let s = SecretSet::with_builder(&[("k".into(), KEY.into())], |_, _| None);
    let m = s
        .find_in_call(&["hello"], &EgressWindow::new())
        .expect("fail closed");
    assert_eq!(m.secret, None);
    assert_eq!(
        SecretSet::new(&[]).find_in_call(&[KEY], &EgressWindow::new()),
        None
    );
}

#[test]
fn a_secret_of_punctuation_is_still_found_in_its_exact_forms() {
    let v = "!@#$%^&*()[]";
    let s = SecretSet::new(&[("symbols".into(), v.into())]);
    let w = EgressWindow::new();
    for t in [format!("x {v} y"), base64(v.as_bytes()), hex(v.as_bytes())] {
        let m = s.find_in_call(&[&t], &w).unwrap_or_else(|| panic!("{t}"));
        assert_eq!(m.secret.as_deref(), Some("symbols"));
    }
    assert_eq!(s.find_in_call(&["!@#$ but not the rest"], &w), None);
}

#[test]
fn several_sets_are_searched_in_one_pass() {
    // The engine's secrets and a session's own, as the secrets check passes them.
    let engine = SecretSet::new(&[("deploy_key".into(), KEY.into())]);
    let session = SecretSet::new(&[("short".into(), SHORT.into())]);
    let empty = SecretSet::default();
    let w = EgressWindow::new();
    let both = [&engine, &empty, &session];
    let m = find_in_call(&both, &[&rot(SHORT)], &w).expect("the session's secret");
    assert_eq!(
        (m.secret.as_deref(), m.encoding.as_str()),
        (Some("short"), "rot13")
    );
    let m = find_in_call(&both, &[&base64(KEY.as_bytes())], &w).expect("the engine's");
    assert_eq!(m.secret.as_deref(), Some("deploy_key"));
    let m = find_in_call(&both, &["Zq7Xw2", "Lp9Rt4"], &w).expect("split, session set");
    assert_eq!(m.encoding, "fragment across arguments");
    assert_eq!(find_in_call(&both, &["nothing to see here"], &w), None);
    assert_eq!(find_in_call(&[&empty], &[KEY], &w), None);
    // One set that cannot be built fails the whole call closed.
    let broken = SecretSet::with_builder(&[("k".into(), PASS.into())], |_, _| None);
    let m = find_in_call(&[&engine, &broken], &["hello"], &w).expect("fail closed");
    assert_eq!(m.secret, None);
}

#[test]
fn buffers_kept_from_an_earlier_check_are_not_read_again() {
    // A call of three texts leaves three folded buffers with the thread; the next call, of
    // fewer texts, must join only its own (the first half of SHORT was in the third text).
    found(
        &["note Zq7Xw2", "Lp9Rt4 thanks", "first half: Zq7Xw2"],
        "short",
        "fragment across arguments",
    );
    assert_eq!(check(&["Lp9Rt4 is the rest"]), None);
    assert_eq!(check(&["Lp9Rt4 is the rest", "unrelated"]), None);
    // And the same call still finds what it holds after a larger one.
    found(
        &["x Zq7Xw2", "Lp9Rt4 y"],
        "short",
        "fragment across arguments",
    );
}

use super::*;
use hyper::header::HeaderValue;
use serde_json::json;

const REAL: &str = "ghp_the_real_token_0123456789";
const SECRET: &str = "sk-live-do-not-send-0123456789";

fn policy() -> Policy {
    let text = json!({"version": 1,
    "secrets": {"db": {"value": SECRET}},
    "credentials": {"gh": {"value": REAL}},
    "network": {"egress": [
        {"host": "git.test", "port": 443,
         "http": [{"methods": ["GET", "HEAD"]}, {"methods": ["POST"], "path": "*/git-upload-pack"}],
         "inject": [{"credential": "gh", "header": "Authorization", "env": "GH_TOKEN"}]},
        {"host": "*.other.test", "inspect": true},
        {"host": "plain.test"}
    ]}})
    .to_string();
    Policy::parse(&text, Path::new("p.json")).unwrap()
}

fn prepared() -> (Inspection, Policy, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let p = policy();
    let i = Inspection::prepare(&p, dir.path(), "s1").unwrap().unwrap();
    (i, p, dir)
}

/// The agent's placeholder for `GH_TOKEN`.
fn placeholder(i: &Inspection) -> String {
    i.env()
        .into_iter()
        .find(|(k, _)| k == "GH_TOKEN")
        .unwrap()
        .1
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

#[test]
fn the_bundle_and_the_environment() {
    let (i, _, dir) = prepared();
    let env: std::collections::BTreeMap<_, _> = i.env().into_iter().collect();
    let bundle = dir.path().join("s1.ca/ca-bundle.pem");
    for v in CA_VARIABLES {
        assert_eq!(env[v], bundle.to_string_lossy());
    }
    let text = std::fs::read_to_string(&bundle).unwrap();
    assert!(
        text.ends_with(&i.ca.pem()),
        "the session CA closes the bundle"
    );
    assert!(!text.contains("PRIVATE KEY"));
    let ph = &env["GH_TOKEN"];
    assert!(ph.starts_with("gatewayd-placeholder-") && !ph.contains(REAL));
    assert!(!env.values().any(|v| v.contains(REAL)));
    drop(i);
    assert!(!bundle.exists(), "removed with the session");
}

#[test]
fn rules_then_placeholders_then_secrets() {
    let (i, p, _d) = prepared();
    let git = &p.network.egress[0];
    let ph = placeholder(&i);
    let host = ("git.test", 443);
    let check = |h: (&str, u16), m: &str, t: &str, hs: &mut HeaderMap, body: &str| {
        let e = if h.0 == "git.test" {
            git
        } else {
            &p.network.egress[1]
        };
        i.check(e, h, (m, t), hs, body.as_bytes())
            .map_err(|r| r.reason)
    };
    // Allowed, and the placeholder swapped in its own header on its own host.
    let mut h = headers(&[("authorization", &format!("Bearer {ph}"))]);
    assert_eq!(
        check(
            host,
            "GET",
            "/r.git/info/refs?service=git-upload-pack",
            &mut h,
            ""
        ),
        Ok(())
    );
    assert_eq!(h["authorization"], format!("Bearer {REAL}").as_str());
    // Refused by method/path.
    let mut h = HeaderMap::new();
    assert_eq!(
        check(host, "POST", "/r.git/git-receive-pack", &mut h, ""),
        Err("egress_http_not_allowed")
    );
    assert_eq!(
        check(host, "POST", "/r.git/git-upload-pack", &mut h, "0032want"),
        Ok(())
    );
    // The placeholder in another header, the body, the path, base64'd, or to another host.
    for (hs, t, body) in [
        (vec![("x-token", ph.clone())], "/", String::new()),
        (vec![], "/", format!("token={ph}")),
        (vec![], &*format!("/?t={ph}"), String::new()),
        (
            vec![],
            "/",
            gatewayd_core::engine::secrets::base64(ph.as_bytes()),
        ),
    ] {
        let mut h = HeaderMap::new();
        for (k, v) in hs {
            h.insert(k, HeaderValue::from_str(&v).unwrap());
        }
        assert_eq!(
            check(host, "GET", t, &mut h, &body),
            Err("egress_placeholder"),
            "{t} {body}"
        );
    }
    let mut h = headers(&[("authorization", &format!("Bearer {ph}"))]);
    assert_eq!(
        check(("a.other.test", 443), "GET", "/", &mut h, ""),
        Err("egress_placeholder")
    );
    // A secret, plain or encoded, in a header or the body.
    let mut h = headers(&[("x-note", SECRET)]);
    assert_eq!(check(host, "GET", "/", &mut h, ""), Err("egress_secret"));
    let mut h = HeaderMap::new();
    let hex: String = SECRET.bytes().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        check(("a.other.test", 443), "PUT", "/", &mut h, &hex),
        Err("egress_secret")
    );
    // The real credential, had the agent learnt it, is a secret too.
    let mut h = headers(&[("authorization", &format!("Bearer {REAL}"))]);
    assert_eq!(
        check(("a.other.test", 443), "GET", "/", &mut h, ""),
        Err("egress_secret")
    );
}

#[test]
fn plain_heads_to_other_hosts() {
    let (i, _, _d) = prepared();
    let ph = placeholder(&i);
    let head = format!("GET / HTTP/1.1\r\nHost: plain.test\r\nAuthorization: Bearer {ph}\r\n\r\n");
    assert_eq!(
        i.placeholder_in(head.as_bytes()).as_deref(),
        Some("placeholder GH_TOKEN")
    );
    assert_eq!(
        i.placeholder_in(b"GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n"),
        None
    );
}

#[test]
fn a_placeholder_inside_basic_credentials_is_swapped_there_only() {
    let (i, p, _d) = prepared();
    let ph = placeholder(&i);
    let b64 = |s: String| gatewayd_core::engine::secrets::base64(s.as_bytes());
    let (git, other) = (&p.network.egress[0], &p.network.egress[1]);
    let check =
        |e, h, hs: &mut HeaderMap| i.check(e, h, ("GET", "/"), hs, b"").map_err(|r| r.reason);
    // As a password (git's credential helpers, `curl -u`) and as a user, scheme in any case.
    for (sent, got) in [
        (
            format!("Basic {}", b64(format!("x-access-token:{ph}"))),
            format!("Basic {}", b64(format!("x-access-token:{REAL}"))),
        ),
        (
            format!("basic {}", b64(format!("{ph}:x-oauth-basic"))),
            format!("Basic {}", b64(format!("{REAL}:x-oauth-basic"))),
        ),
    ] {
        let mut h = headers(&[("authorization", &sent)]);
        assert_eq!(check(git, ("git.test", 443), &mut h), Ok(()), "{sent}");
        assert_eq!(h["authorization"], got.as_str());
        // To a host it is not bound to: refused, found in the base64.
        let mut h = headers(&[("authorization", &sent)]);
        assert_eq!(
            check(other, ("a.other.test", 443), &mut h),
            Err("egress_placeholder")
        );
        assert_eq!(h["authorization"], sent.as_str(), "left as it was");
    }
    // The rest of the credentials is still checked for secrets.
    let mut h = headers(&[(
        "authorization",
        &format!("Basic {}", b64(format!("{SECRET}:{ph}"))),
    )]);
    assert_eq!(check(git, ("git.test", 443), &mut h), Err("egress_secret"));
    // Not `Basic`, or not base64: nothing to swap, and the placeholder is misplaced.
    let mut h = headers(&[("x-token", &format!("Basic {}", b64(format!("u:{ph}"))))]);
    assert_eq!(
        check(git, ("git.test", 443), &mut h),
        Err("egress_placeholder")
    );
}

#[test]
fn a_later_part_of_a_large_body_is_checked_for_placeholders_and_secrets() {
    let (i, _, _d) = prepared();
    let ph = placeholder(&i);
    let part = |s: String| i.check_body_part(&s).map_err(|r| r.reason);
    assert_eq!(part("plain words ".repeat(1000)), Ok(()));
    assert_eq!(part(format!("x={ph}&y=1")), Err("egress_placeholder"));
    assert_eq!(part(format!("note: {SECRET}")), Err("egress_secret"));
    assert!(
        i.longest_form() >= 3 * ph.len().max(SECRET.len()),
        "a window overlap holds any form whole"
    );
}

//! The sandbox's path checks against real files in a temporary directory.
use super::*;
use crate::policy::Network;

#[test]
fn protected_names_apply_under_root_and_writable_roots_to_files_made_later() {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let sb: Sandbox = serde_json::from_value(serde_json::json!({
        "root": ws, "readable": [elsewhere.path()],
        "protected_names": [".env", ".env.*", "*.pem"]}))
    .unwrap();
    let view = SandboxView::new(&sb);
    // Made after the view: names are matched at each call.
    for dir in ["svc", "tls"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    for f in [
        ".env",
        "svc/.env.local",
        "tls/server.pem",
        "svc/env.txt",
        ".envrc",
    ] {
        std::fs::write(ws.join(f), "K=v").unwrap();
    }
    std::fs::write(elsewhere.path().join(".env"), "K=v").unwrap();
    for (path, access, refused) in [
        (ws.join(".env"), PathAccess::Read, true),
        (ws.join("svc/.env.local"), PathAccess::Read, true),
        (ws.join("tls/server.pem"), PathAccess::Read, true),
        (ws.join("svc/env.txt"), PathAccess::Read, false),
        (ws.join(".envrc"), PathAccess::Read, false),
        (elsewhere.path().join(".env"), PathAccess::Read, false),
        // A name that names nothing: nothing to read (a shell word such as jq's
        // `.key`), but writing would make it.
        (ws.join("new/.env"), PathAccess::Read, false),
        (ws.join("new/.env"), PathAccess::Write, true),
    ] {
        let r = view.check("x", &resolved(&view, &path), access);
        assert_eq!(r.is_err(), refused, "{}: {r:?}", path.display());
        if let Err(m) = r {
            assert!(m.contains("sandbox.protected_names"), "{m}");
        }
    }
}

#[test]
fn names_pass_a_protected_file_below_and_read_only_paths_take_no_write() {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join("keys")).unwrap();
    std::fs::write(ws.join(".env"), "x").unwrap();
    std::fs::write(ws.join(".git/config"), "").unwrap();
    let sb: Sandbox = serde_json::from_value(serde_json::json!({
        "root": ws, "writable": [ws], "protected": [ws.join(".env")],
        "read_only": [ws.join(".git/config"), ws.join(".git/hooks")]}))
    .unwrap();
    let view = SandboxView::new(&sb);
    let check = |p: &Path, a| view.check("x", &resolved(&view, p), a);
    assert!(
        check(&ws, PathAccess::Names).is_ok(),
        "a protected file's name"
    );
    assert!(check(&ws, PathAccess::Tree).is_err(), "its contents");
    let config = ws.join(".git/config");
    assert!(check(&config, PathAccess::Read).is_ok());
    assert!(check(&config, PathAccess::Write).is_err());
    assert!(check(&ws.join(".git/hooks/pre-commit"), PathAccess::Write).is_err());
    assert!(
        check(&ws.join(".git"), PathAccess::Write).is_err(),
        "removing .git"
    );
    assert!(check(&ws.join(".git/index"), PathAccess::Write).is_ok());
    let protected_dir: Sandbox = serde_json::from_value(serde_json::json!({
        "root": ws, "readable": [ws], "protected": [ws.join("keys")]}))
    .unwrap();
    let view = SandboxView::new(&protected_dir);
    assert!(
        view.check("x", &resolved(&view, &ws), PathAccess::Names)
            .is_err(),
        "a directory's entries"
    );
}

#[test]
fn a_protected_file_itself_may_be_looked_at_but_not_a_protected_directory() {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir_all(ws.join("keys")).unwrap();
    std::fs::write(ws.join("keys/id"), "k").unwrap();
    std::fs::write(ws.join(".env"), "x").unwrap();
    std::fs::write(ws.join("server.pem"), "x").unwrap();
    let sb: Sandbox = serde_json::from_value(serde_json::json!({
        "root": ws, "readable": [ws], "protected": [ws.join(".env"), ws.join("keys")],
        "protected_names": ["*.pem"]}))
    .unwrap();
    let view = SandboxView::new(&sb);
    let look = |p: &Path| view.check_metadata("x", &resolved(&view, p));
    let read = |p: &Path| view.check("x", &resolved(&view, p), PathAccess::Read);
    for file in [
        ws.join(".env"),
        ws.join("server.pem"),
        ws.join(".env.absent"),
    ] {
        assert!(
            look(&file).is_ok(),
            "{}: its name and metadata",
            file.display()
        );
    }
    assert!(read(&ws.join(".env")).is_err() && read(&ws.join("server.pem")).is_err());
    for inside in [ws.join("keys"), ws.join("keys/id"), ws.join("keys/absent")] {
        assert!(
            look(&inside).is_err(),
            "{}: what a protected directory holds",
            inside.display()
        );
    }
    assert!(
        look(Path::new("/etc/hostname")).is_err(),
        "outside the readable roots"
    );
}

#[test]
fn urls() {
    assert_eq!(
        parse_url("https://API.example.com./x?y").unwrap(),
        Dest {
            host: "api.example.com".into(),
            port: 443
        }
    );
    assert_eq!(parse_url("http://[::1]:8080/").unwrap().port, 8080);
    assert_eq!(parse_url("http://10.0.0.1:81").unwrap().host, "10.0.0.1");
    for bad in [
        "ftp://x",
        "https://good.com@evil.com/",
        "example.com",
        "https://ev%69l.com/",
        "https://:80",
        "http://a:99999",
    ] {
        assert!(parse_url(bad).is_err(), "{bad}");
    }
    for odd in [
        "https://evil.com\\@good.com",
        "https://good.com /x",
        "https://a.com\t/x",
        "https://é.com",
    ] {
        assert!(parse_url(odd).is_err(), "{odd}");
    }
    assert_eq!(
        parse_url("https://evil.com#@good.com").unwrap().host,
        "evil.com"
    );
}

#[test]
fn egress_matching() {
    let n: Network = serde_json::from_str(
        r#"{"egress": [{"host": "api.example.com", "port": 443}, {"host": "*.docs.rs"}, {"cidr": "10.0.0.0/8"}]}"#,
    )
    .unwrap();
    let e = EgressView::new(&n);
    let ok = |u| e.allows(&parse_url(u).unwrap());
    assert!(ok("https://api.example.com/v1"));
    assert!(!ok("http://api.example.com/v1"));
    assert!(!ok("https://api.example.com.evil.com/"));
    assert!(ok("https://x.docs.rs/"));
    assert!(!ok("https://docs.rs.evil/"));
    assert!(ok("http://10.1.2.3/"));
    assert!(!ok("http://11.1.2.3/"));
}

#[test]
fn loopback_is_left_to_the_kernel_only_when_it_judges_it() {
    let mut e = EgressView::new(&Network::default());
    let loopback = [
        "http://localhost:3000/health",
        "http://LOCALHOST.:8080/",
        "http://127.0.0.1:5173/",
        "http://127.9.8.7/",
        "http://[::1]:8000/",
    ];
    // Neither the kernel's loopback nor what only looks like it: a shorthand or decimal
    // address, the unspecified address, a name under `localhost`, another host.
    let elsewhere = [
        "http://127.1:3000/",
        "http://2130706433/",
        "http://0.0.0.0:3000/",
        "http://[::]:3000/",
        "http://evil.localhost/",
        "http://localhost.evil.example/",
        "http://10.0.0.1/",
    ];
    let allows = |e: &EgressView, u: &str| e.allows(&parse_url(u).unwrap());
    for u in loopback.iter().chain(&elsewhere) {
        assert!(!allows(&e, u), "{u}: refused by the allowlist alone");
    }
    assert!(!e.allows_address("127.0.0.1".parse().unwrap()));
    let step = e.next_step(&parse_url("http://localhost:3000/").unwrap(), "other");
    assert!(
        step.contains(r#"{"host": "localhost", "port": 3000}"#),
        "{step}"
    );
    let step = e.next_step(&parse_url("http://127.0.0.1:3000/").unwrap(), "other");
    assert!(
        step.contains(r#"{"cidr": "127.0.0.1/32", "port": 3000}"#),
        "{step}"
    );
    assert!(step.contains("gatewayd run"), "{step}");
    let step = e.next_step(&parse_url("http://[::1]:8000/").unwrap(), "other");
    assert!(
        step.contains(r#"{"cidr": "::1/128", "port": 8000}"#),
        "{step}"
    );
    assert_eq!(
        e.next_step(&parse_url("https://x.example/").unwrap(), "other"),
        "other"
    );
    e.leave_loopback_to_kernel();
    for u in loopback {
        assert!(allows(&e, u), "{u}: the kernel's to judge");
    }
    for u in elsewhere {
        assert!(!allows(&e, u), "{u}: still the allowlist's");
    }
    assert!(e.allows_address("127.0.0.1".parse().unwrap()));
    assert!(e.allows_address("::1".parse().unwrap()));
    assert!(!e.allows_address("0.0.0.0".parse().unwrap()));
}

#[test]
fn file_uris_resolve_to_their_path() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(d.path()).unwrap();
    std::fs::write(base.join("a b.txt"), "x").unwrap();
    let view = SandboxView {
        root: Some(base.clone()),
        ..SandboxView::default()
    };
    let uri = format!("file://{}/a%20b.txt", base.display());
    assert_eq!(view.resolve(&uri).unwrap().path, base.join("a b.txt"));
    let localhost = format!("file://localhost{}/a%20b.txt", base.display());
    assert_eq!(view.resolve(&localhost).unwrap().path, base.join("a b.txt"));
    // As written (what a shell command opens): a relative path under the root.
    assert_eq!(
        view.resolve_path("file:///etc/passwd").unwrap().path,
        base.join("file:/etc/passwd")
    );
    let remote = view.resolve("file://evil.example/etc/passwd").unwrap_err();
    assert!(remote.contains("host `evil.example`"), "{remote}");
    let url = view.resolve("https://example.com/x").unwrap_err();
    assert!(url.contains("`https:` URL, not a path"), "{url}");
    assert!(view.resolve("file:///a%zz").is_err());
    assert!(view.resolve("file:///a%00b").is_err());
    assert_eq!(
        view.resolve("notes.txt").unwrap().path,
        base.join("notes.txt"),
        "plain paths as before"
    );
}

#[test]
fn canonicalize_missing_tail() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir(base.join("a")).unwrap();
    assert_eq!(
        canonicalize(&base.join("a/../a/new/f")).unwrap(),
        base.join("a/new/f")
    );
    // `..` below a name not yet made undoes that name, then goes on from the real parent
    assert_eq!(
        canonicalize(&base.join("a/new/../../x")).unwrap(),
        base.join("x")
    );
    std::os::unix::fs::symlink(base.join("a"), base.join("link")).unwrap();
    assert_eq!(
        canonicalize(&base.join("new/deeper/../../link/..")).unwrap(),
        base,
        "back in the existing part, a symlink is followed again"
    );
    std::fs::create_dir(base.join("a/b")).unwrap();
    std::os::unix::fs::symlink(base.join("a/b"), base.join("deep")).unwrap();
    assert_eq!(
        canonicalize(&base.join("new/../deep/..")).unwrap(),
        base.join("a"),
        "`..` of a symlink's target is the target's parent"
    );
    std::os::unix::fs::symlink(base.join("nowhere"), base.join("dangling")).unwrap();
    assert!(canonicalize(&base.join("dangling")).is_err());
}

#[test]
fn is_under_is_starts_with_for_normal_paths() {
    for (p, root) in [
        ("/a/b", "/a"),
        ("/a", "/a"),
        ("/ab", "/a"),
        ("/a", "/a/b"),
        ("/a/b", "/"),
        ("/", "/"),
        ("/a/b/c", "/a/b/"),
        ("/a/bc", "/a/b/"),
    ] {
        let (p, root) = (Path::new(p), Path::new(root));
        assert_eq!(
            is_under(p, root),
            p.starts_with(root),
            "{p:?} under {root:?}"
        );
    }
}

#[test]
fn canonicalize_resolves_dot_dot_after_the_symlink_it_follows() {
    let d = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(d.path()).unwrap();
    std::fs::create_dir_all(base.join("real/sub")).unwrap();
    std::fs::write(base.join("real/f"), "x").unwrap();
    std::fs::write(base.join("f"), "decoy").unwrap();
    std::os::unix::fs::symlink(base.join("real/sub"), base.join("link")).unwrap();
    // `link/..` is `real`, where the symlink leads, not `base` as the words say.
    assert_eq!(
        canonicalize(&base.join("link/../f")).unwrap(),
        base.join("real/f")
    );
    assert_eq!(
        canonicalize(&base.join("real/sub/../f")).unwrap(),
        base.join("real/f")
    );
    assert_eq!(
        canonicalize(&base.join("./real//f")).unwrap(),
        base.join("real/f")
    );
}

/// A path as the engine checks it: resolved through the view.
fn resolved(view: &SandboxView, p: &Path) -> Resolved {
    view.resolve_path(&p.to_string_lossy()).unwrap()
}

/// With `private_tmp`, a directory of the host's `/tmp` that holds a path the policy names is
/// the host's: a write through a tool is refused there (the rest of `/tmp` is the session's
/// scratch, writable), and allowed below a writable path inside it. A home under `/tmp` (as
/// in a test harness) is such a directory through its protected paths.
#[test]
fn a_read_only_bind_of_the_hosts_tmp_takes_no_write_but_a_writable_path_inside_does() {
    let ro = tempfile::Builder::new()
        .prefix("gw-view-ro")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::create_dir(ro.path().join("out")).unwrap();
    let sb = |private: bool| -> Sandbox {
        serde_json::from_value(serde_json::json!({
            "readable": [ro.path()], "writable": [ro.path().join("out"), "/w"],
            "private_tmp": private}))
        .unwrap()
    };
    let (view, off) = (SandboxView::new(&sb(true)), SandboxView::new(&sb(false)));
    let write = |v: &SandboxView, p: &Path| v.check("x", &resolved(v, p), PathAccess::Write);
    let e = write(&view, &ro.path().join("f")).unwrap_err();
    assert!(e.contains("outside every writable root"), "{e}");
    assert!(write(&view, &ro.path().join("out/f")).is_ok());
    assert!(write(&view, Path::new("/tmp/elsewhere")).is_ok());
    let e = write(&off, &ro.path().join("f")).unwrap_err();
    assert!(e.contains("outside every writable root"), "{e}");
    let read = view.check(
        "x",
        &resolved(&view, &ro.path().join("f")),
        PathAccess::Read,
    );
    assert!(read.is_ok(), "{read:?}");
}

#[test]
fn a_home_under_tmp_is_the_hosts_with_a_tmp_of_the_sessions_own() {
    let d = tempfile::Builder::new()
        .prefix("gw-view-home")
        .tempdir_in("/tmp")
        .unwrap();
    let (home, ws) = (d.path().join("home"), d.path().join("ws"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let sb: Sandbox = serde_json::from_value(serde_json::json!({
        "root": ws, "readable": [ws], "writable": [ws],
        "protected": [home.join(".ssh")], "private_tmp": true}))
    .unwrap();
    let view = SandboxView::new(&sb);
    let write = |p: &Path| view.check("x", &resolved(&view, p), PathAccess::Write);
    assert!(write(&home.join(".bashrc")).is_err());
    let read = |p: &Path| view.check("x", &resolved(&view, p), PathAccess::Read);
    assert!(read(&home.join("a.txt")).is_err());
    assert!(read(Path::new("/tmp/scratch.txt")).is_ok());
    assert!(write(&ws.join("notes.md")).is_ok());
    assert!(write(Path::new("/tmp/scratch.txt")).is_ok());
}

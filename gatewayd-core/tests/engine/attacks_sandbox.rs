//! Attacks on the sandbox: paths outside the root, `..`, symlinks and hard links to protected
//! files (also made after start), `/proc` links and loops, files protected at run time, and URL
//! destinations. Every refusal asserts the decision, the reason code, and that the tool's
//! handler never ran.
use crate::support;

use gatewayd_core::engine::Reason;
use serde_json::json;
use support::*;

// ---- sandbox ----

#[test]
fn path_outside_root() {
    let f = fx();
    let mut s = session();
    for p in [f.p("outside/data.txt"), "/etc/passwd".into(), "/".into()] {
        denied(
            f.call(&mut s, "read_file", json!({"path": p})),
            Reason::Sandbox,
        );
    }
}

#[test]
fn dotdot_traversal() {
    let f = fx();
    let mut s = session();
    for p in [
        "../outside/data.txt".to_string(),
        "src/../../home/.ssh/id_rsa".into(),
        f.p("work/../home/.ssh/id_rsa"),
        f.p("work/src/../../outside/data.txt"),
    ] {
        denied(
            f.call(&mut s, "read_file", json!({"path": p})),
            Reason::Sandbox,
        );
    }
    // `..` after a name that does not exist yet undoes that name: out/nope/../../.env is .env
    for p in [
        "out/nope/../../.env",
        "out/nope/deeper/../../../.env",
        "out/nope/../../../outside/data.txt",
    ] {
        denied(
            f.call(&mut s, "write_file", json!({"path": p, "content": "x"})),
            Reason::Sandbox,
        );
    }
}

#[test]
fn symlink_to_protected_file() {
    let f = fx();
    let mut s = session();
    denied(
        f.call(&mut s, "read_file", json!({"path": "key-link"})),
        Reason::Sandbox,
    );
    denied(
        f.call(
            &mut s,
            "write_file",
            json!({"path": "out/evil-link", "content": "x"}),
        ),
        Reason::Sandbox,
    );
    // a dangling symlink (into a protected directory) cannot be resolved
    denied(
        f.call(
            &mut s,
            "write_file",
            json!({"path": "out/dangling", "content": "x"}),
        ),
        Reason::Sandbox,
    );
}

#[test]
fn hard_link_to_protected_file() {
    let f = fx();
    let mut s = session();
    denied(
        f.call(&mut s, "read_file", json!({"path": "env-copy"})),
        Reason::Sandbox,
    );
    // a hard link to a file inside a protected directory
    denied(
        f.call(&mut s, "read_file", json!({"path": "key-copy"})),
        Reason::Sandbox,
    );
    denied(
        f.call(&mut s, "run_shell", json!({"command": "cat key-copy"})),
        Reason::Sandbox,
    );
}

#[test]
fn child_of_protected_directory() {
    let f = fx();
    let mut s = session();
    denied(
        f.call(
            &mut s,
            "read_file",
            json!({"path": f.p("home/.ssh/id_rsa")}),
        ),
        Reason::Sandbox,
    );
    denied(
        f.call(
            &mut s,
            "read_file",
            json!({"path": f.p("home/.ssh/not_there_yet")}),
        ),
        Reason::Sandbox,
    );
    denied(
        f.call(
            &mut s,
            "write_file",
            json!({"path": "out/keep/new.txt", "content": "x"}),
        ),
        Reason::Sandbox,
    );
    denied(
        f.call(&mut s, "read_file", json!({"path": ".env"})),
        Reason::Sandbox,
    );
}

#[test]
fn writes_need_a_writable_root_and_spare_protected_descendants() {
    let f = fx();
    let mut s = session();
    denied(
        f.call(
            &mut s,
            "write_file",
            json!({"path": "notes.txt", "content": "x"}),
        ),
        Reason::Sandbox,
    );
    denied(
        f.call(&mut s, "delete_file", json!({"path": "out/keep"})),
        Reason::Sandbox,
    );
    denied(
        f.call(&mut s, "delete_file", json!({"path": "out"})),
        Reason::Sandbox,
    );
}

#[test]
fn recursive_search_reaching_a_protected_path() {
    let f = fx();
    let mut s = session();
    denied(
        f.call(&mut s, "search_files", json!({"root": ".", "word": "KEY"})),
        Reason::Sandbox,
    );
}

#[test]
fn url_destinations() {
    let f = fx();
    let mut s = session();
    for u in [
        "https://evil.test/x",
        "https://api.search.test.evil.test/",
        "http://api.search.test/",
        "http://10.21.0.1/",
    ] {
        denied(
            f.call(&mut s, "fetch_url", json!({"url": u})),
            Reason::Sandbox,
        );
    }
    for u in [
        "https://api.search.test@evil.test/",
        "file:///etc/passwd",
        "gopher://x",
        "not a url",
    ] {
        denied(
            f.call(&mut s, "fetch_url", json!({"url": u})),
            Reason::ArgRule,
        );
    }
}

#[test]
fn protected_at_run_time_policy_and_audit_files() {
    let mut f = fx();
    let mut s = session();
    allowed(f.call(&mut s, "read_file", json!({"path": "notes.txt"})));
    let notes = f.root.join("work/notes.txt");
    f.engine.protect(&notes);
    denied(
        f.call(&mut s, "read_file", json!({"path": "notes.txt"})),
        Reason::Sandbox,
    );
    denied(
        f.call(&mut s, "run_shell", json!({"command": "cat notes.txt"})),
        Reason::Sandbox,
    );
}

#[test]
fn hard_link_made_after_start() {
    let f = fx();
    let mut s = session();
    std::fs::write(f.root.join("home/.ssh/later_key"), "KEY").unwrap();
    std::fs::hard_link(
        f.root.join("home/.ssh/later_key"),
        f.root.join("work/later-copy"),
    )
    .unwrap();
    denied(
        f.call(&mut s, "read_file", json!({"path": "later-copy"})),
        Reason::Sandbox,
    );
}

#[test]
fn proc_links_loops_and_odd_paths() {
    let f = fx();
    let mut s = session();
    std::os::unix::fs::symlink(f.root.join("work/loop-b"), f.root.join("work/loop-a")).unwrap();
    std::os::unix::fs::symlink(f.root.join("work/loop-a"), f.root.join("work/loop-b")).unwrap();
    for p in [
        format!("/proc/self/root{}", f.p("home/.ssh/id_rsa")),
        format!("/proc/self/cwd/../../../..{}", f.p("home/.ssh/id_rsa")),
        "loop-a".to_string(),
        "loop-a/x".to_string(),
        format!("{}/{}", f.p("work"), "x/".repeat(3000)),
        String::new(),
        "notes.txt\0.png".to_string(),
    ] {
        denied(
            f.call(&mut s, "read_file", json!({"path": p})),
            Reason::Sandbox,
        );
    }
}

//! The daemon's side of the secrets a session starts with (its protected files, its agent's
//! environment) and of suspicion (a kernel denial of a protected file counts toward the
//! session's Rule of Two, as the policy's `suspicion` says).
use crate::support;

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use gateway_common::Reason;
use gatewayd::{
    daemon::{Gateway, HookFuture, TripHook, TrippedSession, peer::Peer},
    protocol::SessionOpen,
};
use gatewayd_core::engine::Legs;
use serde_json::{Value, json};
use support::{Daemon, records};

const KEY_LINE: &str = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";
const TOKEN: &str = "ghp_0penedW1thTheSess10nToken";

/// The standard test policy, with a protected directory holding a private key, and
/// `patch` applied at the top level.
fn start(patch: Value) -> Daemon {
    Daemon::start_policy(move |root: &Path| {
        let ssh = root.join(".ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        let key = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_LINE}\n-----END OPENSSH PRIVATE KEY-----\n"
        );
        std::fs::write(ssh.join("id_ed25519"), key).unwrap();
        let mut p = support::policy(root);
        p["sandbox"]["protected"] = json!([ssh]);
        for (k, v) in patch.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn me() -> Peer {
    Peer::from_parts(std::process::id() as i32, 0, 0)
}

fn open_params(id: &str) -> SessionOpen {
    SessionOpen {
        session: Some(id.to_owned()),
        user: "alice".into(),
        scopes: Vec::new(),
    }
}

fn legs(gw: &Gateway, id: &str) -> Legs {
    rt().block_on(async {
        gw.sessions()
            .get(id)
            .unwrap()
            .state
            .lock()
            .await
            .session
            .legs()
    })
}

#[test]
fn a_session_starts_with_its_protected_files_and_environment_as_secrets() {
    let d = start(json!({}));
    let env = vec![
        ("GATEWAYD_TEST_TOKEN".to_owned(), TOKEN.to_owned()),
        ("EDITOR".to_owned(), "vim-with-plugins".to_owned()),
    ];
    let me = me();
    let cg = me.cgroup.clone().unwrap();
    rt().block_on(d.gw.open_with_env(&cg, &me, open_params("s"), Some(env)))
        .unwrap();
    let mut c = d.client();
    let send = |c: &mut gatewayd::protocol::client::Client, body: &str| {
        c.call(
            "call/decide",
            json!({"session": "s", "call": {"tool": "send_email", "arguments": {"body": body}}}),
        )
        .unwrap()
    };
    let r = send(&mut c, &format!("key: {KEY_LINE}"));
    assert_eq!(r["reason"], "secret_egress", "{r}");
    assert!(
        r["message"].as_str().unwrap().contains("id_ed25519:line 2"),
        "{r}"
    );
    let r = send(&mut c, TOKEN);
    assert_eq!(r["reason"], "secret_egress", "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("env:GATEWAYD_TEST_TOKEN"),
        "{r}"
    );
    assert_eq!(send(&mut c, "I use vim-with-plugins")["decision"], "allow");
    // A session opened over the socket starts with the files' values too.
    c.call("session/open", json!({"session": "t", "user": "bob"}))
        .unwrap();
    let r = c
        .call(
            "call/decide",
            json!({"session": "t", "call": {"tool": "send_email", "arguments": {"body": KEY_LINE}}}),
        )
        .unwrap();
    assert_eq!(r["reason"], "secret_egress", "{r}");
    // session/list shows the secrets added with secrets/add only.
    let (added, started) = rt().block_on(async {
        let slot = d.gw.sessions().get("t").unwrap();
        let st = slot.state.lock().await;
        (st.session.secret_names(), st.session.start_secret_names())
    });
    assert!(added.is_empty(), "{added:?}");
    assert!(
        started.iter().any(|n| n.ends_with("id_ed25519:line 2")),
        "{started:?}"
    );
    // The record of the open names them, and no value reaches the log.
    let audit = d.audit.clone().unwrap();
    let recs = records(&audit);
    let open = recs
        .iter()
        .find(|r| r["reason"] == "session_open" && r["session"] == "s")
        .unwrap();
    let names: Vec<&str> = open["detail"]["start_secrets"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(names.contains(&"env:GATEWAYD_TEST_TOKEN"), "{names:?}");
    assert!(
        names.iter().any(|n| n.ends_with("id_ed25519:line 2")),
        "{names:?}"
    );
    assert!(!names.contains(&"env:EDITOR"), "{names:?}");
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(!log.contains(KEY_LINE) && !log.contains(TOKEN));
}

#[test]
fn an_unreadable_environment_is_noted() {
    let d = start(json!({"secrets_from_protected": false}));
    let me = me();
    rt().block_on(d.gw.open_with_env("/gatewayd/x", &me, open_params("n"), None))
        .unwrap();
    let recs = records(d.audit.as_ref().unwrap());
    let open = recs.iter().find(|r| r["reason"] == "session_open").unwrap();
    assert_eq!(open["detail"]["start_secrets"]["count"], 0);
    let notes = open["detail"]["start_secrets"]["notes"].to_string();
    assert!(notes.contains("environment could not be read"), "{notes}");
}

struct Hook(Mutex<Vec<String>>);

impl TripHook for Hook {
    fn session_tripped<'a>(&'a self, s: &'a TrippedSession<'a>) -> HookFuture<'a> {
        self.0.lock().unwrap().push(s.cgroup.to_owned());
        Box::pin(async { Ok(()) })
    }
}

#[test]
fn a_kernel_denial_of_a_protected_file_marks_the_sessions_of_its_cgroup() {
    let d = start(json!({}));
    let me = me();
    let rt = rt();
    for (id, cg) in [("a", "/gatewayd/agent-a"), ("b", "/gatewayd/agent-b")] {
        rt.block_on(d.gw.open_with_env(cg, &me, open_params(id), Some(Vec::new())))
            .unwrap();
    }
    // Another reason, or another cgroup: nothing.
    let n = rt.block_on(d.gw.note_kernel_denial("/gatewayd/agent-a", Reason::EgressNotAllowed));
    assert_eq!(n.unwrap(), 0);
    // A process below the session's cgroup: the session's private leg.
    let n = rt.block_on(d.gw.note_kernel_denial("/gatewayd/agent-a/child", Reason::ProtectedPath));
    assert_eq!(n.unwrap(), 1);
    assert!(legs(&d.gw, "a").private && !legs(&d.gw, "a").untrusted);
    assert!(!legs(&d.gw, "b").private);
    // Already marked: no change, no second record.
    let n = rt.block_on(d.gw.note_kernel_denial("/gatewayd/agent-a", Reason::ProtectedPath));
    assert_eq!(n.unwrap(), 0);
    let recs = records(d.audit.as_ref().unwrap());
    let marks: Vec<&Value> = recs.iter().filter(|r| r["reason"] == "suspicion").collect();
    assert_eq!(marks.len(), 1);
    assert_eq!(marks[0]["session"], "a");
    assert_eq!(marks[0]["detail"]["mode"], "private");
}

#[test]
fn in_lockdown_mode_a_kernel_denial_trips_the_session_and_runs_the_hook() {
    let d = start(json!({"suspicion": "lockdown"}));
    let hook = Arc::new(Hook(Mutex::new(Vec::new())));
    d.gw.set_trip_hook(hook.clone());
    let me = me();
    let rt = rt();
    rt.block_on(d.gw.open_with_env("/gatewayd/agent-l", &me, open_params("l"), Some(Vec::new())))
        .unwrap();
    let n = rt.block_on(d.gw.note_kernel_denial("/gatewayd/agent-l", Reason::ProtectedPath));
    assert_eq!(n.unwrap(), 1);
    assert!(legs(&d.gw, "l").tripped());
    assert_eq!(*hook.0.lock().unwrap(), ["/gatewayd/agent-l"]);
    let recs = records(d.audit.as_ref().unwrap());
    assert!(
        recs.iter()
            .any(|r| r["reason"] == "session_tripped" && r["session"] == "l")
    );
}

#[test]
fn in_lockdown_mode_a_gateway_denial_runs_the_hook_before_the_answer() {
    let d = start(json!({"suspicion": "lockdown"}));
    let hook = Arc::new(Hook(Mutex::new(Vec::new())));
    d.gw.set_trip_hook(hook.clone());
    let mut c = d.client();
    c.call("session/open", json!({"session": "g", "user": "alice"}))
        .unwrap();
    let key = d.root().join(".ssh/id_ed25519");
    let r = c
        .call(
            "call/decide",
            json!({"session": "g", "call": {"tool": "read_file", "arguments": {"path": key}}}),
        )
        .unwrap();
    assert_eq!(r["reason"], "sandbox", "{r}");
    assert_eq!(
        r["legs"],
        json!({"untrusted": true, "private": true, "egress": false})
    );
    assert_eq!(
        hook.0.lock().unwrap().len(),
        1,
        "the hook ran before the answer"
    );
}

//! Help and errors that teach (a user's first hour): `--help` ends with examples, what needs
//! root and where the docs are; every argument has help text; a mistake names its fix.
use std::process::{Command, Output};

/// `gatewayd ARGS` (no daemon socket from the environment): its output.
pub(crate) fn gatewayd<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(args)
        .env_remove("GATEWAYD_SOCKET")
        .output()
        .expect("run gatewayd")
}

/// Standard output, then standard error.
pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn help_ends_with_examples_root_and_the_docs() {
    let help = text(&gatewayd(&["--help"]));
    for want in [
        "Examples:",
        "sudo gatewayd run --policy policy.json -- claude",
        "`run` needs root",
        "/usr/share/doc/gatewayd/",
    ] {
        assert!(help.contains(want), "{want:?} not in:\n{help}");
    }
}

/// A line of an `Arguments:` or `Options:` list that names an argument and says nothing of
/// it: no help after it on its line (clap's short form) nor on the lines below, indented
/// further (clap's long form, for long help texts).
fn blank_help_lines(help: &str) -> Vec<String> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = help.lines().collect();
    let mut blank = Vec::new();
    let mut in_list = false;
    for (i, line) in lines.iter().enumerate() {
        if line.ends_with(':') && !line.starts_with(' ') {
            in_list = matches!(*line, "Arguments:" | "Options:");
            continue;
        }
        let named = line.trim();
        let is_name =
            (named.starts_with('-') && !named.starts_with("- ")) || named.starts_with('<');
        if !in_list || !is_name || named.contains("  ") {
            continue;
        }
        let below = lines.get(i + 1).copied().unwrap_or("");
        if below.trim().is_empty() || indent(below) <= indent(line) {
            blank.push((*line).to_owned());
        }
    }
    blank
}

#[test]
fn every_argument_has_help_text() {
    let commands: [&[&str]; 18] = [
        &["run"],
        &["doctor"],
        &["audit", "verify"],
        &["check"],
        &["policy", "validate"],
        &["policy", "pin"],
        &["policy", "init"],
        &["serve"],
        &["mcp"],
        &["hook"],
        &["hook", "install"],
        &["approvals", "list"],
        &["approvals", "approve"],
        &["approvals", "deny"],
        &["sessions", "list"],
        &["test"],
        &["audit"],
        &["policy"],
    ];
    let mut missing = Vec::new();
    for c in commands {
        let mut args = c.to_vec();
        args.push("--help");
        let out = gatewayd(&args);
        assert!(out.status.success(), "{c:?}: {}", text(&out));
        for l in blank_help_lines(&String::from_utf8_lossy(&out.stdout)) {
            missing.push(format!("{}: {l}", c.join(" ")));
        }
    }
    assert!(
        missing.is_empty(),
        "arguments without help:\n{}",
        missing.join("\n")
    );
    // The check itself: a name alone is found.
    assert_eq!(
        blank_help_lines("Options:\n      --policy <POLICY>  \n").len(),
        1
    );
    assert!(
        blank_help_lines("Options:\n      --policy <POLICY>\n          The policy\n").is_empty()
    );
}

#[test]
fn run_without_the_double_dash_says_where_the_agent_goes() {
    let out = gatewayd(&["run", "--policy", "p.json", "/bin/true"]);
    assert_eq!(out.status.code(), Some(2));
    let t = text(&out);
    assert!(
        t.contains("unexpected argument") && t.contains("goes after `--`"),
        "{t}"
    );
}

#[test]
fn run_as_an_ordinary_user_says_it_needs_root() {
    let bin = env!("CARGO_BIN_EXE_gatewayd");
    let args = ["run", "--policy", "/nonexistent.json", "--", "/bin/true"];
    let out = if nix::unistd::geteuid().is_root() {
        // As a user with no rights, the way a user without sudo would call it.
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
            .args(args)
            .output()
            .expect("setpriv")
    } else {
        Command::new(bin).args(args).output().expect("run gatewayd")
    };
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("gatewayd run needs root") && t.contains("sudo"),
        "{t}"
    );
}

#[test]
fn an_unreachable_daemon_asks_whether_serve_runs_and_names_the_socket() {
    let out = gatewayd(&["sessions", "list", "--socket", "/nonexistent/gw.sock"]);
    assert_eq!(out.status.code(), Some(2));
    let t = text(&out);
    assert!(
        t.contains("/nonexistent/gw.sock") && t.contains("is `gatewayd serve` running"),
        "{t}"
    );
}

#[test]
fn a_second_init_names_another_file() {
    let dir = std::env::temp_dir().join(format!("gw-init-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("policy.json");
    let init = |ws: &std::path::Path| {
        gatewayd(&[
            "policy",
            "init",
            "--workspace",
            &ws.to_string_lossy(),
            "--home",
            &ws.to_string_lossy(),
            "--out",
            &out_file.to_string_lossy(),
        ])
    };
    let first = init(&dir);
    assert!(first.status.success(), "{}", text(&first));
    let second = init(&dir);
    assert_eq!(second.status.code(), Some(2));
    let t = text(&second);
    assert!(
        t.contains("is not overwritten") && t.contains("--out FILE"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A policy that cannot be enforced as written says so (a typo in a protected path, a
/// relative root) instead of validating silently; `--strict` makes it an error.
#[test]
fn validate_names_what_cannot_be_enforced_and_strict_refuses_it() {
    let dir = std::env::temp_dir().join(format!("gw-weak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let typo = dir.join(".shh");
    let policy = dir.join("p.json");
    let body = serde_json::json!({"version": 1,
        "sandbox": {"protected": [typo], "root": "relative/ws"}});
    std::fs::write(&policy, body.to_string()).unwrap();
    let p = policy.to_string_lossy().into_owned();
    let lax = gatewayd(&["policy", "validate", &p]);
    assert!(lax.status.success(), "{}", text(&lax));
    let t = text(&lax);
    assert!(
        t.contains("do not exist") && t.contains(".shh") && t.contains("is relative"),
        "{t}"
    );
    let strict = gatewayd(&["policy", "validate", "--strict", &p]);
    assert_eq!(strict.status.code(), Some(2), "{}", text(&strict));
    assert!(text(&strict).contains("--strict"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the binary as an ordinary user (uid 65534 when the test runs as root).
fn as_ordinary_user(args: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_gatewayd");
    if nix::unistd::geteuid().is_root() {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
            .args(args)
            .current_dir("/")
            .output()
            .expect("setpriv")
    } else {
        Command::new(bin).args(args).output().expect("run gatewayd")
    }
}

#[test]
fn doctor_as_an_ordinary_user_says_its_tier_is_not_what_run_gets() {
    let out = as_ordinary_user(&["doctor"]);
    let t = text(&out);
    assert!(t.contains("not root: the probes need root"), "{t}");
    assert!(
        !t.contains("to reach tier 1"),
        "no kernel advice for a rights problem: {t}"
    );
}

/// `doctor --json`'s `tier2_denials`: each kind of tier-2 denial with the channel that records
/// it here, agreeing with the rows and features doctor reports and with a fanotify group
/// opened here.
#[test]
fn doctor_says_which_channel_records_each_tier_2_denial() {
    let out = Command::new(env!("CARGO_BIN_EXE_gatewayd"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["tier2_denials"];
    let kinds = [
        "read_only_path",
        "protected_path",
        "protected_name",
        "roots_and_exec",
        "landlock",
        "egress",
        "seccomp",
    ];
    assert_eq!(
        d.as_object().map(serde_json::Map::len),
        Some(kinds.len()),
        "{d}"
    );
    for k in kinds {
        let c = &d[k];
        assert_eq!(c["recorded"], c["channel"].is_string(), "{k}: {c}");
        assert!(
            c["detail"].as_str().is_some_and(|s| !s.is_empty()),
            "{k}: {c}"
        );
    }
    let recorder = v["raw_tp/sys_exit"]["ok"] == true;
    assert_eq!(d["read_only_path"]["recorded"], recorder, "{v}");
    assert_eq!(d["protected_path"]["recorded"], recorder, "{v}");
    assert_eq!(
        d["landlock"]["recorded"], v["features"]["landlock_audit"],
        "{v}"
    );
    assert_eq!(
        d["roots_and_exec"]["recorded"],
        v["features"]["landlock_audit"] == true || recorder,
        "{v}"
    );
    assert_eq!(
        d["egress"]["recorded"],
        v["cgroup/connect4"]["ok"] == true,
        "{v}"
    );
    assert_eq!(d["seccomp"]["recorded"], false);
    // SAFETY: plain flags; the descriptor, if any, is closed at once.
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC,
            (libc::O_RDONLY | libc::O_CLOEXEC) as u32,
        )
    };
    if fd >= 0 {
        // SAFETY: fd was just opened here.
        unsafe { libc::close(fd) };
    }
    assert_eq!(d["protected_name"]["recorded"], fd >= 0, "{v}");
    let t = text(&as_ordinary_user(&["doctor"]));
    assert!(
        t.contains("denials at tier 2, and what records them here:"),
        "{t}"
    );
    assert!(t.contains("NO    seccomp          not recorded"), "{t}");
}

#[test]
fn serve_where_it_may_not_make_its_socket_says_how_to_run_it() {
    // A policy and an audit directory an ordinary user can use; the socket in `/`, which
    // only root can write.
    let dir = std::env::temp_dir().join(format!("gw-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let policy = dir.join("p.json");
    std::fs::write(&policy, r#"{"version": 1}"#).unwrap();
    let audit = dir.join("audit.jsonl");
    let out = as_ordinary_user(&[
        "serve",
        "--policy",
        &policy.to_string_lossy(),
        "--audit",
        &audit.to_string_lossy(),
        "--socket",
        "/gatewayd-test-not-allowed.sock",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("permission denied") && t.contains("run `gatewayd serve` as root"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the kernel cannot enforce as written is named by `validate`: a wildcard egress host
/// (no address for the kernel), and a read-only path that does not exist, which the kernel
/// refuses to make only at tier 1 and only for names of up to 30 bytes. Branches on this
/// kernel's LSM list (or its command line's `lsm=`), as `validate` does.
#[test]
fn validate_names_entries_the_kernel_cannot_enforce_here() {
    let dir = std::env::temp_dir().join(format!("gw-tier-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let short = dir.join(".envrc");
    let long = dir.join("a-name-longer-than-thirty-bytes.conf");
    let policy = dir.join("p.json");
    let body = serde_json::json!({"version": 1,
        "sandbox": {"read_only": [short, long]},
        "network": {"egress": [{"host": "*.example.com", "port": 443}, {"host": "example.org"}],
            "proxy": false}});
    std::fs::write(&policy, body.to_string()).unwrap();
    let p = policy.to_string_lossy().into_owned();
    let out = gatewayd(&["policy", "validate", &p]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains(
            "*.example.com: with network.proxy false a wildcard is decided by the gateway only"
        ) && !t.contains("example.org:"),
        "{t}"
    );
    let bpf = gatewayd_kernel::kernel::tier1_advice::LsmFacts::gather(None, None).bpf_listed();
    match bpf {
        Some(false) => assert!(
            t.contains("tier 2") && t.contains(".envrc") && t.contains("thirty-bytes"),
            "{t}"
        ),
        Some(true) => assert!(
            t.contains("longer than 30 bytes")
                && t.contains("thirty-bytes")
                && !t.contains(".envrc,"),
            "{t}"
        ),
        None => assert!(
            t.contains("if this kernel has no BPF LSM") && t.contains(".envrc"),
            "{t}"
        ),
    }
    let strict = gatewayd(&["policy", "validate", "--strict", &p]);
    assert_eq!(strict.status.code(), Some(2), "{}", text(&strict));
    let _ = std::fs::remove_dir_all(&dir);
}

//! Objects the agent shares with the host beyond files and sockets (docs/KERNEL.md, "The
//! agent's privileges"): the host's System V IPC and POSIX message queues, what the agent
//! leaves in them after the session, and descriptors gatewayd's caller left open. Each is
//! shown working bare first.
use std::{
    ffi::CString,
    io::Read as _,
    net::TcpListener,
    os::{fd::AsRawFd as _, unix::process::CommandExt as _},
    process::{Command, Output},
    time::Duration,
};

use crate::{
    Scratch, escape::escape_bin, escape_outcomes, records, stdout, tier, under_gatewayd,
    write_policy,
};

fn policy(dir: &Scratch) -> std::path::PathBuf {
    write_policy(
        dir,
        serde_json::json!({"version": 1, "kernel": "best_effort"}),
    )
}

/// `gw-escape ARGS` bare, or under `gatewayd run` writing `audit`; its outcome per attempt.
fn outcomes(
    under: Option<(&Scratch, &str)>,
    args: &[&str],
) -> (std::collections::BTreeMap<String, String>, Output) {
    let out = match under {
        None => Command::new(escape_bin()).args(args).output().unwrap(),
        Some((dir, audit)) => under_gatewayd(policy(dir), dir.path(audit), escape_bin())
            .args(args)
            .output()
            .unwrap(),
    };
    eprintln!("gw-escape {args:?} (under: {}): {out:?}", under.is_some());
    (escape_outcomes(&stdout(&out)), out)
}

/// A System V key of this test run's own.
fn key(n: i32) -> i32 {
    0x4777_0000 + (std::process::id() as i32 & 0xfff) * 16 + n
}

/// Messages waiting on the System V queue `id`.
fn queued(id: i32) -> u64 {
    // SAFETY: IPC_STAT fills a struct on the stack.
    unsafe {
        let mut ds: libc::msqid_ds = std::mem::zeroed();
        assert_eq!(libc::msgctl(id, libc::IPC_STAT, &raw mut ds), 0);
        ds.msg_qnum as u64
    }
}

#[test]
fn the_agent_has_an_ipc_namespace_of_its_own() {
    let dir = Scratch::new("ipc");
    // A host process's message queue: bare, the agent sends to it; under gatewayd it does
    // not exist for the agent.
    let k = key(1);
    // SAFETY: System V calls on integers.
    let id = unsafe { libc::msgget(k, libc::IPC_CREAT | 0o600) };
    assert!(id >= 0, "msgget: {}", std::io::Error::last_os_error());
    let send = format!("sysv_msgsnd={k}");
    let (bare, _) = outcomes(None, &[&send]);
    assert_eq!(
        bare["sysv_msgsnd"], "ok",
        "bare, the host's queue is reachable"
    );
    assert_eq!(queued(id), 1);
    let (under, out) = outcomes(Some((&dir, "msg.jsonl")), &[&send]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(under["sysv_msgsnd"], format!("errno {}", libc::ENOENT));
    assert_eq!(queued(id), 1, "nothing reached the host's queue");
    // SAFETY: removes the queue this test made.
    unsafe { libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut()) };

    // What the agent leaves behind: bare, a segment and a queue outlive it; under gatewayd,
    // they die with the session's IPC namespace.
    for (run, audit) in [("bare", None), ("under", Some("leave.jsonl"))] {
        let k = key(if audit.is_some() { 3 } else { 2 });
        let q = format!("/gw-escape-{}-{run}", std::process::id());
        let shm = format!("sysv_shm_leave={k}");
        let mq = format!("mq_leave={q}");
        let (got, _) = outcomes(audit.map(|a| (&dir, a)), &[&shm, &mq]);
        assert_eq!(got["sysv_shm_leave"], "ok", "{run}");
        // At tier 2 too: without file roots, Landlock handles no right an open asks for, so
        // the session's own queue opens (before, it refused the open: EACCES).
        assert_eq!(got["mq_leave"], "ok", "{run}");
        // SAFETY: System V and mqueue calls on integers and a C string.
        let (seg, queue) = unsafe {
            let name = CString::new(q).unwrap();
            let seg = libc::shmget(k, 0, 0);
            let queue = libc::mq_open(name.as_ptr(), libc::O_RDONLY);
            if seg >= 0 {
                libc::shmctl(seg, libc::IPC_RMID, std::ptr::null_mut());
            }
            if queue >= 0 {
                libc::mq_close(queue);
                libc::mq_unlink(name.as_ptr());
            }
            (seg >= 0, queue >= 0)
        };
        let left = audit.is_none();
        assert_eq!(seg, left, "{run}: a System V segment left behind");
        assert_eq!(queue, left, "{run}: a POSIX message queue left behind");
    }
    let start = records(&dir.path("leave.jsonl"))
        .into_iter()
        .find(|r| r["reason"] == "session_start")
        .unwrap();
    let privileges = &start["detail"]["agent_privileges"];
    assert!(
        privileges["ipc_namespace"]
            .as_str()
            .is_some_and(|s| s.starts_with("own")),
        "{privileges}"
    );
}

#[test]
fn descriptors_left_open_by_the_caller_do_not_reach_the_agent() {
    let _ = tier();
    let dir = Scratch::new("fds");
    std::fs::write(dir.path("key"), "-----BEGIN KEY-----\n").unwrap();
    let key = std::fs::File::open(dir.path("key")).unwrap();
    // A connection the caller holds to a port no policy allowed.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let conn = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut server, _) = listener.accept().unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let (key_fd, conn_fd) = (key.as_raw_fd(), conn.as_raw_fd());
    // gatewayd (or the bare program) inherits them as 40 and 41, open across exec.
    let inherit = move |c: &mut Command| {
        // SAFETY: fcntl and dup2 in the forked child, on descriptors open in the parent.
        // Copied above 500 first: either source may itself be 40 or 41.
        unsafe {
            c.pre_exec(move || {
                let key = libc::fcntl(key_fd, libc::F_DUPFD_CLOEXEC, 500);
                let conn = libc::fcntl(conn_fd, libc::F_DUPFD_CLOEXEC, 500);
                if key < 0 || conn < 0 || libc::dup2(key, 40) < 0 || libc::dup2(conn, 41) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    };
    let args = ["fd_read=40", "fd_write=41"];
    let received = |server: &mut std::net::TcpStream| {
        let mut buf = [0u8; 64];
        server.read(&mut buf).unwrap_or(0)
    };
    let mut bare = Command::new(escape_bin());
    inherit(&mut bare);
    let got = escape_outcomes(&stdout(&bare.args(args).output().unwrap()));
    assert_eq!(got["fd_read"], "ok", "bare, the inherited key is readable");
    assert_eq!(got["fd_write"], "ok");
    assert_eq!(
        received(&mut server),
        9,
        "bare, the write reached the connection"
    );

    let mut run = under_gatewayd(policy(&dir), dir.path("fds.jsonl"), escape_bin());
    inherit(&mut run);
    let out = run.args(args).output().unwrap();
    let got = escape_outcomes(&stdout(&out));
    assert_eq!(got["fd_read"], format!("errno {}", libc::EBADF), "{out:?}");
    assert_eq!(got["fd_write"], format!("errno {}", libc::EBADF));
    assert_eq!(received(&mut server), 0, "nothing reached the connection");

    // Named with --preserve-fd, a descriptor is passed on purpose.
    let mut run = Command::new(crate::gatewayd());
    run.args(["run", "--user", "root", "--preserve-fd", "40", "--policy"])
        .arg(policy(&dir))
        .arg("--audit")
        .arg(dir.path("fds.jsonl"))
        .arg("--")
        .arg(escape_bin());
    inherit(&mut run);
    let out = run.args(args).output().unwrap();
    let got = escape_outcomes(&stdout(&out));
    assert_eq!(got["fd_read"], "ok", "{out:?}");
    assert_eq!(got["fd_write"], format!("errno {}", libc::EBADF));

    // A descriptor that is not open is refused before anything starts.
    let out = Command::new(crate::gatewayd())
        .args(["run", "--user", "root", "--preserve-fd", "77", "--policy"])
        .arg(policy(&dir))
        .arg("--audit")
        .arg(dir.path("bad.jsonl"))
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--preserve-fd 77"), "{err}");
    drop((key, conn));
}

#[test]
fn the_agents_signals_stay_inside_its_session() {
    let t = tier();
    let dir = Scratch::new("signals");
    // The rest of the caller's pipeline: a process in the process group gatewayd runs in.
    let bystander = || crate::bystander(|c| c.process_group(0));
    let dead_soon = crate::dead_soon;
    let mut b = bystander();
    let out = Command::new(escape_bin())
        .arg("signal_group")
        .process_group(b.id() as i32)
        .output()
        .unwrap();
    assert!(
        dead_soon(&mut b),
        "bare, kill(0) reaches the process group: {out:?}"
    );

    let mut b = bystander();
    let audit = dir.path("signals.jsonl");
    let out = under_gatewayd(policy(&dir), &audit, escape_bin())
        .arg("signal_group")
        .process_group(b.id() as i32)
        .output()
        .unwrap();
    let survived = !dead_soon(&mut b);
    let _ = b.kill();
    let _ = b.wait();
    assert!(
        survived,
        "under gatewayd, kill(0) reached the caller's process group: {out:?}"
    );
    assert!(
        out.status.success(),
        "gatewayd was not signalled either: {out:?}"
    );
    if t == crate::Tier::BpfLsm {
        let recs = records(&audit);
        assert!(
            recs.iter()
                .any(|r| r["hook"] == "lsm/task_kill" && r["reason"] == "signal_outside_session"),
            "the refused signal is recorded at tier 1"
        );
    }
}

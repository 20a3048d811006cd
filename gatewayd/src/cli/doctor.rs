//! `gatewayd doctor`: which enforcement pieces work on this kernel, found by loading and
//! attaching gatewayd's own programs (to an empty throwaway cgroup), not by reading a file.
//! `--json` gives one object: a row per piece (`{"ok": bool, "detail": text}`), `tier` (the
//! tier's number, see `kernel::Tier::level`), `tier_text` (the same in words) and `features`
//! (what this kernel supports that the tests and a user may branch on, see [`Features`]) and
//! `tier1_advice` (below tier 1: why, and what to change; `kernel::tier1_advice`) and
//! `tier2_denials`: per kind of denial at tier 2, which channel records it on this host, or
//! that none does ([`denial_channels`]); and `export`: the audit export's counts of the
//! daemon on `--socket` (its `export/stats`), or why none answered ([`export_stats`]).
use std::process::ExitCode;

use gatewayd_kernel::{
    cgroup::AgentCgroup,
    kernel::{self, Tier, tier1_advice},
    landlock, name_guard,
};

use super::out::outln;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    /// The daemon whose audit export is reported (its `export/stats`).
    #[command(flatten)]
    conn: super::Conn,
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let mut rows: Vec<Row> = Vec::new();
    let uname = nix::sys::utsname::uname()?;
    let release = uname.release().to_string_lossy().into_owned();
    rows.push(("kernel".into(), Ok(release.clone())));
    let btf = kernel::btf::KernelBtf::from_sys_fs();
    rows.push((
        "kernel BTF".into(),
        btf.as_ref()
            .map(|_| "/sys/kernel/btf/vmlinux".into())
            .map_err(ToString::to_string),
    ));
    let abi = landlock::abi_version();
    let mut features = kernel_features(release, btf.as_ref().ok(), abi.as_ref().ok().copied());
    let built_with_bpf_lsm = btf.as_ref().ok().map(|b| {
        b.func_param_count(tier1_advice::BPF_LSM_PROBE_FUNCTION)
            .is_ok()
    });
    drop(btf);
    let (tier, lsm_refused) = probe_programs(&mut rows, &mut features, abi.is_ok())?;
    rows.push((
        "landlock denials to audit".into(),
        features.landlock_audit.clone(),
    ));
    rows.push(("landlock".into(), abi.map(|v| format!("ABI {v}"))));
    rows.push((
        "egress by name (socket diagnostics)".into(),
        socket_diag_row(),
    ));
    // The agent hosts' hooks (`gatewayd hook install --check`), for the hosts found here.
    rows.extend(super::hook_install::doctor_rows());
    if let Ok(lsm) = std::fs::read_to_string("/sys/kernel/security/lsm") {
        rows.push(("active LSMs (informational)".into(), Ok(lsm.trim().into())));
    }
    // How to reach tier 1, when this kernel is below it (as root: an ordinary user's probes
    // fail for want of rights, not for the kernel's sake).
    let root = nix::unistd::geteuid().is_root();
    let advice = if tier == Tier::Full || !root {
        Vec::new()
    } else {
        tier1_advice::advice(&tier1_advice::LsmFacts::gather(
            built_with_bpf_lsm,
            lsm_refused,
        ))
    };
    let row = |name: &str| {
        rows.iter().find(|(n, _)| n == name).map_or_else(
            || Err("gatewayd's eBPF object did not load here".to_owned()),
            |(_, r)| r.clone(),
        )
    };
    let probes = ChannelProbes {
        recorder: row("raw_tp/sys_exit"),
        fanotify: name_guard::probe().map_err(|e| e.to_string()),
        landlock_audit: features.landlock_audit.clone(),
        egress: row("cgroup/connect4"),
    };
    let channels = denial_channels(&probes);
    let report = Report {
        rows,
        tier,
        features,
        advice,
        root,
        channels,
        export: export_stats(&args.conn.socket()),
    };
    if args.json {
        report.print_json()?;
    } else {
        report.print_text()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What this kernel supports, before the programs are probed (`bpf_lsm` is their finding).
fn kernel_features(
    release: String,
    btf: Option<&kernel::btf::KernelBtf>,
    landlock_abi: Option<u32>,
) -> Features {
    Features {
        kernel_release: release,
        bpf_lsm: false,
        landlock_abi,
        cgroup_connect_unix: btf.is_some_and(|b| {
            b.enum_value("bpf_attach_type", "BPF_CGROUP_UNIX_CONNECT")
                .is_ok_and(|v| v.is_some())
        }),
        memfd_noexec: std::path::Path::new("/proc/sys/vm/memfd_noexec").exists(),
        landlock_audit: gatewayd_kernel::landlock_audit::probe(landlock_abi),
    }
}

/// One row per program of the set, loaded and attached to a throwaway cgroup; the tier they
/// give (with Landlock standing in when `landlock_ok`) and the first BPF LSM refusal.
fn probe_programs(
    rows: &mut Vec<Row>,
    features: &mut Features,
    landlock_ok: bool,
) -> anyhow::Result<(Tier, Option<String>)> {
    let mut lsm_refused = None;
    let mut tier = Tier::None;
    match AgentCgroup::create(&format!("doctor-{}", std::process::id())) {
        Err(e) => rows.push(("cgroup v2".into(), Err(e.to_string()))),
        Ok(cg) => {
            rows.push((
                "cgroup v2".into(),
                Ok(format!("{} (id {})", cg.path().display(), cg.id())),
            ));
            match kernel::probe(cg.path()) {
                Err(e) => rows.push(("eBPF object + ring buffer".into(), Err(kernel::chain(&e)))),
                Ok(layer) => {
                    rows.push((
                        "eBPF object + ring buffer".into(),
                        Ok("loaded (maps created)".into()),
                    ));
                    for s in layer.status() {
                        let row = match &s.result {
                            Ok(()) if s.program.records_only() => {
                                Ok(format!("works: {}", s.program.enforces))
                            }
                            Ok(()) => Ok(format!("works: denies {}", s.program.enforces)),
                            Err(_) => Err(s.state()),
                        };
                        rows.push((s.program.name.into(), row));
                    }
                    // As `gatewayd run` decides it: without BPF LSM, Landlock stands in.
                    tier = Tier::resolve(layer.status(), landlock_ok);
                    lsm_refused = layer
                        .status()
                        .iter()
                        .find(|s| s.program.is_lsm() && s.result.is_err())
                        .map(|s| format!("{}: {}", s.program.name, s.state()));
                    features.bpf_lsm = layer
                        .status()
                        .iter()
                        .any(|s| s.program.is_lsm() && s.result.is_ok());
                }
            }
            cg.remove()?;
        }
    }
    Ok((tier, lsm_refused))
}
/// A row: a piece's name and what it does here, or why not.
type Row = (String, Result<String, String>);

/// What doctor found of each channel that records tier-2 denials: `Ok` = it works here.
struct ChannelProbes {
    /// The `raw_tp/sys_exit` recorder loaded and attached (`x86_64` only).
    recorder: Result<String, String>,
    /// A fanotify group of the content class could be opened (permission events).
    fanotify: Result<(), String>,
    /// Landlock logs its denials (ABI 7) and gatewayd can read them (audit on).
    landlock_audit: Result<String, String>,
    /// The cgroup connect programs loaded and attached.
    egress: Result<String, String>,
}

/// One kind of denial at tier 2 and the channel that records it here, if any.
#[derive(Debug, PartialEq)]
struct Recording {
    /// The kind, as the record's reason names it (`read_only_path`, ...).
    kind: &'static str,
    /// What the agent did that is refused.
    what: &'static str,
    /// The channel that records it on this host; `None`: not recorded here.
    channel: Option<&'static str>,
    /// Why it is or is not recorded.
    detail: String,
}

/// What `roots_and_exec` in [`denial_channels`] is.
const ROOTS_AND_EXEC: &str = "an open outside the readable roots, a name made, removed or renamed in a directory outside the writable roots, or a program outside the exec allowlist (Landlock)";

/// A kind of denial and the channel that records it (`None` when `probe` failed).
fn one(
    kind: &'static str,
    what: &'static str,
    name: &'static str,
    probe: Result<String, String>,
) -> Recording {
    match probe {
        Ok(d) => Recording {
            kind,
            what,
            channel: Some(name),
            detail: d,
        },
        Err(e) => Recording {
            kind,
            what,
            channel: None,
            detail: format!("{name} unavailable: {e}"),
        },
    }
}

/// The roots' and the exec allowlist's refusals at tier 2: Landlock's own records where they
/// work, else the refused call's `EACCES`, read by the recorder.
fn roots_and_exec(p: &ChannelProbes) -> Recording {
    match (&p.landlock_audit, &p.recorder) {
        (Ok(d), _) => one(
            "roots_and_exec",
            ROOTS_AND_EXEC,
            "landlock audit",
            Ok(d.clone()),
        ),
        (Err(_), Ok(_)) => one(
            "roots_and_exec",
            ROOTS_AND_EXEC,
            "raw_tp/sys_exit",
            Ok("the system call's EACCES outside the roots or the exec allowlist, read by the recorder (an open refused for writing inside a readable root is not told from a file's own permissions, so not recorded)".to_owned()),
        ),
        (Err(a), Err(r)) => one(
            "roots_and_exec",
            ROOTS_AND_EXEC,
            "landlock audit",
            Err(format!("{a}; raw_tp/sys_exit unavailable: {r}")),
        ),
    }
}

/// Per kind of denial at tier 2 (Landlock, mounts, seccomp, fanotify), which channel records
/// it on this host, from what doctor found. At tier 1 the BPF LSM programs record file and
/// exec denials themselves; the read-only binds' refusals are the recorder's at both tiers.
fn denial_channels(p: &ChannelProbes) -> Vec<Recording> {
    let recorder = p.recorder.clone().map(|_| {
        "the system call's result (EROFS, EBUSY, EACCES), read by the recorder".to_owned()
    });
    let roots = roots_and_exec(p);
    vec![
        one(
            "read_only_path",
            "a write, rename or removal under a read-only path (its bind refuses it)",
            "raw_tp/sys_exit",
            recorder.clone(),
        ),
        one(
            "protected_path",
            "an open under a protected path (its hiding mount refuses it)",
            "raw_tp/sys_exit",
            recorder,
        ),
        one(
            "protected_name",
            "an open of a file of a protected name (sandbox.protected_names)",
            "fanotify",
            p.fanotify.clone().map(|()| {
                "permission events (FAN_CLASS_CONTENT): gatewayd refuses and records each"
                    .to_owned()
            }),
        ),
        roots,
        one(
            "landlock",
            "a refused signal or abstract Unix socket (Landlock's scoping)",
            "landlock audit",
            p.landlock_audit.clone(),
        ),
        one(
            "egress",
            "a connection or datagram to an address outside the egress allowlist",
            "cgroup/connect4",
            p.egress
                .clone()
                .map(|_| "the cgroup programs refuse and record it, at every tier".to_owned()),
        ),
        Recording {
            kind: "seccomp",
            what: "a system call the seccomp filter refuses (mount calls, bpf, hard links)",
            channel: None,
            detail: "seccomp refuses without a record, at every tier".into(),
        },
    ]
}

/// What doctor found, to print.
struct Report {
    rows: Vec<Row>,
    tier: Tier,
    features: Features,
    advice: Vec<String>,
    root: bool,
    channels: Vec<Recording>,
    /// [`export_stats`].
    export: serde_json::Value,
}

/// The audit export's counts per sink of the daemon on `socket` (`export/stats`: queued,
/// exported, dropped, lag, `lag_ms`, failing, `last_error`), as `{"socket", "exporters"}`; or
/// `{"socket", "error"}` when no daemon answers there or it refuses.
fn export_stats(socket: &std::path::Path) -> serde_json::Value {
    let answer = gatewayd::protocol::client::Client::connect(socket)
        .map_err(|e| e.to_string())
        .and_then(|mut c| {
            c.call("export/stats", serde_json::json!({}))
                .map_err(|e| e.to_string())
        });
    match answer {
        Ok(a) => serde_json::json!({"socket": socket, "exporters": a["exporters"]}),
        Err(e) => serde_json::json!({"socket": socket, "error": e}),
    }
}

/// Whether the session egress proxy can find its connections' destinations here: the check
/// `gatewayd run` makes before an agent with egress by name starts (docs/KERNEL.md, "Egress
/// by name").
fn socket_diag_row() -> Result<String, String> {
    kernel::egress_proxy::ProxyMaps::check_socket_diag()
        .map(|()| "works: the kernel gives a TCP socket's cookie by its addresses (inet_diag, tcp_diag)".into())
        .map_err(|e| format!("fails: {e}; the egress proxy cannot find a connection's destination, so `gatewayd run` refuses a policy with egress by name and learn mode learns egress by address (load them: `modprobe tcp_diag`)"))
}

impl Recording {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "recorded": self.channel.is_some(),
            "channel": self.channel,
            "what": self.what,
            "detail": self.detail,
        })
    }
}

impl Report {
    fn print_json(&self) -> anyhow::Result<()> {
        let obj: serde_json::Map<String, serde_json::Value> = self
            .rows
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Ok(s) => serde_json::json!({"ok": true, "detail": s}),
                    Err(e) => serde_json::json!({"ok": false, "detail": e}),
                };
                (k.clone(), v)
            })
            .chain([
                ("tier".to_string(), serde_json::json!(self.tier.level())),
                (
                    "tier_text".to_string(),
                    serde_json::json!(self.tier.as_str()),
                ),
                ("features".to_string(), self.features.to_json()),
                ("tier1_advice".to_string(), serde_json::json!(self.advice)),
                ("root".to_string(), serde_json::json!(self.root)),
                ("export".to_string(), self.export.clone()),
                (
                    "tier2_denials".to_string(),
                    self.channels
                        .iter()
                        .map(|c| (c.kind.to_owned(), c.to_json()))
                        .collect::<serde_json::Map<_, _>>()
                        .into(),
                ),
            ])
            .collect();
        outln!("{}", serde_json::Value::Object(obj))?;
        Ok(())
    }

    fn print_text(&self) -> anyhow::Result<()> {
        for (k, v) in grouped(&self.rows) {
            match v {
                Ok(s) => outln!("  ok    {k:<28} {s}")?,
                Err(e) => outln!("  NO    {k:<28} {}", e.replace('\n', "\n        "))?,
            }
        }
        outln!("enforcement tier: {}", self.tier.as_str())?;
        outln!("denials at tier 2, and what records them here:")?;
        for c in &self.channels {
            match c.channel {
                Some(ch) => outln!("  ok    {:<16} {ch}: {}", c.kind, c.detail)?,
                None => outln!("  NO    {:<16} not recorded: {}", c.kind, c.detail)?,
            }
        }
        if !self.root {
            outln!(
                "not root: the probes need root (a cgroup, BPF programs), so the tier above is this user's, not what `sudo gatewayd run` gets; run `sudo gatewayd doctor`"
            )?;
        }
        outln!("kernel features: {}", self.features.to_json())?;
        self.print_export()?;
        for a in &self.advice {
            outln!("to reach tier 1: {a}")?;
        }
        Ok(())
    }
}

impl Report {
    /// One line per sink of the daemon's export, or why there is none.
    fn print_export(&self) -> anyhow::Result<()> {
        let socket = self.export["socket"].as_str().unwrap_or("-");
        let Some(xs) = self.export["exporters"].as_array() else {
            let e = self.export["error"].as_str().unwrap_or("-");
            return Ok(outln!(
                "audit export: no daemon answered on {socket} ({e})"
            )?);
        };
        if xs.is_empty() {
            outln!("audit export: the daemon on {socket} exports nothing")?;
        }
        for x in xs {
            outln!(
                "audit export to {}: queued {}, exported {}, dropped {}, waiting {}, last batch {} ms{}",
                x["sink"].as_str().unwrap_or("-"),
                x["queued"],
                x["exported"],
                x["dropped"],
                x["lag"],
                x["lag_ms"],
                if x["failing"] == true {
                    format!(", FAILING: {}", x["last_error"].as_str().unwrap_or("-"))
                } else {
                    String::new()
                }
            )?;
        }
        Ok(())
    }
}

/// The rows as the terminal shows them: a run of failed rows with the same reason (the BPF
/// LSM programs a kernel refuses, say) is one row naming the first and the last.
fn grouped(rows: &[Row]) -> Vec<(String, &Result<String, String>)> {
    let mut out: Vec<(String, &Result<String, String>)> = Vec::new();
    let mut i = 0;
    while let Some((name, result)) = rows.get(i) {
        let same = rows[i..]
            .iter()
            .take_while(|(_, r)| r.is_err() && r == result)
            .count();
        if same >= 2 {
            let last = &rows[i + same - 1].0;
            out.push((format!("{same} programs, {name} .. {last}"), result));
            i += same;
        } else {
            out.push((name.clone(), result));
            i += 1;
        }
    }
    out
}

/// What this kernel supports, for tests and users to branch on (`features` in `--json`).
/// Each is found by asking the kernel, not by its version number.
struct Features {
    /// `uname -r`.
    kernel_release: String,
    /// One of gatewayd's BPF LSM programs loaded and attached here (the probe above).
    bpf_lsm: bool,
    /// The Landlock ABI the kernel answers the version query with; `None` without Landlock.
    landlock_abi: Option<u32>,
    /// The kernel's BTF has the `BPF_CGROUP_UNIX_CONNECT` attach type (`cgroup/connect_unix`
    /// programs, Linux 6.7 and later).
    cgroup_connect_unix: bool,
    /// The sysctl `vm.memfd_noexec` exists (Linux 6.3 and later): the agent's PID namespace
    /// sets it to 2, so no memfd is executable there.
    memfd_noexec: bool,
    /// Whether `gatewayd run` can read Landlock's denials (ABI 7, `CAP_AUDIT_READ`, audit
    /// enabled on the host) into the session's audit log, and why not.
    landlock_audit: Result<String, String>,
}

impl Features {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kernel_release": self.kernel_release,
            "bpf_lsm": self.bpf_lsm,
            "landlock_abi": self.landlock_abi,
            "landlock_audit": self.landlock_audit.is_ok(),
            "cgroup_connect_unix": self.cgroup_connect_unix,
            "memfd_noexec": self.memfd_noexec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_tier_2_denial_names_its_channel_or_none() {
        let all = ChannelProbes {
            recorder: Ok("works".into()),
            fanotify: Ok(()),
            landlock_audit: Ok("readable".into()),
            egress: Ok("works".into()),
        };
        let kinds: Vec<(&str, Option<&str>)> = denial_channels(&all)
            .iter()
            .map(|c| (c.kind, c.channel))
            .collect();
        assert_eq!(
            kinds,
            [
                ("read_only_path", Some("raw_tp/sys_exit")),
                ("protected_path", Some("raw_tp/sys_exit")),
                ("protected_name", Some("fanotify")),
                ("roots_and_exec", Some("landlock audit")),
                ("landlock", Some("landlock audit")),
                ("egress", Some("cgroup/connect4")),
                ("seccomp", None),
            ]
        );
        // An arm64 host without audit or fanotify permission events: only egress.
        let none = ChannelProbes {
            recorder: Err("it reads x86_64's system call registers".into()),
            fanotify: Err("EINVAL".into()),
            landlock_audit: Err("audit is disabled on this host".into()),
            egress: Ok("works".into()),
        };
        let c = denial_channels(&none);
        let recorded: Vec<&str> = c
            .iter()
            .filter(|c| c.channel.is_some())
            .map(|c| c.kind)
            .collect();
        assert_eq!(recorded, ["egress"]);
        assert!(c[0].detail.contains("x86_64"), "{:?}", c[0]);
        assert!(
            c[2].detail.contains("fanotify unavailable: EINVAL"),
            "{:?}",
            c[2]
        );
        assert!(c[3].detail.contains("audit is disabled"), "{:?}", c[3]);
        assert!(c[4].detail.contains("audit is disabled"), "{:?}", c[4]);
        // Without Landlock's records, the recorder records the roots' refusals.
        let recorder_only = ChannelProbes {
            recorder: Ok("works".into()),
            ..none
        };
        assert_eq!(
            denial_channels(&recorder_only)[3].channel,
            Some("raw_tp/sys_exit")
        );
    }

    #[test]
    fn refused_programs_with_one_reason_are_one_row() {
        let no = |n: &str| (n.to_string(), Err("not loaded: EPERM".to_string()));
        let rows = vec![
            ("kernel".to_string(), Ok("6.1".to_string())),
            no("lsm/a"),
            no("lsm/b"),
            no("lsm/c"),
            ("cgroup/x".to_string(), Ok("works".to_string())),
            no("landlock"),
        ];
        let g = grouped(&rows);
        let names: Vec<&str> = g.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "kernel",
                "3 programs, lsm/a .. lsm/c",
                "cgroup/x",
                "landlock"
            ]
        );
    }
}

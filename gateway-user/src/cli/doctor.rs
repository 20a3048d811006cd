//! `gatewayd doctor`: which enforcement pieces work on this kernel, found by loading and
//! attaching gatewayd's own programs (to an empty throwaway cgroup), not by reading a file.
//! `--json` gives one object: a row per piece (`{"ok": bool, "detail": text}`), `tier` (the
//! tier's number, see `kernel::Tier::level`) and `tier_text` (the same in words).
use std::process::ExitCode;

use gatewayd::{
    cgroup::AgentCgroup,
    kernel::{self, Tier},
    landlock,
};

use super::out::outln;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let mut rows: Vec<(String, Result<String, String>)> = Vec::new();
    let uname = nix::sys::utsname::uname()?;
    let release = uname.release().to_string_lossy().into_owned();
    rows.push(("kernel".into(), Ok(release)));
    rows.push((
        "kernel BTF".into(),
        kernel::btf::KernelBtf::from_sys_fs()
            .map(|_| "/sys/kernel/btf/vmlinux".into())
            .map_err(|e| e.to_string()),
    ));
    let abi = landlock::abi_version();
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
                            Ok(()) => Ok(format!("works: denies {}", s.program.enforces)),
                            Err(_) => Err(s.state()),
                        };
                        rows.push((s.program.name.into(), row));
                    }
                    // As `gatewayd run` decides it: without BPF LSM, Landlock stands in.
                    tier = Tier::resolve(layer.status(), abi.is_ok());
                }
            }
            cg.remove()?;
        }
    }
    rows.push(("landlock".into(), abi.map(|v| format!("ABI {v}"))));
    if let Ok(lsm) = std::fs::read_to_string("/sys/kernel/security/lsm") {
        rows.push(("active LSMs (informational)".into(), Ok(lsm.trim().into())));
    }
    if args.json {
        let obj: serde_json::Map<String, serde_json::Value> = rows
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Ok(s) => serde_json::json!({"ok": true, "detail": s}),
                    Err(e) => serde_json::json!({"ok": false, "detail": e}),
                };
                (k.clone(), v)
            })
            .chain([
                ("tier".to_string(), serde_json::json!(tier.level())),
                ("tier_text".to_string(), serde_json::json!(tier.as_str())),
            ])
            .collect();
        outln!("{}", serde_json::Value::Object(obj))?;
    } else {
        for (k, v) in &rows {
            match v {
                Ok(s) => outln!("  ok    {k:<28} {s}")?,
                Err(e) => outln!("  NO    {k:<28} {}", e.replace('\n', "\n        "))?,
            }
        }
        outln!("enforcement tier: {}", tier.as_str())?;
    }
    Ok(ExitCode::SUCCESS)
}

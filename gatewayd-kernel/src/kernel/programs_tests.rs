//! The program table against docs/KERNEL.md and the eBPF object.
use std::collections::BTreeMap;

use super::*;

/// This entry's row in docs/KERNEL.md's program table.
fn doc_row(p: &Program) -> String {
    let attach = match p.attach {
        Attach::Lsm { hook, by_params } if by_params.len() > 1 => {
            let names: Vec<String> = by_params.iter().map(|(_, n)| format!("`{n}`")).collect();
            format!(
                "BPF LSM `{hook}` ({}, by the hook's parameter count)",
                names.join(" or ")
            )
        }
        Attach::Lsm { hook, .. } => format!("BPF LSM `{hook}`"),
        Attach::SockAddr { object } => format!("cgroup sock_addr `{object}`"),
        Attach::SkbIngress { object } => format!("cgroup_skb ingress `{object}`"),
        Attach::RawTracepoint { object, tracepoint } => {
            format!("raw tracepoint `{tracepoint}` (`{object}`)")
        }
    };
    let reasons: Vec<String> = p
        .messages
        .iter()
        .map(|(r, _)| format!("`{}`", r.name()))
        .collect();
    format!(
        "| `{}` | {attach} | {} | {} |",
        p.name,
        p.enforces,
        reasons.join(", ")
    )
}

#[test]
fn kernel_md_lists_every_program_of_the_table() {
    let doc = include_str!("../../../docs/KERNEL.md");
    let rows: Vec<&str> = doc
        .lines()
        .filter(|l| {
            ["| `lsm/", "| `cgroup/", "| `cgroup_skb/", "| `raw_tp/"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    let want: Vec<String> = PROGRAMS.iter().map(doc_row).collect();
    assert_eq!(
        rows,
        want,
        "docs/KERNEL.md's program table must mirror PROGRAMS; its rows should be:\n{}",
        want.join("\n")
    );
}

#[test]
fn one_program_per_event_kind_and_every_reason_has_a_message() {
    for kind in EventKind::ALL {
        let n = PROGRAMS.iter().filter(|p| p.event == kind).count();
        assert_eq!(n, 1, "{kind:?} is produced by {n} programs");
    }
    let mut names: Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), PROGRAMS.len(), "program names are unique");
    for p in &PROGRAMS {
        // Every program denies with a reason, but those that only keep the index, show the
        // original peer or mark the session's sockets.
        assert_eq!(
            p.messages.is_empty(),
            matches!(
                p.event,
                EventKind::TreeMark
                    | EventKind::PeerName4
                    | EventKind::PeerName6
                    | EventKind::Bind4
                    | EventKind::Bind6
            ),
            "{}",
            p.name
        );
        assert!(!p.object_programs().is_empty(), "{}", p.name);
    }
    // The loader attaches BPF LSM first, then the cgroup programs.
    let first_sock = PROGRAMS.iter().position(|p| !p.is_lsm()).unwrap();
    assert!(PROGRAMS[first_sock..].iter().all(|p| !p.is_lsm()));
}

/// Programs in the embedded eBPF object, by name: "lsm", "`sock_addr`", "skb" or "`raw_tp`".
fn object_programs() -> BTreeMap<String, &'static str> {
    use aya_obj::ProgramSection;
    let obj = aya_obj::Object::parse(super::super::OBJECT).expect("the eBPF object parses");
    obj.programs
        .iter()
        .map(|(name, p)| {
            let kind = match p.section {
                ProgramSection::Lsm { .. } => "lsm",
                ProgramSection::CgroupSockAddr { .. } => "sock_addr",
                ProgramSection::CgroupSkb { .. } => "skb",
                ProgramSection::RawTracePoint => "raw_tp",
                ref other => {
                    panic!("{name}: a program of a kind the table has no attach for: {other:?}")
                }
            };
            (name.clone(), kind)
        })
        .collect()
}

/// Runs against the real object in `cargo xtask test` (which builds without the stub).
/// A stub build has nothing to compare: it passes only when `GATEWAYD_EBPF_STUB` says the
/// stub was meant.
#[test]
fn the_table_and_the_ebpf_object_name_the_same_programs() {
    if super::super::OBJECT.is_empty() {
        assert!(
            std::env::var_os("GATEWAYD_EBPF_STUB").is_some(),
            "this build carries no eBPF object but GATEWAYD_EBPF_STUB is not set: \
             the program table cannot be checked against the object"
        );
        eprintln!("stub build (GATEWAYD_EBPF_STUB set): no eBPF object to compare");
        return;
    }
    let table: BTreeMap<String, &str> = PROGRAMS
        .iter()
        .flat_map(|p| {
            let kind = match p.attach {
                Attach::Lsm { .. } => "lsm",
                Attach::SockAddr { .. } => "sock_addr",
                Attach::SkbIngress { .. } => "skb",
                Attach::RawTracepoint { .. } => "raw_tp",
            };
            p.object_programs()
                .into_iter()
                .map(move |n| (n.to_string(), kind))
        })
        .collect();
    assert_eq!(object_programs(), table);
}

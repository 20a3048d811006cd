//! `gatewayd doctor --json`'s `features`: what this kernel supports, which the tests branch
//! on. Each feature is checked here against the kernel by a second, independent way, so a
//! wrong probe fails on the kernel where it is wrong; where a kernel lacks a feature, the
//! test asserts the absence and says so in the output (`KERNEL-NOTE`).
use super::{Tier, doctor, note, tier};

/// `BPF_PROG_TYPE_CGROUP_SOCK_ADDR`, `BPF_PROG_LOAD` and two attach types from the kernel's
/// UAPI (`include/uapi/linux/bpf.h`); these numbers never change once released.
const PROG_TYPE_CGROUP_SOCK_ADDR: u32 = 18;
const BPF_PROG_LOAD: libc::c_long = 5;
const ATTACH_INET4_CONNECT: u32 = 10;
const ATTACH_UNIX_CONNECT: u32 = 49;

/// The head of `union bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// Loads `r0 = 1; exit` as a cgroup `sock_addr` program for `attach_type`. The kernel checks
/// the expected attach type at load time and refuses one it does not know with `EINVAL`.
fn load_sock_addr_program(attach_type: u32) -> std::io::Result<()> {
    // BPF_MOV64_IMM(BPF_REG_0, 1); BPF_EXIT_INSN()
    let insns: [[u8; 8]; 2] = [[0xb7, 0, 0, 0, 1, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]];
    let license = c"GPL";
    let attr = ProgLoadAttr {
        prog_type: PROG_TYPE_CGROUP_SOCK_ADDR,
        insn_cnt: 2,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        expected_attach_type: attach_type,
        ..ProgLoadAttr::default()
    };
    // SAFETY: `attr` is a valid, fully initialised prefix of `union bpf_attr` whose pointers
    // (`insns`, `license`) outlive the call; the kernel reads `size_of` bytes of it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &raw const attr,
            std::mem::size_of::<ProgLoadAttr>() as u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is the program fd the kernel just returned to us, closed once.
    unsafe { libc::close(fd as libc::c_int) };
    Ok(())
}

#[test]
fn doctor_reports_the_kernel_features_tests_branch_on() {
    let tier = tier();
    let v = doctor();
    let f = &v["features"];
    let release = nix::sys::utsname::uname().unwrap();
    assert_eq!(
        f["kernel_release"].as_str(),
        release.release().to_str(),
        "{f}"
    );

    // bpf_lsm: one of gatewayd's BPF LSM programs attached in doctor's probe.
    let lsm_rows_ok = v
        .as_object()
        .unwrap()
        .iter()
        .any(|(k, r)| k.starts_with("lsm/") && r["ok"] == true);
    assert_eq!(f["bpf_lsm"].as_bool(), Some(lsm_rows_ok), "{v}");
    if tier == Tier::BpfLsm {
        assert_eq!(f["bpf_lsm"], true, "tier 1 without BPF LSM: {v}");
    }

    // landlock_abi: the kernel's answer, the same as doctor's `landlock` row. landlock_audit:
    // the channel works (ABI 7 and the host's audit switch, which landlock_records.rs turns
    // on for its length and checks both ways), the same as the `landlock denials to audit`
    // row; never without ABI 7.
    let abi = gatewayd_kernel::landlock::abi_version().ok();
    assert_eq!(f["landlock_abi"].as_u64(), abi.map(u64::from), "{f}");
    assert_eq!(
        f["landlock_audit"], v["landlock denials to audit"]["ok"],
        "{v}"
    );
    if abi.is_none_or(|a| a < 7) {
        assert_eq!(f["landlock_audit"], false, "{f}");
        let abi = abi.map_or_else(|| "none".into(), |a| a.to_string());
        note(&format!(
            "Landlock audit logging absent (Landlock ABI {abi}, audit needs 7): asserted \
             landlock_audit=false"
        ));
    }
}

#[test]
fn cgroup_connect_unix_is_reported_as_the_kernel_loads_it() {
    let _ = tier();
    let f = &doctor()["features"];
    let reported = f["cgroup_connect_unix"]
        .as_bool()
        .unwrap_or_else(|| panic!("doctor reports no cgroup_connect_unix: {f}"));
    // Control: a sock_addr program every supported kernel knows loads, so a refusal below is
    // about the attach type and nothing else.
    load_sock_addr_program(ATTACH_INET4_CONNECT).expect("a cgroup/connect4 program loads");
    let btf = gatewayd_kernel::kernel::btf::KernelBtf::from_sys_fs().unwrap();
    let in_btf = btf
        .enum_value("bpf_attach_type", "BPF_CGROUP_UNIX_CONNECT")
        .unwrap();
    let loaded = load_sock_addr_program(ATTACH_UNIX_CONNECT);
    if reported {
        assert_eq!(in_btf, Some(i64::from(ATTACH_UNIX_CONNECT)), "UAPI value");
        loaded.expect("doctor says cgroup/connect_unix exists: the kernel loads one");
    } else {
        let err = loaded.expect_err("doctor says no cgroup/connect_unix, but the kernel loads one");
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
        note(&format!(
            "cgroup/connect_unix absent (kernel {}): asserted the kernel refuses the attach \
             type (EINVAL) instead of its use",
            f["kernel_release"].as_str().unwrap_or("?")
        ));
    }
}

#[test]
fn memfd_noexec_is_reported_as_the_kernel_has_it() {
    let _ = tier();
    let f = &doctor()["features"];
    let reported = f["memfd_noexec"]
        .as_bool()
        .unwrap_or_else(|| panic!("doctor reports no memfd_noexec: {f}"));
    // The second way: `MFD_NOEXEC_SEAL` came with the sysctl (Linux 6.3); before it,
    // memfd_create refuses the unknown flag with EINVAL.
    const MFD_NOEXEC_SEAL: libc::c_uint = 0x8;
    // SAFETY: a static name; the fd is closed right after.
    let fd = unsafe { libc::memfd_create(c"gw-probe".as_ptr(), MFD_NOEXEC_SEAL) };
    let err = std::io::Error::last_os_error();
    if fd >= 0 {
        // SAFETY: the fd just made.
        unsafe { libc::close(fd) };
    }
    if reported {
        assert!(
            fd >= 0,
            "doctor says memfd_noexec exists, MFD_NOEXEC_SEAL refused: {err}"
        );
    } else {
        assert_eq!(
            fd, -1,
            "doctor says no memfd_noexec, but MFD_NOEXEC_SEAL works"
        );
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
        note(&format!(
            "vm.memfd_noexec absent (kernel {}): memfd exec through /proc/self/fd stays open \
             without an exec list; asserted MFD_NOEXEC_SEAL is refused (EINVAL)",
            f["kernel_release"].as_str().unwrap_or("?")
        ));
    }
}

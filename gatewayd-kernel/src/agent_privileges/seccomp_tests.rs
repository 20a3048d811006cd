//! The filters run through a small classic-BPF interpreter, for both architectures, so a
//! rule that does not match what it claims fails here without a kernel.
use super::*;

/// Syscall numbers the tests use: (name, `x86_64`, `aarch64`).
const NR: [(&str, u32, u32); 13] = [
    ("socket", 41, 198),
    ("unshare", 272, 97),
    ("clone", 56, 220),
    ("clone3", 435, 435),
    ("mount", 165, 40),
    ("fsopen", 430, 430),
    ("memfd_create", 319, 279),
    ("prlimit64", 302, 261),
    ("getpid", 39, 172),
    ("bpf", 321, 280),
    ("execveat", 322, 281),
    ("open_tree_attr", 467, 467),
    ("ioctl", 16, 29),
];

fn nr(name: &str, arch: TargetArch) -> u32 {
    let (_, x, a) = NR.iter().find(|(n, ..)| *n == name).unwrap();
    if arch == TargetArch::x86_64 { *x } else { *a }
}

/// `struct seccomp_data`: nr, arch, instruction pointer, six arguments.
fn data(nr: u32, arch: u32, args: [u64; 6]) -> [u8; 64] {
    let mut d = [0u8; 64];
    d[0..4].copy_from_slice(&nr.to_le_bytes());
    d[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
        d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    d
}

/// Runs one classic-BPF seccomp program.
fn run(prog: &[libc::sock_filter], d: &[u8; 64]) -> u32 {
    let (mut a, mut pc) = (0u32, 0usize);
    loop {
        let i = prog[pc];
        let code = u32::from(i.code);
        pc += 1;
        match code & 0x07 {
            0x00 => {
                let o = i.k as usize;
                a = u32::from_le_bytes(d[o..o + 4].try_into().unwrap());
            }
            0x04 if code & 0xf0 == libc::BPF_AND => a &= i.k,
            0x05 => {
                let taken = match code & 0xf0 {
                    0x00 => {
                        pc += i.k as usize;
                        continue;
                    }
                    0x10 => a == i.k,
                    0x20 => a > i.k,
                    0x30 => a >= i.k,
                    0x40 => a & i.k != 0,
                    op => panic!("jump op {op:#x}"),
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            0x06 => return i.k,
            c => panic!("instruction class {c:#x}"),
        }
    }
}

/// The kernel's answer: the strictest action of every filter (signed comparison).
fn verdict(f: &Filter, arch: TargetArch, audit_arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let d = data(nr, audit_arch, args);
    f.programs()
        .iter()
        .map(|p| run(p, &d))
        .min_by_key(|r| (r & 0xffff_0000) as i32)
        .unwrap_or_else(|| panic!("no filter for {arch:?}"))
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

#[test]
fn the_rules_mean_what_they_say_on_both_architectures() {
    let agent = Agent {
        socket_families: vec!["vsock".into()],
        ..Agent::default()
    };
    for (arch, audit) in [
        (TargetArch::x86_64, AUDIT_ARCH_X86_64),
        (TargetArch::aarch64, AUDIT_ARCH_AARCH64),
    ] {
        let f = Filter::build(&agent, arch, false).unwrap();
        let v = |name: &str, args: [u64; 6]| verdict(&f, arch, audit, nr(name, arch), args);
        let cloexec = 0x8_0000;
        let cases: [(&str, [u64; 6], u32, &str); 19] = [
            ("getpid", [0; 6], ALLOW, "an ordinary syscall"),
            ("socket", [AF_INET, 1 | cloexec, 0, 0, 0, 0], ALLOW, "TCP"),
            ("socket", [AF_INET6, 2, 0, 0, 0, 0], ALLOW, "UDP over IPv6"),
            ("socket", [AF_UNIX, 5, 0, 0, 0, 0], ALLOW, "unix seqpacket"),
            (
                "socket",
                [AF_INET, 3 | cloexec, 1, 0, 0, 0],
                EPERM,
                "raw IPv4",
            ),
            ("socket", [AF_INET6, 3, 58, 0, 0, 0], EPERM, "raw IPv6"),
            ("socket", [17, 3, 0, 0, 0, 0], EPERM, "packet"),
            ("socket", [40, 1, 0, 0, 0, 0], ALLOW, "vsock, listed"),
            (
                "socket",
                [AF_NETLINK, 3, 0, 0, 0, 0],
                ALLOW,
                "netlink route, default",
            ),
            (
                "socket",
                [AF_NETLINK, 3, 9, 0, 0, 0],
                EPERM,
                "netlink audit",
            ),
            (
                "unshare",
                [CLONE_NEWUSER | 0x2_0000, 0, 0, 0, 0, 0],
                EPERM,
                "new userns",
            ),
            (
                "unshare",
                [0x2_0000, 0, 0, 0, 0, 0],
                ALLOW,
                "mount ns alone",
            ),
            (
                "clone",
                [CLONE_NEWUSER | 0x11, 0, 0, 0, 0, 0],
                EPERM,
                "clone userns",
            ),
            (
                "clone",
                [0x01_1200 | 0x11, 0, 0, 0, 0, 0],
                ALLOW,
                "fork-like clone",
            ),
            ("clone3", [0; 6], ENOSYS, "clone3"),
            ("mount", [0; 6], EPERM, "mount"),
            (
                "memfd_create",
                [0, MFD_EXEC | 1, 0, 0, 0, 0],
                EPERM,
                "exec memfd",
            ),
            (
                "prlimit64",
                [1234, 4, 0x7fff_0000, 0, 0, 0],
                EPERM,
                "another's limits",
            ),
            ("open_tree_attr", [0; 6], ENOSYS, "newer than the tables"),
        ];
        for (name, args, want, what) in cases {
            assert_eq!(v(name, args), want, "{arch:?}: {what}");
        }
        assert_eq!(
            v("prlimit64", [0, 4, 0x7fff_0000, 0, 0, 0]),
            ALLOW,
            "own limits"
        );
        assert_eq!(
            v("prlimit64", [1234, 4, 0, 0x7fff_0000, 0, 0]),
            ALLOW,
            "reading"
        );
        assert_eq!(v("memfd_create", [0, 1, 0, 0, 0, 0]), ALLOW, "plain memfd");
        for (args, want, what) in [
            ([AF_INET, 1, 6, 0, 0, 0], ALLOW, "TCP, named"),
            (
                [AF_INET6, 2 | cloexec, 17, 0, 0, 0],
                ALLOW,
                "UDP over IPv6, named",
            ),
            (
                [AF_INET, 2 | cloexec, 1, 0, 0, 0],
                EPERM,
                "ICMP ping socket",
            ),
            ([AF_INET6, 2, 58, 0, 0, 0], EPERM, "ICMPv6 ping socket"),
            ([AF_INET, 1, 132, 0, 0, 0], EPERM, "SCTP"),
            ([AF_INET6, 1, 262, 0, 0, 0], EPERM, "MPTCP"),
            ([AF_INET, 2, 136, 0, 0, 0], EPERM, "UDP-Lite"),
            (
                [AF_UNIX, 1, 1, 0, 0, 0],
                ALLOW,
                "unix: protocols are not inet's",
            ),
        ] {
            assert_eq!(v("socket", args), want, "{arch:?}: {what}");
        }
        assert_eq!(
            v("execveat", [3, 0, 0, 0, AT_EMPTY_PATH, 0]),
            EPERM,
            "fexecve"
        );
        assert_eq!(v("bpf", [0; 6]), EPERM);
        // Another ABI: killed, whatever the number.
        let i386 = 3 | 0x4000_0000;
        assert_eq!(verdict(&f, arch, i386, 20, [0; 6]), KILL, "{arch:?}: i386");
    }
    let f = Filter::build(&agent, TargetArch::x86_64, false).unwrap();
    let x32_getpid = 0x27 | X32_SYSCALL_BIT;
    assert_eq!(
        verdict(
            &f,
            TargetArch::x86_64,
            AUDIT_ARCH_X86_64,
            x32_getpid,
            [0; 6]
        ),
        KILL,
        "x32"
    );
}

#[test]
fn an_empty_netlink_list_denies_all_netlink() {
    let agent = Agent {
        netlink: Some(vec![]),
        ..Agent::default()
    };
    let arch = TargetArch::x86_64;
    let f = Filter::build(&agent, arch, false).unwrap();
    let socket = nr("socket", arch);
    assert_eq!(
        verdict(
            &f,
            arch,
            AUDIT_ARCH_X86_64,
            socket,
            [AF_NETLINK, 3, 0, 0, 0, 0]
        ),
        EPERM
    );
    assert_eq!(
        verdict(&f, arch, AUDIT_ARCH_X86_64, socket, [40, 1, 0, 0, 0, 0]),
        EPERM,
        "vsock, not listed"
    );
}

#[test]
fn at_tier_1_bpf_and_mount_are_left_to_the_bpf_lsm() {
    let arch = TargetArch::x86_64;
    let f = Filter::build(&Agent::default(), arch, true).unwrap();
    let v = |name: &str| verdict(&f, arch, AUDIT_ARCH_X86_64, nr(name, arch), [0; 6]);
    assert_eq!(v("bpf"), ALLOW);
    assert_eq!(v("mount"), ALLOW);
    assert_eq!(
        v("fsopen"),
        EPERM,
        "the new mount API has no BPF LSM program here"
    );
    assert_eq!(
        f.describe()["left_to_bpf_lsm"],
        json!(["bpf", "mount", "umount2", "move_mount", "open_tree"])
    );
}

/// The kernel's `seccomp_is_const_allow` (kernel/seccomp.c, Linux 5.11+): whether the
/// program allows `nr` without looking at anything but the number and the architecture.
/// Such syscalls are answered from the filter's action cache, a bitmap, without running it.
fn const_allow(prog: &[libc::sock_filter], nr: u32, arch: u32) -> bool {
    let (mut a, mut pc) = (0u32, 0usize);
    while pc < prog.len() {
        let i = prog[pc];
        let code = u32::from(i.code);
        match code {
            c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => match i.k {
                0 => a = nr,
                4 => a = arch,
                _ => return false,
            },
            c if c == libc::BPF_RET | libc::BPF_K => return i.k == libc::SECCOMP_RET_ALLOW,
            c if c == libc::BPF_JMP | libc::BPF_JA => pc += i.k as usize,
            c if c & 0x07 == libc::BPF_JMP && c & 0x08 == libc::BPF_K => {
                let taken = match c & 0xf0 {
                    0x10 => a == i.k,
                    0x20 => a > i.k,
                    0x30 => a >= i.k,
                    0x40 => a & i.k != 0,
                    _ => return false,
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= i.k,
            _ => return false,
        }
        pc += 1;
    }
    false
}

#[test]
fn the_syscalls_an_agent_makes_most_are_answered_from_the_kernels_cache() {
    // openat, close, read, write, fstat, newfstatat, mmap, futex, getpid (x86_64 numbers).
    let hot = [257, 3, 0, 1, 5, 262, 9, 202, 39];
    for bpf_lsm in [false, true] {
        let f = Filter::build(&Agent::default(), TargetArch::x86_64, bpf_lsm).unwrap();
        for (i, p) in f.programs().iter().enumerate() {
            for nr in hot {
                assert!(
                    const_allow(p, nr, AUDIT_ARCH_X86_64),
                    "filter {i} runs for syscall {nr} (bpf_lsm {bpf_lsm})"
                );
            }
            let socket = nr("socket", TargetArch::x86_64);
            assert!(
                i != 1 || !const_allow(p, socket, AUDIT_ARCH_X86_64),
                "the deny list looks into socket()'s arguments"
            );
        }
    }
}

#[test]
fn terminal_injection_is_denied_on_the_requests_low_32_bits() {
    const TIOCSTI: u64 = 0x5412;
    const TIOCLINUX: u64 = 0x541c;
    const TCGETS: u64 = 0x5401;
    for (arch, audit_arch) in [
        (TargetArch::x86_64, AUDIT_ARCH_X86_64),
        (TargetArch::aarch64, AUDIT_ARCH_AARCH64),
    ] {
        let f = Filter::build(&Agent::default(), arch, true).unwrap();
        let ioctl = |cmd: u64| {
            verdict(
                &f,
                arch,
                audit_arch,
                nr("ioctl", arch),
                [0, cmd, 0, 0, 0, 0],
            )
        };
        assert_eq!(ioctl(TIOCSTI), EPERM, "{arch:?}");
        assert_eq!(ioctl(TIOCLINUX), EPERM, "{arch:?}");
        // The kernel reads the request as an unsigned int: high bits must not get it past.
        assert_eq!(ioctl(TIOCSTI | 1 << 32), EPERM, "{arch:?}");
        assert_eq!(ioctl(TCGETS), ALLOW, "{arch:?}: a terminal stays usable");
    }
}

//! The names a policy may use in its `agent` section, and the kernel numbers they stand for:
//! capabilities (`linux/capability.h`), socket address families (`linux/socket.h`) and
//! netlink protocols (`linux/netlink.h`). These numbers are the same on every architecture.

/// Capabilities, by number (`CAP_CHOWN` is 0). `CAP_LAST_CAP` is 40 (`CAP_CHECKPOINT_RESTORE`).
pub const CAPABILITIES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The number of a capability named with or without its `CAP_` prefix, in any case.
pub(crate) fn capability(name: &str) -> Option<u32> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    CAPABILITIES
        .iter()
        .position(|c| *c == full)
        .map(|i| i as u32)
}

/// Socket address families a policy may add to the three every agent has (`AF_UNIX`,
/// `AF_INET`, `AF_INET6`). Netlink is governed by its protocol list instead.
pub(crate) const SOCKET_FAMILIES: [(&str, u32); 22] = [
    ("ax25", 3),
    ("ipx", 4),
    ("appletalk", 5),
    ("x25", 9),
    ("key", 15),
    ("packet", 17),
    ("rds", 21),
    ("llc", 26),
    ("can", 29),
    ("tipc", 30),
    ("bluetooth", 31),
    ("rxrpc", 33),
    ("phonet", 35),
    ("ieee802154", 36),
    ("caif", 37),
    ("alg", 38),
    ("nfc", 39),
    ("vsock", 40),
    ("kcm", 41),
    ("qipcrtr", 42),
    ("smc", 43),
    ("xdp", 44),
];

/// The number of a socket family of [`SOCKET_FAMILIES`].
pub(crate) fn socket_family(name: &str) -> Option<u32> {
    SOCKET_FAMILIES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// Netlink protocols a policy may allow.
pub(crate) const NETLINK_PROTOCOLS: [(&str, u32); 20] = [
    ("route", 0),
    ("usersock", 2),
    ("firewall", 3),
    ("sock_diag", 4),
    ("nflog", 5),
    ("xfrm", 6),
    ("selinux", 7),
    ("iscsi", 8),
    ("audit", 9),
    ("fib_lookup", 10),
    ("connector", 11),
    ("netfilter", 12),
    ("ip6_fw", 13),
    ("dnrtmsg", 14),
    ("kobject_uevent", 15),
    ("generic", 16),
    ("scsitransport", 18),
    ("ecryptfs", 19),
    ("rdma", 20),
    ("crypto", 21),
];

/// The number of a netlink protocol of [`NETLINK_PROTOCOLS`].
pub(crate) fn netlink_protocol(name: &str) -> Option<u32> {
    NETLINK_PROTOCOLS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// The netlink protocols an agent has when the policy lists none: `route`, which the C
/// library's `getaddrinfo` and `getifaddrs` read interface addresses through (changing
/// routes or addresses needs `CAP_NET_ADMIN`, which the agent does not have).
pub(crate) const DEFAULT_NETLINK: [&str; 1] = ["route"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_kernel_numbers() {
        assert_eq!(capability("CAP_SYS_ADMIN"), Some(21));
        assert_eq!(capability("net_bind_service"), Some(10));
        assert_eq!(capability("CAP_CHECKPOINT_RESTORE"), Some(40));
        assert_eq!(capability("CAP_NOPE"), None);
        assert_eq!(socket_family("packet"), Some(17));
        assert_eq!(socket_family("VSOCK"), Some(40));
        assert_eq!(netlink_protocol("route"), Some(0));
        assert_eq!(netlink_protocol("audit"), Some(9));
        assert_eq!(netlink_protocol("bogus"), None);
    }
}

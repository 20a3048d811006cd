//! Why this kernel is not at tier 1 and what would get it there: `gatewayd doctor`'s advice.
//!
//! Tier 1 needs three things of the kernel, each checked by asking it (not by its version):
//! built with `CONFIG_BPF_LSM` (its BTF then has the `bpf_lsm_*` hook functions), `bpf` in
//! the active LSM list (`/sys/kernel/security/lsm`, set at build time by `CONFIG_LSM` or at
//! boot by `lsm=`), and the kernel actually accepting gatewayd's programs (the load probe).

/// What the kernel says about BPF LSM; gathered by [`LsmFacts::gather`].
#[derive(Debug, Clone, Default)]
pub struct LsmFacts {
    /// The kernel's BTF has `bpf_lsm_file_open`: it was built with `CONFIG_BPF_LSM`.
    /// `None` when there is no BTF to ask.
    pub built_with_bpf_lsm: Option<bool>,
    /// The active LSMs, in order (`/sys/kernel/security/lsm`); `None` when securityfs is not
    /// mounted there.
    pub active: Option<String>,
    /// The `lsm=` value of the kernel command line, if any (it replaces the built-in list).
    pub cmdline_lsm: Option<String>,
    /// Why the kernel refused the first BPF LSM program of the probe, if it did.
    pub refused: Option<String>,
}

impl LsmFacts {
    /// Reads the LSM list and the command line; `built_with_bpf_lsm` and `refused` are the
    /// caller's (from the BTF and the probe it already has).
    pub fn gather(built_with_bpf_lsm: Option<bool>, refused: Option<String>) -> LsmFacts {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        LsmFacts {
            built_with_bpf_lsm,
            active: read("/sys/kernel/security/lsm").map(|s| s.trim().to_string()),
            cmdline_lsm: read("/proc/cmdline").and_then(|c| cmdline_lsm(&c)),
            refused,
        }
    }

    /// Whether `bpf` is in the LSM list the kernel runs with: the active list, else the
    /// command line's `lsm=` (which replaces the built-in list); `None` when neither says.
    pub fn bpf_listed(&self) -> Option<bool> {
        self.active
            .as_deref()
            .or(self.cmdline_lsm.as_deref())
            .map(lists_bpf)
    }
}

/// The BTF function whose presence means `CONFIG_BPF_LSM=y`.
pub const BPF_LSM_PROBE_FUNCTION: &str = "bpf_lsm_file_open";

/// The value of the last `lsm=` argument of a kernel command line.
fn cmdline_lsm(cmdline: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .take_while(|a| *a != "--")
        .filter_map(|a| a.strip_prefix("lsm="))
        .last()
        .map(str::to_string)
}

fn lists_bpf(list: &str) -> bool {
    list.split(',').any(|l| l.trim() == "bpf")
}

/// What to do to reach tier 1, one step per line; empty when nothing stands in the way that
/// gatewayd can see (the probe loaded the programs).
pub fn advice(f: &LsmFacts) -> Vec<String> {
    let mut out = Vec::new();
    if f.built_with_bpf_lsm == Some(false) {
        out.push(format!(
            "this kernel was built without CONFIG_BPF_LSM (its BTF has no {BPF_LSM_PROBE_FUNCTION}): \
             tier 1 needs a kernel built with CONFIG_BPF_LSM=y and BTF (CONFIG_DEBUG_INFO_BTF=y); \
             Debian's 6.1 and 6.12 kernels (Debian 12 and 13, including the cloud flavour) are built \
             so and list bpf among the active LSMs by default"
        ));
        return out;
    }
    if f.built_with_bpf_lsm.is_none() {
        out.push(
            "the kernel has no BTF (/sys/kernel/btf/vmlinux): BPF LSM programs attach by BTF id, \
             so tier 1 needs a kernel built with CONFIG_DEBUG_INFO_BTF=y and CONFIG_BPF_LSM=y"
                .into(),
        );
        return out;
    }
    match (&f.active, &f.cmdline_lsm) {
        (Some(active), _) if !lists_bpf(active) => {
            out.push(format!(
                "bpf is not an active LSM (active: {active}); add it to the kernel command line, \
                 keeping the others in their order: lsm={active},bpf (e.g. in GRUB_CMDLINE_LINUX \
                 of /etc/default/grub, then update-grub and reboot)"
            ));
        }
        (None, Some(cmd)) if !lists_bpf(cmd) => {
            out.push(format!(
                "the kernel command line's lsm={cmd} replaces the built-in LSM list and leaves out \
                 bpf; add it: lsm={cmd},bpf (e.g. in GRUB_CMDLINE_LINUX of /etc/default/grub, then \
                 update-grub and reboot)"
            ));
        }
        (None, None) => out.push(
            "the active LSM list is unreadable here (securityfs is not mounted at \
             /sys/kernel/security: `mount -t securityfs securityfs /sys/kernel/security`); \
             if `cat /sys/kernel/security/lsm` does not list bpf, add lsm=<that list>,bpf to \
             the kernel command line and reboot"
                .into(),
        ),
        // The list names bpf; or the command line does, and then it is active unless the
        // build lacks it (checked above).
        _ => {}
    }
    if let Some(why) = &f.refused {
        out.push(format!(
            "the kernel refused gatewayd's BPF LSM programs ({why}); where CONFIG_BPF_LSM is built in \
             and bpf is active, what remains is a policy of this kernel or of the machine it runs \
             on (a lockdown mode, a hypervisor's or another security module's restriction on \
             BPF LSM programs); `gatewayd run` stays at tier 2 (Landlock) here"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_is_listed_by_the_active_list_else_the_command_line() {
        let l = |a, c| facts(None, a, c).bpf_listed();
        assert_eq!(l(Some("lockdown,capability,bpf"), None), Some(true));
        assert_eq!(l(Some("capability,landlock"), Some("bpf")), Some(false));
        assert_eq!(l(None, Some("landlock,bpf")), Some(true));
        assert_eq!(l(None, None), None);
    }

    fn facts(built: Option<bool>, active: Option<&str>, cmd: Option<&str>) -> LsmFacts {
        LsmFacts {
            built_with_bpf_lsm: built,
            active: active.map(Into::into),
            cmdline_lsm: cmd.map(Into::into),
            refused: None,
        }
    }

    #[test]
    fn cmdline_lsm_takes_the_last_value_before_init_arguments() {
        assert_eq!(cmdline_lsm("ro quiet"), None);
        assert_eq!(
            cmdline_lsm("ro lsm=landlock,yama lsm=landlock,bpf quiet").as_deref(),
            Some("landlock,bpf")
        );
        assert_eq!(cmdline_lsm("ro -- lsm=bpf"), None);
    }

    #[test]
    fn without_config_bpf_lsm_the_advice_is_another_kernel() {
        let a = advice(&facts(Some(false), Some("landlock,bpf"), None));
        assert_eq!(a.len(), 1);
        assert!(a[0].contains("CONFIG_BPF_LSM=y"), "{a:?}");
        assert!(advice(&facts(None, None, None))[0].contains("BTF"));
    }

    #[test]
    fn an_inactive_bpf_lsm_gets_the_exact_lsm_argument() {
        let a = advice(&facts(
            Some(true),
            Some("lockdown,capability,landlock"),
            None,
        ));
        assert_eq!(a.len(), 1);
        assert!(
            a[0].contains("lsm=lockdown,capability,landlock,bpf"),
            "{a:?}"
        );
        // `bpftool` is not `bpf`: the list is matched by whole names.
        let a = advice(&facts(Some(true), Some("capability,bpftool"), None));
        assert!(a[0].contains("lsm=capability,bpftool,bpf"), "{a:?}");
        let a = advice(&facts(Some(true), None, Some("landlock,yama")));
        assert!(a[0].contains("lsm=landlock,yama,bpf"), "{a:?}");
        let a = advice(&facts(Some(true), None, None));
        assert!(a[0].contains("mount -t securityfs"), "{a:?}");
    }

    #[test]
    fn an_active_bpf_lsm_that_loads_needs_nothing_and_one_that_refuses_says_why() {
        assert!(advice(&facts(Some(true), Some("capability,landlock,bpf"), None)).is_empty());
        let mut f = facts(Some(true), Some("capability,landlock,bpf"), None);
        f.refused = Some("not loaded: EPERM".into());
        let a = advice(&f);
        assert_eq!(a.len(), 1);
        assert!(a[0].contains("not loaded: EPERM"), "{a:?}");
    }
}

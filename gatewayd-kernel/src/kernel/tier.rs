//! The enforcement tier a session reaches: decided in one place, [`Tier::resolve`], for
//! `gatewayd run`, `gatewayd doctor` and the tests.
use super::{PieceStatus, programs::PROGRAMS};

/// How much of the policy the kernel enforces for a session, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// 1: BPF LSM and cgroup programs: everything.
    Full,
    /// 2: cgroup programs, and Landlock for files and exec (set by the supervisor).
    CgroupLandlock,
    /// 3: cgroup programs only (egress); no file or exec enforcement in the kernel.
    CgroupOnly,
    /// 0: not every cgroup program attached: no tier.
    None,
}

impl Tier {
    /// The tier from what the loader got (`status`: one entry per program it tried; a
    /// program without one did not attach) and whether a Landlock ruleset stands in for the
    /// BPF LSM programs (`run`: the ruleset was built; `doctor`: this kernel has Landlock).
    /// A program that only records does not count.
    pub fn resolve(status: &[PieceStatus], landlock: bool) -> Tier {
        let attached = |name: &str| {
            status
                .iter()
                .any(|s| s.program.name == name && s.result.is_ok())
        };
        let all = |lsm: bool| {
            PROGRAMS
                .iter()
                .filter(|p| p.is_lsm() == lsm && !p.records_only())
                .all(|p| attached(p.name))
        };
        let (lsm, sock) = (all(true), all(false));
        match (lsm, sock, landlock) {
            (true, true, _) => Tier::Full,
            (false, true, true) => Tier::CgroupLandlock,
            (false, true, false) => Tier::CgroupOnly,
            (_, false, _) => Tier::None,
        }
    }

    /// The tier's number: `doctor --json`'s `tier`, `GATEWAYD_EXPECT_TIER` in the tests.
    pub fn level(self) -> u8 {
        match self {
            Tier::Full => 1,
            Tier::CgroupLandlock => 2,
            Tier::CgroupOnly => 3,
            Tier::None => 0,
        }
    }

    /// In words, as the audit log and `doctor` print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Full => "1 (bpf-lsm + cgroup)",
            Tier::CgroupLandlock => {
                "2 (cgroup egress + Landlock files/exec; no BPF LSM, so no bpf() denial)"
            }
            Tier::CgroupOnly => {
                "3 (cgroup egress only; no kernel file enforcement or self-protection)"
            }
            Tier::None => "0 (none: the cgroup egress programs did not attach)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{KernelError, programs::Program};

    fn status(attached: impl Fn(&Program) -> bool) -> Vec<PieceStatus> {
        PROGRAMS
            .iter()
            .map(|p| PieceStatus {
                program: p,
                result: if attached(p) {
                    Ok(())
                } else {
                    Err(KernelError::ProgramMissing {
                        program: p.name,
                        object: "x",
                    })
                },
            })
            .collect()
    }

    #[test]
    fn resolve() {
        let all = status(|_| true);
        assert_eq!(Tier::resolve(&all, false), Tier::Full);
        assert_eq!(Tier::resolve(&all, true), Tier::Full);
        let sock = status(|p| !p.is_lsm());
        assert_eq!(Tier::resolve(&sock, true), Tier::CgroupLandlock);
        assert_eq!(Tier::resolve(&sock, false), Tier::CgroupOnly);
        let one_lsm_missing = status(|p| p.name != "lsm/task_kill");
        assert_eq!(Tier::resolve(&one_lsm_missing, false), Tier::CgroupOnly);
        let one_sock_missing = status(|p| p.name != "cgroup/sendmsg6");
        assert_eq!(Tier::resolve(&one_sock_missing, true), Tier::None);
        assert_eq!(Tier::resolve(&[], true), Tier::None);
        let no_inbound = status(|p| p.name != "cgroup_skb/ingress");
        assert_eq!(Tier::resolve(&no_inbound, true), Tier::None);
        let no_recorder = status(|p| !p.records_only());
        assert_eq!(Tier::resolve(&no_recorder, false), Tier::Full);
    }

    #[test]
    fn levels_are_distinct_and_lead_the_text() {
        let tiers = [
            Tier::Full,
            Tier::CgroupLandlock,
            Tier::CgroupOnly,
            Tier::None,
        ];
        for t in tiers {
            assert!(t.as_str().starts_with(&format!("{} ", t.level())), "{t:?}");
            assert_eq!(tiers.iter().filter(|u| u.level() == t.level()).count(), 1);
        }
    }
}

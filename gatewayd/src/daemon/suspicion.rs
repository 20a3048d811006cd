//! Kernel denials feed the sessions' Rule of Two (docs/POLICY.md, "Suspicion"): a process of
//! a session's cgroup that the kernel stopped from opening a protected file counts like a
//! gateway denial of one, as the policy's `suspicion` says.
use serde_json::json;

use super::{Gateway, peer::is_within};
use crate::protocol::RpcError;
use gateway_common::Reason;
use gatewayd_core::audit::Decision as AD;

impl Gateway {
    /// A kernel denial (`reason`, as the kernel's event decoded) of a process in `cgroup`
    /// (its cgroup v2 path, as in `/proc/PID/cgroup`). For `protected_path` and
    /// `protected_name` (an attempt on a secret), every open
    /// session whose owner cgroup is `cgroup` or one of its ancestors gets the policy's
    /// `suspicion` mode applied (`private`: the private leg; `lockdown`: both legs, and the
    /// trip hook runs); each change is recorded (`suspicion`). Other reasons change nothing.
    /// Returns how many sessions changed. An `Err` is a failed record or a failed trip hook;
    /// the legs are set regardless.
    pub async fn note_kernel_denial(
        &self,
        cgroup: &str,
        reason: Reason,
    ) -> Result<usize, RpcError> {
        if !reason.is_secret_attempt() {
            return Ok(0);
        }
        let mut changed = 0;
        let mut first_err = None;
        for slot in self.sessions.list() {
            if !is_within(cgroup, &slot.owner_cgroup) {
                continue;
            }
            let mut st = slot.state.lock().await;
            if !self.engine().note_suspicion(&mut st.session) {
                continue;
            }
            changed += 1;
            let detail = json!({"cause": "kernel", "reason": reason.name(), "cgroup": cgroup,
                "mode": self.engine().policy().suspicion, "legs": st.session.legs()});
            let noted = self.note(&slot.id, AD::Info, "suspicion", detail).await;
            let hooked = self
                .after_change(&slot, &mut st, None, "kernel/denial")
                .await
                .map_err(|e| RpcError::new(crate::protocol::code::LOCKDOWN_FAILED, e));
            if let Err(e) = noted.and(hooked) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(changed), Err)
    }
}

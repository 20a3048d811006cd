//! The operator's methods of [`Gateway`]: held calls (`approvals/*`) and the open sessions
//! (`session/list`). Only for root or the socket's group, outside every agent cgroup and every
//! cgroup that opened a session (an agent never approves its own calls).
use serde_json::json;

use super::{gateway::Gateway, peer::Peer};
use crate::protocol::{PendingApproval, RpcError, SessionInfo, Settled, code};
use gatewayd_core::{audit::Decision as AD, engine::ApprovalState};

impl Gateway {
    /// Operators: root or the socket's group, outside every agent cgroup and every cgroup
    /// that opened a session (an agent never approves its own calls).
    pub(super) async fn require_operator(&self, peer: &Peer, method: &str) -> Result<(), RpcError> {
        let cg = Self::cgroup_of(peer)?;
        let why = if self.agents.contains(cg) {
            Some(format!(
                "the caller is inside the agent cgroup subtree of {cg}"
            ))
        } else if self.sessions.is_opener(cg) {
            Some(format!(
                "the caller's cgroup {cg} has an open agent session"
            ))
        } else if !peer.is_root_or_member(self.operator_gid) {
            Some(format!(
                "uid {} is neither root nor in the socket's group (gid {})",
                peer.uid, self.operator_gid
            ))
        } else {
            None
        };
        let Some(why) = why else { return Ok(()) };
        self.note(
            "-",
            AD::Deny,
            "not_operator",
            json!({"method": method, "peer": peer, "why": why}),
        )
        .await?;
        Err(RpcError::new(
            code::NOT_PERMITTED,
            format!("`{method}` is for operators only: {why}"),
        ))
    }

    /// `session/list` (operators only): every open session, oldest first.
    pub async fn sessions_list(&self, peer: &Peer) -> Result<Vec<SessionInfo>, RpcError> {
        self.require_operator(peer, "session/list").await?;
        let mut out = Vec::new();
        for slot in self.sessions.list() {
            let st = slot.state.lock().await;
            let s = &st.session;
            out.push(SessionInfo {
                session: slot.id.clone(),
                user: s.user.clone(),
                scopes: s.scopes.iter().cloned().collect(),
                cgroup: slot.owner_cgroup.clone(),
                pid: slot.opener.pid,
                uid: slot.opener.uid,
                created_ms: slot.created_ms,
                legs: s.legs(),
                tripped: s.legs().tripped(),
                spent: s.spent(),
                secrets: s.secret_names(),
            });
        }
        Ok(out)
    }

    /// `approvals/list` (operators only): pending approvals, oldest first, each with its
    /// session's legs (None: the session is closed).
    pub async fn approvals_list(&self, peer: &Peer) -> Result<Vec<PendingApproval>, RpcError> {
        self.require_operator(peer, "approvals/list").await?;
        let mut out = Vec::new();
        for approval in self.engine().pending() {
            let legs = match self.sessions.get(&approval.session) {
                Some(slot) => Some(slot.state.lock().await.session.legs()),
                None => None,
            };
            out.push(PendingApproval { approval, legs });
        }
        Ok(out)
    }

    /// `approvals/approve` (`approve` true) or `approvals/deny`.
    pub async fn settle(
        &self,
        peer: &Peer,
        id: String,
        approve: bool,
    ) -> Result<Settled, RpcError> {
        let method = if approve {
            "approvals/approve"
        } else {
            "approvals/deny"
        };
        self.require_operator(peer, method).await?;
        let session = self
            .engine()
            .pending()
            .into_iter()
            .find(|a| a.id == id)
            .map_or_else(|| "-".into(), |a| a.session);
        let r = if approve {
            self.engine().approve(&id)
        } else {
            self.engine().reject(&id)
        };
        r.map_err(|e| RpcError::new(code::APPROVAL, e.to_string()))?;
        let (reason, state) = if approve {
            ("approval_granted", ApprovalState::Approved)
        } else {
            ("approval_rejected", ApprovalState::Rejected)
        };
        self.note(&session, AD::Info, reason, json!({"id": id, "by": peer}))
            .await?;
        Ok(Settled { id, state })
    }
}

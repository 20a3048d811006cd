//! Held calls waiting for a person: bound to session, tool, exact canonical arguments and
//! the reasons of the hold; single use; with a time-to-live.
use std::collections::HashMap;

use super::error::ApprovalError;

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a person.
    Pending,
    /// Approved: the next identical call presenting the id is allowed, once.
    Approved,
    /// Rejected: presenting the id denies.
    Rejected,
}

/// One held call.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Approval {
    /// Random 128-bit id, lowercase hex: what a person approves or rejects.
    pub id: String,
    /// Id of the session whose call was held.
    pub session: String,
    /// The held tool.
    pub tool: String,
    /// SHA-256 of the canonical JSON of the arguments (after path canonicalisation).
    pub args_sha256: String,
    /// The arguments themselves, as the call would run with them (paths canonicalised): what a
    /// person approves.
    pub arguments: serde_json::Value,
    /// Why the call was held (`trifecta`, `rule:ID`, `default:hold`); the approval covers exactly
    /// these.
    pub reasons: Vec<String>,
    /// When held, ms since the Unix epoch.
    pub created_ms: u64,
    /// When it stops being usable, ms since the Unix epoch.
    pub expires_ms: u64,
    /// Where it stands.
    pub state: ApprovalState,
}

/// All approvals of one engine.
#[derive(Debug, Default)]
pub(crate) struct Approvals {
    map: HashMap<String, Approval>,
}

impl Approvals {
    /// Adds `a`, first forgetting approvals expired for longer than their own lifetime (`now` in
    /// ms).
    pub(crate) fn insert(&mut self, a: Approval, now: u64) {
        // Forget approvals expired for longer than their own lifetime: a later use of such
        // an id is "unknown", which is denied all the same.
        self.map
            .retain(|_, x| now <= x.expires_ms.saturating_add(x.expires_ms - x.created_ms));
        self.map.insert(a.id.clone(), a);
    }

    /// The approval with this id, whatever its state.
    pub(crate) fn get(&self, id: &str) -> Option<&Approval> {
        self.map.get(id)
    }

    /// Single use: the approval is gone once taken.
    pub(crate) fn take(&mut self, id: &str) -> Option<Approval> {
        self.map.remove(id)
    }

    /// Sets the state of a pending approval that has not expired.
    pub(crate) fn set(
        &mut self,
        id: &str,
        state: ApprovalState,
        now: u64,
    ) -> Result<(), ApprovalError> {
        let a = self
            .map
            .get_mut(id)
            .ok_or_else(|| ApprovalError::Unknown(id.to_owned()))?;
        if a.state != ApprovalState::Pending {
            return Err(ApprovalError::AlreadyDecided(id.to_owned()));
        }
        if now > a.expires_ms {
            return Err(ApprovalError::Expired(id.to_owned()));
        }
        a.state = state;
        Ok(())
    }

    /// The id of an unexpired approval in `state` for exactly this call: `Pending`, the
    /// same call held again; `Approved`, the same call repeated without the id (a host's
    /// hook carries none), which finds the approval a person gave it.
    pub(crate) fn find(
        &self,
        state: ApprovalState,
        session: &str,
        tool: &str,
        args_sha256: &str,
        reasons: &[String],
        now: u64,
    ) -> Option<String> {
        self.map
            .values()
            .find(|a| {
                a.state == state
                    && now <= a.expires_ms
                    && a.session == session
                    && a.tool == tool
                    && a.args_sha256 == args_sha256
                    && a.reasons == reasons
            })
            .map(|a| a.id.clone())
    }

    /// Pending, unexpired approvals at `now` (ms), oldest first.
    pub(crate) fn pending(&self, now: u64) -> Vec<Approval> {
        let mut v: Vec<Approval> = self
            .map
            .values()
            .filter(|a| a.state == ApprovalState::Pending && now <= a.expires_ms)
            .cloned()
            .collect();
        v.sort_by_key(|a| a.created_ms);
        v
    }
}

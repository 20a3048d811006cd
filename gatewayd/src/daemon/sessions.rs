//! The open sessions, each behind its own async mutex (a session's calls are decided one at
//! a time, in order, with its state consistent; different sessions go in parallel), and the
//! registry of agent cgroups.
use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, RwLock},
};

use super::peer::{Peer, is_within};
use gatewayd_core::engine::Session;

/// Most sessions open at once.
pub(crate) const MAX_SESSIONS: usize = 65_536;

/// Where `gatewayd run` creates its agents' cgroups (relative to the cgroup v2 mount): always
/// an agent subtree.
pub(crate) const AGENT_CGROUP_ROOT: &str = "/gatewayd";

/// One open session.
#[derive(Debug)]
pub struct SessionSlot {
    /// The session id.
    pub id: String,
    /// The cgroup that opened it: the only one that may use it.
    pub owner_cgroup: String,
    /// Who opened it: pid, uid and gid at connect time.
    pub opener: Peer,
    /// When it was opened, ms since the Unix epoch.
    pub created_ms: u64,
    /// The engine's session state; held for the whole of one call.
    pub state: tokio::sync::Mutex<SessionState>,
}

/// What a session's calls change.
#[derive(Debug)]
pub struct SessionState {
    /// The engine's per-session state.
    pub session: Session,
    /// The Rule-of-Two hook already ran for this session.
    pub trip_reported: bool,
}

/// Why a session could not be added.
#[derive(Debug)]
pub enum AddError {
    /// The id is taken (by the returned session).
    Exists(Arc<SessionSlot>),
    /// [`MAX_SESSIONS`] sessions are open.
    Full,
}

/// The open sessions, by id.
#[derive(Debug, Default)]
pub struct Sessions {
    map: RwLock<HashMap<String, Arc<SessionSlot>>>,
}

impl Sessions {
    /// The open session with this id.
    pub fn get(&self, id: &str) -> Option<Arc<SessionSlot>> {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Adds `slot`; refused when its id is taken or [`MAX_SESSIONS`] are open.
    pub fn add(&self, slot: SessionSlot) -> Result<Arc<SessionSlot>, AddError> {
        let mut m = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = m.get(&slot.id) {
            return Err(AddError::Exists(s.clone()));
        }
        if m.len() >= MAX_SESSIONS {
            return Err(AddError::Full);
        }
        let slot = Arc::new(slot);
        m.insert(slot.id.clone(), slot.clone());
        Ok(slot)
    }

    /// Forgets the session with this id, returning it.
    pub fn remove(&self, id: &str) -> Option<Arc<SessionSlot>> {
        self.map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id)
    }

    /// Every open session, oldest first.
    pub fn list(&self) -> Vec<Arc<SessionSlot>> {
        let mut v: Vec<_> = self
            .map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        v.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        v
    }

    /// Whether an open session was opened from exactly this cgroup.
    pub fn is_opener(&self, cgroup: &str) -> bool {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .any(|s| s.owner_cgroup == cgroup)
    }
}

/// The cgroup subtrees where agents run: [`AGENT_CGROUP_ROOT`], those given with
/// `--agent-cgroup`, and those a supervisor registers while its agent runs.
#[derive(Debug)]
pub struct AgentCgroups(RwLock<BTreeSet<String>>);

impl Default for AgentCgroups {
    fn default() -> Self {
        AgentCgroups(RwLock::new(BTreeSet::from([AGENT_CGROUP_ROOT.to_owned()])))
    }
}

impl AgentCgroups {
    /// Adds an agent cgroup subtree, by its path below the cgroup v2 mount.
    pub fn add(&self, path: &str) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(path.to_owned());
    }

    /// Removes a subtree added with [`AgentCgroups::add`].
    pub fn remove(&self, path: &str) {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(path);
    }

    /// Whether `cgroup` is one of the subtrees or inside one.
    pub fn contains(&self, cgroup: &str) -> bool {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|root| is_within(cgroup, root))
    }

    /// Every subtree, sorted.
    pub fn list(&self) -> Vec<String> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

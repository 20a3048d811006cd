//! The memory the daemon spends on lines still being read, bounded over all connections
//! (docs/PROTOCOL.md, "Limits"): each connection reads up to [`LINE_FREE`] bytes of a line on
//! its own; beyond that it takes bytes from one budget shared by every connection
//! ([`LINE_BUDGET`]), and gives them back when the line is whole. A connection that finds the
//! budget spent gets a `limit` error and is closed (the rest of its line cannot be told from
//! the next message). So many clients half-sending 1 MiB lines hold at most
//! `connections × (LINE_FREE + read buffer) + LINE_BUDGET`, not `connections × 1 MiB`. One
//! peer (the cgroup it runs in, else its uid) takes at most [`PEER_BUDGET`] of it, so one
//! agent cannot hold the budget other peers' long messages need.
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes of a line a connection may hold without the shared budget.
pub const LINE_FREE: usize = 16 * 1024;

/// Bytes of unfinished lines beyond [`LINE_FREE`] all connections may hold together.
pub const LINE_BUDGET: usize = 64 << 20;

/// Bytes of the budget one peer may hold at once.
pub const PEER_BUDGET: usize = 8 << 20;

/// Peers whose budgets are kept before the unused ones are forgotten.
const PEERS_KEPT: usize = 1024;

/// Taken from the budget in steps of this many bytes.
const STEP: usize = 64 * 1024;

/// The shared budget, and each peer's part of it.
#[derive(Debug, Clone)]
pub struct Budget {
    all: Arc<Semaphore>,
    per_peer: usize,
    peers: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

impl Budget {
    /// A budget of `bytes`, of which one peer holds at most `per_peer`.
    pub fn new(bytes: usize, per_peer: usize) -> Budget {
        Budget {
            all: Arc::new(Semaphore::new(bytes)),
            per_peer,
            peers: Arc::default(),
        }
    }

    /// Bytes left.
    pub fn available(&self) -> usize {
        self.all.available_permits()
    }

    /// The budget of peer `key` (its cgroup, else its uid), shared by its connections.
    fn of_peer(&self, key: &str) -> Arc<Semaphore> {
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if peers.len() >= PEERS_KEPT {
            // Forget the budgets no connection holds (nothing is taken from them).
            peers.retain(|_, s| Arc::strong_count(s) > 1);
        }
        peers
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_peer)))
            .clone()
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(LINE_BUDGET, PEER_BUDGET)
    }
}

/// What one connection holds of the budget for the line it is reading.
#[derive(Debug)]
pub struct Held {
    budget: Budget,
    peer: Arc<Semaphore>,
    permit: Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
    bytes: usize,
}

impl Held {
    /// Nothing held yet, for a connection of peer `key` (its cgroup, else its uid).
    pub fn new(budget: Budget, key: &str) -> Held {
        Held {
            peer: budget.of_peer(key),
            budget,
            permit: None,
            bytes: 0,
        }
    }

    /// Makes room for a line of `len` bytes: false when the budget cannot give it.
    pub fn room_for(&mut self, len: usize) -> bool {
        let over = len.saturating_sub(LINE_FREE);
        if over <= self.bytes {
            return true;
        }
        let need = (over - self.bytes).div_ceil(STEP) * STEP;
        let Ok(n) = u32::try_from(need) else {
            return false;
        };
        let Ok(mine) = self.peer.clone().try_acquire_many_owned(n) else {
            return false;
        };
        let Ok(shared) = self.budget.all.clone().try_acquire_many_owned(n) else {
            return false;
        };
        match &mut self.permit {
            Some((p, a)) => {
                p.merge(mine);
                a.merge(shared);
            }
            None => self.permit = Some((mine, shared)),
        }
        self.bytes += need;
        true
    }

    /// Gives back what the finished line held.
    pub fn release(&mut self) {
        self.permit = None;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_beyond_the_free_part_share_one_budget() {
        let budget = Budget::new(2 * STEP, 2 * STEP);
        let mut a = Held::new(budget.clone(), "/a");
        let mut b = Held::new(budget.clone(), "/b");
        assert!(a.room_for(LINE_FREE), "the free part needs nothing");
        assert_eq!(budget.available(), 2 * STEP);
        assert!(a.room_for(LINE_FREE + 1));
        assert!(a.room_for(LINE_FREE + STEP), "within the step taken");
        assert!(b.room_for(LINE_FREE + STEP));
        assert!(!b.room_for(LINE_FREE + STEP + 1), "spent");
        a.release();
        assert!(b.room_for(LINE_FREE + 2 * STEP), "given back");
        b.release();
        assert_eq!(budget.available(), 2 * STEP);
    }

    #[test]
    fn one_peer_holds_its_part_only_and_others_still_get_room() {
        let budget = Budget::new(4 * STEP, 2 * STEP);
        let mut agent: Vec<Held> = (0..3)
            .map(|_| Held::new(budget.clone(), "/agent"))
            .collect();
        assert!(agent[0].room_for(LINE_FREE + STEP));
        assert!(agent[1].room_for(LINE_FREE + STEP));
        assert!(
            !agent[2].room_for(LINE_FREE + 1),
            "a third connection of the same peer is over its part"
        );
        assert_eq!(budget.available(), 2 * STEP, "a refused try takes nothing");
        let mut other = Held::new(budget.clone(), "/other");
        assert!(
            other.room_for(LINE_FREE + 2 * STEP),
            "another peer is not starved"
        );
        agent[0].release();
        assert!(
            agent[2].room_for(LINE_FREE + STEP),
            "given back to the peer"
        );
    }
}

//! The memory the daemon spends on lines still being read, bounded over all connections
//! (docs/PROTOCOL.md, "Limits"): each connection reads up to [`LINE_FREE`] bytes of a line on
//! its own; beyond that it takes bytes from one budget shared by every connection
//! ([`LINE_BUDGET`]), and gives them back when the line is whole. A connection that finds the
//! budget spent gets a `limit` error and is closed (the rest of its line cannot be told from
//! the next message). So many clients half-sending 1 MiB lines hold at most
//! `connections × (LINE_FREE + read buffer) + LINE_BUDGET`, not `connections × 1 MiB`.
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes of a line a connection may hold without the shared budget.
pub const LINE_FREE: usize = 16 * 1024;

/// Bytes of unfinished lines beyond [`LINE_FREE`] all connections may hold together.
pub const LINE_BUDGET: usize = 64 << 20;

/// Taken from the budget in steps of this many bytes.
const STEP: usize = 64 * 1024;

/// The shared budget.
#[derive(Debug, Clone)]
pub struct Budget(Arc<Semaphore>);

impl Budget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> Budget {
        Budget(Arc::new(Semaphore::new(bytes)))
    }

    /// Bytes left.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(LINE_BUDGET)
    }
}

/// What one connection holds of the budget for the line it is reading.
#[derive(Debug)]
pub struct Held {
    budget: Budget,
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl Held {
    /// Nothing held yet.
    pub fn new(budget: Budget) -> Held {
        Held {
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
        match self.budget.0.clone().try_acquire_many_owned(n) {
            Ok(p) => {
                match &mut self.permit {
                    Some(held) => held.merge(p),
                    None => self.permit = Some(p),
                }
                self.bytes += need;
                true
            }
            Err(_) => false,
        }
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
        let budget = Budget::new(2 * STEP);
        let mut a = Held::new(budget.clone());
        let mut b = Held::new(budget.clone());
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
}

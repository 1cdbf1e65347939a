//! Per-conversation serialization of skill injections: a bounded table of async mutexes
//! that never evicts a lock someone holds or waits for.

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// Default number of idle conversation locks kept.
pub const DEFAULT_LOCK_TABLE_BOUND: usize = 1024;

/// One async mutex per conversation id.
///
/// The bound counts entries; when an insert goes over it, entries that nobody holds or waits
/// for are dropped. An entry is only ever dropped while the table is its sole owner, and a
/// caller gets its handle under the same shard lock that eviction takes, so a held lock is
/// never replaced by a fresh one (which would let two tasks into one conversation). When every
/// entry is in use the table grows past the bound rather than break that rule.
#[derive(Debug)]
pub struct ConversationLocks {
    locks: DashMap<String, Arc<Mutex<()>>>,
    bound: usize,
}

impl Default for ConversationLocks {
    fn default() -> Self {
        Self::new(DEFAULT_LOCK_TABLE_BOUND)
    }
}

/// Holds one conversation's lock until dropped.
#[derive(Debug)]
pub struct ConversationGuard {
    conversation_id: String,
    _guard: OwnedMutexGuard<()>,
}

impl ConversationGuard {
    /// The conversation this guard serializes.
    pub fn conversation_id(&self) -> &str {
        &self.conversation_id
    }
}

impl ConversationLocks {
    /// A table keeping at most about `bound` idle locks (at least 1).
    pub fn new(bound: usize) -> Self {
        Self {
            locks: DashMap::new(),
            bound: bound.max(1),
        }
    }

    /// The bound.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// Entries in the table (held, awaited or idle).
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    fn handle(&self, conversation_id: &str) -> Arc<Mutex<()>> {
        if let Some(existing) = self.locks.get(conversation_id) {
            return Arc::clone(existing.value());
        }
        let handle = Arc::clone(
            self.locks
                .entry(conversation_id.to_owned())
                .or_insert_with(|| Arc::new(Mutex::new(())))
                .value(),
        );
        if self.locks.len() > self.bound {
            self.evict_idle();
        }
        handle
    }

    /// Drops every entry that only the table refers to: nobody holds it, nobody waits for it.
    pub fn evict_idle(&self) {
        self.locks.retain(|_, lock| Arc::strong_count(lock) > 1);
    }

    /// Waits for the conversation's lock.
    pub async fn lock(&self, conversation_id: &str) -> ConversationGuard {
        let handle = self.handle(conversation_id);
        ConversationGuard {
            conversation_id: conversation_id.to_owned(),
            _guard: handle.lock_owned().await,
        }
    }

    /// Takes the conversation's lock if it is free.
    pub fn try_lock(&self, conversation_id: &str) -> Option<ConversationGuard> {
        let handle = self.handle(conversation_id);
        handle.try_lock_owned().ok().map(|guard| ConversationGuard {
            conversation_id: conversation_id.to_owned(),
            _guard: guard,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn same_conversation_is_serialized() {
        let locks = ConversationLocks::new(8);
        let held = locks.lock("c1").await;
        assert!(locks.try_lock("c1").is_none());
        assert!(locks.try_lock("c2").is_some());
        drop(held);
        assert!(locks.try_lock("c1").is_some());
    }

    #[test]
    fn held_locks_survive_eviction() {
        let locks = ConversationLocks::new(2);
        let a = locks.try_lock("a").unwrap();
        let b = locks.try_lock("b").unwrap();
        for i in 0..50 {
            drop(locks.try_lock(&format!("idle-{i}")));
        }
        // The two held locks are still the same locks: nobody else gets in.
        assert!(locks.try_lock("a").is_none());
        assert!(locks.try_lock("b").is_none());
        assert!(
            locks.len() <= 3,
            "idle entries are evicted: {}",
            locks.len()
        );
        assert_eq!(a.conversation_id(), "a");
        drop((a, b));
        locks.evict_idle();
        assert!(locks.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_not_evicted() {
        let locks = Arc::new(ConversationLocks::new(1));
        let held = locks.lock("a").await;
        let waiter = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let _g = locks.lock("a").await;
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        for i in 0..20 {
            drop(locks.try_lock(&format!("x{i}")));
        }
        // The waiter still waits on the held lock, not on a fresh one.
        assert!(!waiter.is_finished());
        assert!(locks.try_lock("a").is_none());
        drop(held);
        waiter.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_tasks_never_overlap_in_one_conversation() {
        let locks = Arc::new(ConversationLocks::new(4));
        let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..64 {
            let locks = Arc::clone(&locks);
            let inside = Arc::clone(&inside);
            tasks.push(tokio::spawn(async move {
                let conv = format!("c{}", i % 8);
                let _g = locks.lock(&conv).await;
                if conv == "c0" {
                    let now = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    assert_eq!(now, 0, "two tasks inside conversation c0");
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
}

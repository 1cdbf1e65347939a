//! Group commit: appends to one conversation share `fsync`s.
//!
//! An append queues its batch and waits. One blocking task at a time, the *leader*, takes
//! every queued batch, writes them in order in one pass under the file's locks, makes them
//! durable with one `fsync`, and hands each batch its outcome; it goes on while batches keep
//! coming, and stops when the queue is empty. Writers never touch the file themselves, so the
//! time between two flushes is spent writing lines, not passing turns between threads.
//!
//! A flush that starts the moment the previous one ends covers only the batches queued while
//! it ran: with `n` writers in a loop, the groups would settle into two cohorts of `n / 2`.
//! The leader therefore first waits, briefly, for as many batches as there were appends in
//! flight during the previous group — the writers it just answered are on their way back —
//! and then writes and flushes them all together. The wait is bounded by half the last
//! flush's duration (between [`WAIT_MIN`] and [`WAIT_MAX`]): a writer that does not come
//! back costs at most that once, and the expected group shrinks to the appends in flight.
//! For the first half of the window the leader looks at the queue without sleeping (it
//! yields the CPU between looks): the writers come back within tens of microseconds, and on
//! a virtual machine waking a sleeping thread costs about as much again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ba_protocol::LogEntry;
use tokio::sync::oneshot;

use super::{FileStore, lock};
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::store::Appended;

/// The shortest and longest a leader waits for its group to fill.
const WAIT_MIN: Duration = Duration::from_micros(20);
const WAIT_MAX: Duration = Duration::from_micros(500);

/// The group-commit state of one conversation file.
#[derive(Debug, Default)]
pub(super) struct GroupCommit {
    queue: Mutex<Queue>,
    /// Signalled when a batch is queued, for a leader waiting for its group.
    queued: Condvar,
    /// Appends between their start and their outcome.
    in_flight: AtomicU64,
    /// The most appends in flight since the leader last took a group.
    peak: AtomicU64,
    /// How long the last flush took, in nanoseconds.
    last_flush_ns: AtomicU64,
    /// How many batches are queued (read without the lock).
    queued_len: AtomicU64,
}

#[derive(Debug)]
struct Queue {
    batches: Vec<Queued>,
    /// Whether a leader is running (it takes every batch queued before it stops).
    leading: bool,
    /// How many queued batches the waiting leader wants woken for (`u64::MAX` when it is not
    /// waiting), so a filling group wakes it once rather than at every batch.
    wanted: u64,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            batches: Vec::new(),
            leading: false,
            wanted: u64::MAX,
        }
    }
}

#[derive(Debug)]
struct Queued {
    entries: Vec<LogEntry>,
    expect_last: Option<u64>,
    outcome: oneshot::Sender<Result<Appended>>,
}

/// The lead, handed to the blocking task. Should the task never run (the runtime is
/// shutting down) or panic, dropping it gives the lead up and drops the queued batches, so
/// their writers get an error instead of waiting forever.
struct Leader {
    commit: Arc<GroupCommit>,
    done: bool,
}

impl Leader {
    /// The lead was given up by the leader itself, with the queue empty.
    fn finished(&mut self) {
        self.done = true;
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if !self.done {
            let mut queue = lock(&self.commit.queue);
            queue.leading = false;
            queue.batches.clear();
            self.commit.queued_len.store(0, Ordering::SeqCst);
        }
    }
}

/// An append in flight: counted until dropped.
struct InFlight<'a>(&'a GroupCommit);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl GroupCommit {
    /// Appends `entries` to conversation `id` of `store` and returns once they are on disk.
    /// The append goes ahead even when the returned future is dropped.
    pub(super) async fn append(
        self: &Arc<Self>,
        store: &FileStore,
        id: &ConversationId,
        entries: Vec<LogEntry>,
        expect_last: Option<u64>,
    ) -> Result<Appended> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let _in_flight = InFlight(self);
        self.peak.fetch_max(now, Ordering::SeqCst);
        let (outcome, answer) = oneshot::channel();
        let (lead, wake) = {
            let mut queue = lock(&self.queue);
            queue.batches.push(Queued {
                entries,
                expect_last,
                outcome,
            });
            self.queued_len
                .store(queue.batches.len() as u64, Ordering::SeqCst);
            (
                !std::mem::replace(&mut queue.leading, true),
                queue.batches.len() as u64 >= queue.wanted,
            )
        };
        if wake {
            self.queued.notify_one();
        }
        if lead {
            let mut leader = Leader {
                commit: self.clone(),
                done: false,
            };
            let (store, id) = (store.clone(), id.clone());
            // Not awaited: the leader answers every batch it takes, this one included.
            drop(tokio::task::spawn_blocking(move || {
                leader.commit.lead(&store, &id);
                leader.finished();
            }));
        }
        answer.await.map_err(|_| {
            StorageError::Task("the group commit ended without answering an append".to_owned())
        })?
    }

    /// Takes, writes and flushes groups until the queue is empty.
    fn lead(&self, store: &FileStore, id: &ConversationId) {
        loop {
            let group = self.take_group();
            if group.is_empty() {
                return;
            }
            let (batches, outcomes): (Vec<_>, Vec<_>) = group
                .into_iter()
                .map(|q| ((q.entries, q.expect_last), q.outcome))
                .unzip();
            let started = Instant::now();
            let results = store.commit_group(id, &batches);
            let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.last_flush_ns.store(took, Ordering::Relaxed);
            for (outcome, result) in outcomes.into_iter().zip(results) {
                // A writer that stopped waiting no longer needs its answer.
                let _ = outcome.send(result);
            }
        }
    }

    /// Waits (briefly) for the group to fill and takes it; empty, with the lead given up,
    /// when nothing is queued.
    fn take_group(&self) -> Vec<Queued> {
        let expected = self
            .peak
            .swap(self.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
        let window = Duration::from_nanos(self.last_flush_ns.load(Ordering::Relaxed) / 2)
            .clamp(WAIT_MIN, WAIT_MAX);
        let deadline = Instant::now() + window;
        // Writers answered a moment ago come back within microseconds; sleeping would add the
        // wake-up of this thread to the wait, so look without sleeping (yielding the CPU) for
        // the first part of the window.
        let spin_until = Instant::now() + window / 2;
        while self.queued_len.load(Ordering::SeqCst) < expected && Instant::now() < spin_until {
            std::thread::yield_now();
        }
        let mut queue = lock(&self.queue);
        queue.wanted = expected;
        while (queue.batches.len() as u64) < expected {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            queue = self
                .queued
                .wait_timeout(queue, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        queue.wanted = u64::MAX;
        if queue.batches.is_empty() {
            queue.leading = false;
        }
        self.queued_len.store(0, Ordering::SeqCst);
        std::mem::take(&mut queue.batches)
    }
}

//! Simulated write failures (feature `test-util`): a full disk without filling one, and
//! writes cut into small pieces so a killed process leaves a torn line behind. The seam also
//! counts what goes through it (appends written, `fsync`s of appended lines), so a test can
//! show that an acknowledged append was made durable.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Makes writes fail after a number of bytes, the way a full disk does (tests of the
/// no-space path without filling a disk), or cuts them into small `write` calls so that a
/// killed process leaves a torn line behind (crash tests). Clones share the budget and the
/// counts.
///
/// Every append's write and every `fsync` of appended lines goes through it: [`writes`]
/// counts the writes that completed, [`syncs`] the `fsync`s, and [`synced_writes`] how many
/// writes had completed when the latest finished `fsync` started — an append whose write was
/// the `n`-th is on disk once `synced_writes() >= n`.
///
/// [`writes`]: WriteFault::writes
/// [`syncs`]: WriteFault::syncs
/// [`synced_writes`]: WriteFault::synced_writes
#[derive(Debug, Clone)]
pub struct WriteFault {
    remaining: Arc<AtomicU64>,
    chunk: Option<usize>,
    counts: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    writes: AtomicU64,
    syncs: AtomicU64,
    /// The most writes any finished `fsync` covered (writes completed when it started).
    synced: AtomicU64,
    /// Appends that reached the store (started), written or not.
    arrived: AtomicU64,
    /// Syncs wait until this many appends arrived (0: they do not wait).
    hold_until: AtomicU64,
    gate: Mutex<()>,
    arrivals: Condvar,
}

/// A held `fsync` goes on after this long even if the appends it waits for never come, so a
/// broken store fails its test's counts instead of hanging it.
const HOLD_LIMIT: Duration = Duration::from_secs(20);

impl WriteFault {
    /// Writes fail once `bytes` more bytes have been written.
    pub fn fail_after(bytes: u64) -> Self {
        Self {
            remaining: Arc::new(AtomicU64::new(bytes)),
            chunk: None,
            counts: Arc::default(),
        }
    }

    /// Writes go out in `write` calls of at most `bytes` bytes (and never fail).
    pub fn chunked(bytes: usize) -> Self {
        Self {
            chunk: Some(bytes.max(1)),
            ..Self::fail_after(u64::MAX)
        }
    }

    /// Nothing fails: the writes and `fsync`s are only counted.
    pub fn counting() -> Self {
        Self::fail_after(u64::MAX)
    }

    /// Makes every `fsync` of appended lines wait until `appends` appends have reached the
    /// store (or a long time has passed), so that concurrent appends are sure to be waiting
    /// for the next one.
    pub fn hold_syncs_until(self, appends: u64) -> Self {
        self.counts.hold_until.store(appends, Ordering::SeqCst);
        self
    }

    /// Appends that reached the store so far, written or not.
    pub fn arrived(&self) -> u64 {
        self.counts.arrived.load(Ordering::SeqCst)
    }

    /// Counts an append reaching the store.
    pub(crate) fn arrive(&self) {
        let c = &self.counts;
        let _gate = c
            .gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.arrived.fetch_add(1, Ordering::SeqCst);
        c.arrivals.notify_all();
    }

    /// Appends written so far (whole batches, one each).
    pub fn writes(&self) -> u64 {
        self.counts.writes.load(Ordering::SeqCst)
    }

    /// `fsync`s of appended lines finished so far.
    pub fn syncs(&self) -> u64 {
        self.counts.syncs.load(Ordering::SeqCst)
    }

    /// How many writes had completed when the latest finished `fsync` started: every append
    /// written up to that count is durable.
    pub fn synced_writes(&self) -> u64 {
        self.counts.synced.load(Ordering::SeqCst)
    }

    /// Runs `sync` (the store's `fsync` of appended lines) and counts it.
    pub(crate) fn sync(&self, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let c = &self.counts;
        let hold = c.hold_until.load(Ordering::SeqCst);
        if hold > 0 {
            let gate = c
                .gate
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let _released = c
                .arrivals
                .wait_timeout_while(gate, HOLD_LIMIT, |_| {
                    c.arrived.load(Ordering::SeqCst) < hold
                })
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let covered = c.writes.load(Ordering::SeqCst);
        sync()?;
        c.syncs.fetch_add(1, Ordering::SeqCst);
        c.synced.fetch_max(covered, Ordering::SeqCst);
        Ok(())
    }

    fn wrote(&self) {
        self.counts.writes.fetch_add(1, Ordering::SeqCst);
    }

    /// Gives the disk `bytes` of room again.
    pub fn set_remaining(&self, bytes: u64) {
        self.remaining.store(bytes, Ordering::SeqCst);
    }

    pub(crate) fn write(&self, file: &mut impl io::Write, buf: &[u8]) -> io::Result<()> {
        let room = self.remaining.load(Ordering::SeqCst);
        let len = buf.len() as u64;
        if len <= room {
            self.remaining.fetch_sub(len, Ordering::SeqCst);
            if let Some(chunk) = self.chunk {
                for part in buf.chunks(chunk) {
                    file.write_all(part)?;
                }
            } else {
                file.write_all(buf)?;
            }
            self.wrote();
            return Ok(());
        }
        self.remaining.store(0, Ordering::SeqCst);
        // A real full disk often accepts part of a write before refusing the rest.
        let part = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        file.write_all(&buf[..part])?;
        Err(io::Error::new(
            io::ErrorKind::StorageFull,
            "no space left on device (simulated)",
        ))
    }
}

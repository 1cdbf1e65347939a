//! Simulated write failures (feature `test-util`): a full disk without filling one, and
//! writes cut into small pieces so a killed process leaves a torn line behind.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes writes fail after a number of bytes, the way a full disk does (tests of the
/// no-space path without filling a disk), or cuts them into small `write` calls so that a
/// killed process leaves a torn line behind (crash tests). Clones share the budget.
#[derive(Debug, Clone)]
pub struct WriteFault {
    remaining: Arc<AtomicU64>,
    chunk: Option<usize>,
}

impl WriteFault {
    /// Writes fail once `bytes` more bytes have been written.
    pub fn fail_after(bytes: u64) -> Self {
        Self {
            remaining: Arc::new(AtomicU64::new(bytes)),
            chunk: None,
        }
    }

    /// Writes go out in `write` calls of at most `bytes` bytes (and never fail).
    pub fn chunked(bytes: usize) -> Self {
        Self {
            remaining: Arc::new(AtomicU64::new(u64::MAX)),
            chunk: Some(bytes.max(1)),
        }
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
                return Ok(());
            }
            return file.write_all(buf);
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

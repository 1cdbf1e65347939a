//! The lock across processes on a conversation file: an advisory `flock` (through the
//! standard library's `File::lock`), exclusive for appends, shared for loads.

use std::fs::File;
use std::path::Path;

use crate::error::{Result, StorageError};

/// Holds a lock on a file until dropped.
pub(super) struct FileLock<'a>(&'a File);

impl<'a> FileLock<'a> {
    /// Waits for an exclusive lock: no other process appends or loads meanwhile.
    pub(super) fn exclusive(file: &'a File, path: &Path) -> Result<Self> {
        file.lock()
            .map_err(|e| StorageError::io("locking", path, e))?;
        Ok(Self(file))
    }

    /// Waits for a shared lock: an append in progress finishes first.
    pub(super) fn shared(file: &'a File, path: &Path) -> Result<Self> {
        file.lock_shared()
            .map_err(|e| StorageError::io("locking", path, e))?;
        Ok(Self(file))
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

//! The one way this crate replaces a whole file: write a temporary file beside it, `fsync` it,
//! rename it over the target and `fsync` the folder, so a reader sees the old file or the new
//! one, never half of one, and a returned write survives a crash of the machine.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;

use crate::error::{Result, StorageError};

/// Replaces `path` with `bytes`, durably and atomically.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_file_name(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(StorageError::io("writing", path, e));
    }
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => sync_dir(Path::new(".")),
    }
}

/// Makes the folder's entries (files created, renamed or removed in it) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io("syncing", dir, e))
}

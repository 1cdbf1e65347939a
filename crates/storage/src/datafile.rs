//! The tool data-file store: files a tool spills instead of putting them in the
//! observation. Names carry a content hash, writes are atomic, every path stays inside the
//! data root, and cleanup removes files by age and, above a size cap, least recently used
//! first down to 80 % of the cap. The agent crate adapts this store to the tools crate's
//! spill sink; this crate does not know the tools crate.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::atomic::write_atomic;
use crate::error::{Result, StorageError};
use crate::id::check_name;
use crate::store::{SharedClock, SystemClock};

/// Metadata of one data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFileMeta {
    /// File name inside the data root (`<stem>-<hash>.<ext>`).
    pub name: String,
    /// SHA-256 of the content, hex.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// When written (ms since the epoch).
    pub created_ms: i64,
    /// When last read or written.
    pub accessed_ms: i64,
    /// The tool call that produced it.
    pub call_id: Option<String>,
    /// The conversation it belongs to.
    pub conversation_id: Option<String>,
}

/// Who a data file belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataOwner {
    /// The tool call.
    pub call_id: Option<String>,
    /// The conversation.
    pub conversation_id: Option<String>,
}

/// Cleanup limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Files not accessed for this long are removed (default 24 h).
    pub max_age_ms: i64,
    /// Above this total size, least recently used files go until 80 % of it is left.
    pub max_total_bytes: u64,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        Self {
            max_age_ms: 24 * 3600 * 1000,
            max_total_bytes: 1 << 30,
        }
    }
}

/// What a cleanup did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Files removed for their age.
    pub expired: Vec<String>,
    /// Files removed to get under the size cap.
    pub evicted: Vec<String>,
    /// Bytes left.
    pub remaining_bytes: u64,
}

/// The data-file store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DataFileStore {
    root: PathBuf,
    clock: SharedClock,
    lock: Arc<std::sync::Mutex<()>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sanitize(part: &str) -> String {
    let s: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    if s.is_empty() { "data".to_owned() } else { s }
}

impl DataFileStore {
    /// A store under `root` (created if missing) on the system clock.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        Self::open_with_clock(root, Arc::new(SystemClock))
    }

    /// A store with a given clock.
    pub fn open_with_clock(root: impl Into<PathBuf>, clock: SharedClock) -> Result<Self> {
        let root = root.into();
        let meta = root.join(".meta");
        std::fs::create_dir_all(&meta).map_err(|e| StorageError::io("creating", &meta, e))?;
        Ok(Self {
            root,
            clock,
            lock: Arc::default(),
        })
    }

    /// The data root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of `name`, refusing any name that could leave the root.
    pub fn resolve(&self, name: &str) -> Result<PathBuf> {
        check_name("data file name", name)?;
        Ok(self.root.join(name))
    }

    fn meta_path(&self, name: &str) -> PathBuf {
        self.root.join(".meta").join(format!("{name}.json"))
    }

    /// Writes `bytes` atomically under a name made of `hint` (sanitised) and the content hash;
    /// the same content under the same hint is stored once.
    pub fn put(&self, hint: &str, bytes: &[u8], owner: DataOwner) -> Result<DataFileMeta> {
        let sha256 = hex(&Sha256::digest(bytes));
        let (stem, ext) = match hint.rsplit_once('.') {
            Some((s, e)) if !s.is_empty() => (sanitize(s), Some(sanitize(e))),
            _ => (sanitize(hint), None),
        };
        let name = match ext {
            Some(ext) => format!("{stem}-{}.{ext}", &sha256[..16]),
            None => format!("{stem}-{}", &sha256[..16]),
        };
        let path = self.resolve(&name)?;
        let now = self.clock.now_ms();
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !path.exists() {
            write_atomic(&path, bytes)?;
        }
        let meta = DataFileMeta {
            name,
            sha256,
            size: bytes.len() as u64,
            created_ms: now,
            accessed_ms: now,
            call_id: owner.call_id,
            conversation_id: owner.conversation_id,
        };
        self.write_meta(&meta)?;
        Ok(meta)
    }

    fn write_meta(&self, meta: &DataFileMeta) -> Result<()> {
        let bytes = serde_json::to_vec(meta).map_err(|e| StorageError::Format {
            what: format!("metadata of {}", meta.name),
            message: e.to_string(),
        })?;
        write_atomic(&self.meta_path(&meta.name), &bytes)
    }

    /// The metadata of `name`.
    pub fn meta(&self, name: &str) -> Result<DataFileMeta> {
        let path = self.meta_path(name);
        self.resolve(name)?;
        let bytes = std::fs::read(&path).map_err(|e| StorageError::io("reading", &path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| StorageError::Format {
            what: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Reads a file and marks it used now (so LRU cleanup keeps it).
    pub fn read(&self, name: &str) -> Result<Vec<u8>> {
        let path = self.resolve(name)?;
        let bytes = std::fs::read(&path).map_err(|e| StorageError::io("reading", &path, e))?;
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut meta = self.meta(name)?;
        meta.accessed_ms = self.clock.now_ms();
        self.write_meta(&meta)?;
        Ok(bytes)
    }

    /// Every file's metadata, by name.
    pub fn list(&self) -> Result<Vec<DataFileMeta>> {
        let dir = self.root.join(".meta");
        let mut out = BTreeMap::new();
        let read = std::fs::read_dir(&dir).map_err(|e| StorageError::io("listing", &dir, e))?;
        for item in read.flatten() {
            let file = item.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_suffix(".json")
                && let Ok(meta) = self.meta(name)
            {
                out.insert(name.to_owned(), meta);
            }
        }
        Ok(out.into_values().collect())
    }

    fn remove(&self, name: &str) -> Result<()> {
        for path in [self.resolve(name)?, self.meta_path(name)] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("deleting", path, e)),
            }
        }
        Ok(())
    }

    /// Removes expired files, then least recently used ones while over the cap.
    pub fn cleanup(&self, policy: CleanupPolicy) -> Result<CleanupReport> {
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = self.clock.now_ms();
        let mut report = CleanupReport::default();
        let mut live = Vec::new();
        for meta in self.list()? {
            if now - meta.accessed_ms > policy.max_age_ms {
                self.remove(&meta.name)?;
                report.expired.push(meta.name);
            } else {
                live.push(meta);
            }
        }
        let mut total: u64 = live.iter().map(|m| m.size).sum();
        if total > policy.max_total_bytes {
            let target = policy.max_total_bytes / 10 * 8;
            live.sort_by_key(|m| (m.accessed_ms, m.name.clone()));
            for meta in &live {
                if total <= target {
                    break;
                }
                self.remove(&meta.name)?;
                total -= meta.size;
                report.evicted.push(meta.name.clone());
            }
        }
        report.remaining_bytes = total;
        Ok(report)
    }

    /// Runs [`cleanup`](Self::cleanup) every `every` on the tokio runtime until the handle is
    /// aborted. Failures are logged, not fatal.
    pub fn spawn_cleanup(
        &self,
        policy: CleanupPolicy,
        every: std::time::Duration,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let store = this.clone();
                match tokio::task::spawn_blocking(move || store.cleanup(policy)).await {
                    Ok(Ok(report)) => tracing::debug!(?report, "data-file cleanup"),
                    Ok(Err(e)) => tracing::warn!(error = %e, "data-file cleanup failed"),
                    Err(e) => tracing::warn!(error = %e, "data-file cleanup task failed"),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ManualClock;

    fn store() -> (tempfile::TempDir, DataFileStore, Arc<ManualClock>) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000_000));
        let store = DataFileStore::open_with_clock(dir.path(), clock.clone()).unwrap();
        (dir, store, clock)
    }

    #[test]
    fn names_carry_the_hash_and_stay_inside_the_root() {
        let (_d, store, _c) = store();
        let owner = DataOwner {
            call_id: Some("call_1".into()),
            conversation_id: Some("c1".into()),
        };
        let meta = store
            .put("../../etc/sales data.csv", b"a,b\n1,2\n", owner)
            .unwrap();
        assert!(
            meta.name.starts_with("______etc_sales_data-"),
            "{}",
            meta.name
        );
        assert!(meta.name.ends_with(".csv"));
        assert!(meta.name.contains(&meta.sha256[..16]));
        assert_eq!(store.read(&meta.name).unwrap(), b"a,b\n1,2\n");
        assert_eq!(meta.call_id.as_deref(), Some("call_1"));
        for bad in ["../x", "a/b", ".meta"] {
            assert!(store.read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cleanup_by_age_then_lru_down_to_80_percent() {
        let (_d, store, clock) = store();
        let old = store
            .put("old.txt", &[1; 100], DataOwner::default())
            .unwrap();
        clock.advance(1000);
        let a = store.put("a.txt", &[2; 300], DataOwner::default()).unwrap();
        clock.advance(1000);
        let b = store.put("b.txt", &[3; 300], DataOwner::default()).unwrap();
        clock.advance(1000);
        let c = store.put("c.txt", &[4; 300], DataOwner::default()).unwrap();
        clock.advance(1000);
        store.read(&a.name).unwrap(); // a is now the most recently used
        let policy = CleanupPolicy {
            max_age_ms: 3500,
            max_total_bytes: 800,
        };
        let report = store.cleanup(policy).unwrap();
        assert_eq!(report.expired, [old.name]);
        // 900 bytes > 800: evict the least recently used (b) until ≤ 640.
        assert_eq!(report.evicted, [b.name]);
        assert_eq!(report.remaining_bytes, 600);
        let left: Vec<_> = store.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(left, [a.name, c.name]);
    }

    /// The paused clock only moves when every task is idle, and not while a job runs on the
    /// blocking pool (tokio's test-util holds it back), so a virtual `sleep` returns once all
    /// that was due before its deadline, a cleanup included, has run.
    #[tokio::test(start_paused = true)]
    async fn background_cleanup_runs_on_its_interval() {
        use std::time::Duration;
        let (_d, store, clock) = store();
        let policy = CleanupPolicy {
            max_age_ms: 5_000,
            max_total_bytes: u64::MAX,
        };
        let first = store.put("x.bin", &[0; 10], DataOwner::default()).unwrap();
        let first = store.resolve(&first.name).unwrap();
        clock.advance(10_000);
        let task = store.spawn_cleanup(policy, Duration::from_secs(60));
        // The task has started (its interval's immediate first tick is behind it), and an
        // expired file is still there: nothing runs before one interval has passed.
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(first.exists(), "a cleanup ran before its first interval");
        tokio::time::sleep(Duration::from_secs(2)).await; // 61 s
        assert!(!first.exists(), "no cleanup ran once the interval passed");

        // Then once an interval: a file that expires now goes at the next tick (120 s).
        let second = store.put("y.bin", &[1; 10], DataOwner::default()).unwrap();
        let second = store.resolve(&second.name).unwrap();
        clock.advance(10_000);
        tokio::time::sleep(Duration::from_secs(58)).await; // 119 s
        assert!(second.exists(), "a cleanup ran between two ticks");
        tokio::time::sleep(Duration::from_secs(2)).await; // 121 s
        assert!(!second.exists(), "the second tick did not clean up");
        task.abort();
    }
}

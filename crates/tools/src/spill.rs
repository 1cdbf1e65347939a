//! Layer 9: spill. Data shown at `full`, or whose serialized form is over the threshold
//! (1 MiB by default), is written to a [`DataSink`] as `tool_data/{call_id}_{hash16}.json`; the
//! observation then holds a preview, the size, a summary and the plain path, which the model
//! can pass to a file-reading tool. When the call has the files of its conversation
//! ([`ConversationFiles`](crate::files::ConversationFiles)), the data becomes a data file of the
//! conversation instead, named `{call_id}_{hash16}.json`, and the reference is its id
//! (`data_001`).
//!
//! The sink is a trait so that the orchestrator can hand the runtime its own data-file store;
//! [`FsSink`] is the plain filesystem implementation.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use ba_protocol::OutputLevel;
use sha2::{Digest, Sha256};

use crate::error::ToolsError;
use crate::idempotency::hex;

/// Where spilled data goes.
#[async_trait]
pub trait DataSink: Send + Sync + fmt::Debug {
    /// Stores `bytes` under `name`, a relative path such as `tool_data/call_1_0123abcd.json`,
    /// and returns the plain reference (a path) a reading tool accepts.
    async fn put(&self, name: &str, bytes: &[u8]) -> Result<String, ToolsError>;
}

#[async_trait]
impl<T: DataSink + ?Sized> DataSink for std::sync::Arc<T> {
    async fn put(&self, name: &str, bytes: &[u8]) -> Result<String, ToolsError> {
        (**self).put(name, bytes).await
    }
}

fn _object_safe(_: &dyn DataSink) {}

/// Writes spilled data under a directory.
#[derive(Debug, Clone)]
pub struct FsSink {
    root: PathBuf,
}

impl FsSink {
    /// A sink writing under `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory files are written under.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[async_trait]
impl DataSink for FsSink {
    async fn put(&self, name: &str, bytes: &[u8]) -> Result<String, ToolsError> {
        let rel = Path::new(name);
        if name.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(ToolsError::SinkName {
                name: name.to_owned(),
                reason: "it must be a relative path without `.` or `..` parts".to_owned(),
            });
        }
        let path = self.root.join(rel);
        let shown = path.display().to_string();
        let io_err = |source| ToolsError::SinkWrite {
            path: shown.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(io_err)?;
        }
        // Write then rename, so a reader never sees half a file.
        let tmp = path.with_extension("json.partial");
        tokio::fs::write(&tmp, bytes).await.map_err(io_err)?;
        if let Err(e) = tokio::fs::rename(&tmp, &path).await {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(io_err(e));
        }
        Ok(shown)
    }
}

/// Whether data at `level` of `size` bytes is spilled.
pub fn should_spill(level: OutputLevel, size: u64, threshold: u64) -> bool {
    level == OutputLevel::Full || size > threshold
}

/// The first 16 hex digits of the SHA-256 of `bytes`.
pub fn data_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    hex(&digest[..8])
}

/// The sink name of a call's data: `tool_data/{call_id}_{hash16}.json`, with characters of the
/// call id that are unsafe in a file name replaced by `_`.
pub fn spill_name(call_id: &str, hash16: &str) -> String {
    format!("tool_data/{}", data_file_name(call_id, hash16))
}

/// The name of a call's data as a file of the conversation: `{call_id}_{hash16}.json`, with
/// characters of the call id that are unsafe in a file name replaced by `_`.
pub fn data_file_name(call_id: &str, hash16: &str) -> String {
    let safe: String = call_id
        .chars()
        .take(96)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = if safe.is_empty() {
        "call".to_owned()
    } else {
        safe
    };
    format!("{safe}_{hash16}.json")
}

/// The observation of spilled data.
pub fn spill_observation(reference: &str, size: u64, summary: &str, preview: &str) -> String {
    format!(
        "Data stored in file: {reference}\nSize: {size} bytes ({})\nSummary: {summary}\n\
         Preview:\n{preview}\n\nRead this file with a file-reading tool to see all of the data.",
        human_size(size)
    )
}

/// `5.0 MiB`, `12.3 KiB`, `512 B`.
pub fn human_size(size: u64) -> String {
    const KIB: f64 = 1024.0;
    let s = size as f64;
    if s >= KIB * KIB {
        format!("{:.1} MiB", s / (KIB * KIB))
    } else if s >= KIB {
        format!("{:.1} KiB", s / KIB)
    } else {
        format!("{size} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_hashes_are_sixteen_hex() {
        let h = data_hash(b"[1,2,3]");
        assert_eq!(h.len(), 16);
        assert!(h.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            spill_name("call_1", &h),
            format!("tool_data/call_1_{h}.json")
        );
        assert_eq!(spill_name("../x/y", "ab"), "tool_data/___x_y_ab.json");
        assert!(should_spill(OutputLevel::Full, 1, 1024));
        assert!(should_spill(OutputLevel::Brief, 1025, 1024));
        assert!(!should_spill(OutputLevel::Standard, 1024, 1024));
    }

    #[tokio::test]
    async fn fs_sink_writes_and_refuses_escaping_names() {
        let dir = tempfile::tempdir().unwrap();
        let sink = FsSink::new(dir.path());
        let path = sink.put("tool_data/a.json", b"{}").await.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        let err = sink.put("../a.json", b"{}").await.unwrap_err();
        assert!(matches!(err, ToolsError::SinkName { .. }));
        assert!(sink.put("/etc/a.json", b"{}").await.is_err());
    }
}

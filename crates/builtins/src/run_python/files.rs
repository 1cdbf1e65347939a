//! What `run_python` exchanges with its conversation's files: the uploads copied into the
//! working folder under their own names, and what the code wrote under `outputs/` kept as
//! outputs of the conversation (bounded, links never followed).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use ba_tools::ConversationFiles;
use serde_json::{Value, json};

use super::{MAX_OUTPUT_ENTRIES, MAX_OUTPUT_FILES, NAME, OUTPUTS_DIR, RunPython, SCRIPT};
use crate::BuiltinError;

impl RunPython {
    /// Keeps the regular files under `outputs/` (sorted by path, at most
    /// [`MAX_OUTPUT_FILES`], each within the size limits) as outputs of the conversation.
    /// Links are never followed: the code is gone, but what it left is still its own.
    pub(super) async fn keep_outputs(
        &self,
        scratch: &Path,
        files: Option<&dyn ConversationFiles>,
    ) -> Kept {
        let mut kept = Kept::default();
        let (found, mut skipped) = walk_outputs(&scratch.join(OUTPUTS_DIR)).await;
        kept.skipped.append(&mut skipped);
        let limit = files.map_or(self.config.max_output_file_bytes, |f| {
            f.max_file_bytes().min(self.config.max_output_file_bytes)
        });
        for (n, (rel, path, size)) in found.into_iter().enumerate() {
            let shown = format!("{OUTPUTS_DIR}/{rel}");
            let Some(files) = files else {
                kept.skip(
                    shown,
                    "this run has no conversation to keep files in".into(),
                );
                continue;
            };
            if n >= MAX_OUTPUT_FILES {
                kept.skip(
                    shown,
                    format!("only the first {MAX_OUTPUT_FILES} files of outputs/ are kept"),
                );
                continue;
            }
            if size > limit {
                kept.skip(
                    shown,
                    format!("{size} bytes, over the limit of {limit} bytes a file"),
                );
                continue;
            }
            let name = rel.rsplit('/').next().unwrap_or(rel.as_str()).to_owned();
            let description = format!("written by run_python as {shown}");
            match files.add_output(&name, &path, &description).await {
                Ok(file) => kept.outputs.push(json!({
                    "id": file.id,
                    "name": file.name,
                    "size": file.size,
                    "media_type": file.media_type,
                })),
                Err(err) => kept.skip(shown, err.to_string()),
            }
        }
        kept.skipped
            .sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        kept
    }
}

/// What became of the files of `outputs/`.
#[derive(Default)]
pub(super) struct Kept {
    pub(super) outputs: Vec<Value>,
    pub(super) skipped: Vec<Value>,
}

impl Kept {
    fn skip(&mut self, name: String, reason: String) {
        self.skipped.push(json!({"name": name, "reason": reason}));
    }
}

/// The regular files under `dir` as (path relative to it with `/`, path, size), sorted; and
/// what was passed over (links, special files, entries past [`MAX_OUTPUT_ENTRIES`]). `dir`
/// itself must be a folder, not a link the code put in its place.
async fn walk_outputs(dir: &Path) -> (Vec<(String, PathBuf, u64)>, Vec<Value>) {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    match tokio::fs::symlink_metadata(dir).await {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            skipped.push(json!({"name": OUTPUTS_DIR,
                "reason": "outputs is not a folder (a link or a file replaced it)"}));
            return (found, skipped);
        }
        Err(_) => return (found, skipped),
    }
    let mut pending = vec![(dir.to_owned(), String::new())];
    let mut seen = 0usize;
    while let Some((folder, prefix)) = pending.pop() {
        let Ok(mut entries) = tokio::fs::read_dir(&folder).await else {
            continue;
        };
        while let Ok(Some(entry)) = entries.next_entry().await {
            seen += 1;
            let rel = format!("{prefix}{}", entry.file_name().to_string_lossy());
            if seen > MAX_OUTPUT_ENTRIES {
                skipped.push(json!({"name": format!("{OUTPUTS_DIR}/{rel}"),
                    "reason": format!("outputs/ holds more than {MAX_OUTPUT_ENTRIES} entries")}));
                return (sorted(found), skipped);
            }
            // `file_type` does not follow links.
            let Ok(kind) = entry.file_type().await else {
                continue;
            };
            if kind.is_dir() {
                pending.push((entry.path(), format!("{rel}/")));
            } else if kind.is_file() {
                if let Ok(meta) = entry.metadata().await {
                    found.push((rel, entry.path(), meta.len()));
                }
            } else {
                skipped.push(json!({"name": format!("{OUTPUTS_DIR}/{rel}"),
                    "reason": "not a regular file (a link or a special file)"}));
            }
        }
    }
    (sorted(found), skipped)
}

fn sorted(mut found: Vec<(String, PathBuf, u64)>) -> Vec<(String, PathBuf, u64)> {
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Copies the uploads of `files` into `scratch` under their names, read-only; the names used.
/// The newest upload of a name keeps it (the one `file_reader` finds by that name); an older
/// one, or one whose name is taken by the code or `outputs/`, gets its id in front.
pub(super) async fn copy_uploads(
    files: &dyn ConversationFiles,
    scratch: &Path,
) -> Result<Vec<String>, BuiltinError> {
    let listed = files
        .list()
        .await
        .map_err(|e| BuiltinError::from_files("the uploads", e))?;
    let mut uploads: Vec<_> = listed
        .into_iter()
        .filter(|f| f.kind == ba_tools::KIND_UPLOAD)
        .collect();
    // Newest first: ids count up, so a longer id is a later one.
    uploads.sort_by(|a, b| (b.id.len(), &b.id).cmp(&(a.id.len(), &a.id)));
    let mut used: Vec<String> = vec![SCRIPT.to_owned(), OUTPUTS_DIR.to_owned()];
    for upload in uploads {
        let base = plain_name(&upload.name).unwrap_or("upload");
        let name = if used.iter().any(|u| u == base) {
            format!("{}-{base}", upload.id)
        } else {
            base.to_owned()
        };
        let local = files
            .local_path(&upload.id)
            .await
            .map_err(|e| BuiltinError::from_files(&upload.id, e))?;
        let dest = scratch.join(&name);
        let copied = async {
            tokio::fs::copy(&local, &dest).await?;
            tokio::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o444)).await
        };
        copied.await.map_err(|e| BuiltinError::Environment {
            tool: NAME,
            message: format!(
                "cannot copy the upload `{}` ({name}) into the working folder: {e}",
                upload.id
            ),
        })?;
        used.push(name);
    }
    Ok(used.split_off(2))
}

/// `name` when it is a plain file name (no folder, not `.` or `..`, not hidden).
fn plain_name(name: &str) -> Option<&str> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0'])
        && name.len() <= 255;
    ok.then_some(name)
}

/// Files and folders the code left at the top of its working folder, outside `outputs/`
/// (they are discarded): not the code, the uploads' copies, nor hidden caches.
pub(super) async fn not_kept(scratch: &Path, inputs: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    let Ok(mut entries) = tokio::fs::read_dir(scratch).await else {
        return names;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == SCRIPT
            || name == OUTPUTS_DIR
            || name == "__pycache__"
            || name.starts_with('.')
            || inputs.contains(&name)
        {
            continue;
        }
        names.push(name);
    }
    names.sort();
    names.truncate(20);
    names
}

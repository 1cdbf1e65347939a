//! What `run_python` exchanges with its conversation's files: the uploads copied into the
//! working folder under their own names, and what the code wrote under `outputs/` kept as
//! outputs of the conversation (bounded, links never followed).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use ba_tools::ConversationFiles;
use serde_json::{Value, json};

use super::{MAX_OUTPUT_ENTRIES, MAX_OUTPUT_FILES, NAME, OUTPUTS_DIR, RunPython, SCRIPT};
use crate::BuiltinError;
use crate::encoding::{self, DecodeReader, EncodingRequest, OnError};

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

/// The uploads as the code finds them.
#[derive(Default)]
pub(super) struct Inputs {
    /// The names they have in the working folder.
    pub(super) names: Vec<String>,
    /// Text uploads in another encoding that the code gets as UTF-8: `name`, `from`.
    pub(super) converted: Vec<Value>,
}

/// Media types (by the name's extension) of the uploads the code gets as UTF-8 text.
const TEXT_TYPES: [&str; 6] = [
    "text/csv",
    "text/tab-separated-values",
    "text/plain",
    "text/markdown",
    "application/json",
    "application/x-ndjson",
];

/// Copies the uploads of `files` into `scratch` under their names, read-only. The newest
/// upload of a name keeps it (the one `file_reader` finds by that name); an older one, or one
/// whose name is taken by the code or `outputs/`, gets its id in front. A text upload (CSV,
/// TSV, text, JSON by its name) in an encoding `file_reader` recognises without a label — a
/// UTF-16 byte-order mark, GBK Chinese text — is copied as UTF-8, so
/// `pd.read_csv("targets.csv")` reads it as `file_reader` does; one that does not decode whole
/// is copied as it is.
pub(super) async fn copy_uploads(
    files: &dyn ConversationFiles,
    scratch: &Path,
) -> Result<Inputs, BuiltinError> {
    let listed = files
        .list()
        .await
        .map_err(|e| BuiltinError::from_files("the uploads", e))?;
    let mut uploads: Vec<_> = listed
        .into_iter()
        .filter(|f| f.kind == ba_tools::FileKind::Upload)
        .collect();
    // Newest first: upload numbers count up.
    let number = |f: &ba_tools::FileInfo| ba_tools::FileKind::Upload.number_of(&f.id);
    uploads.sort_by_key(|f| std::cmp::Reverse((number(f), f.created_ms)));
    let mut used: Vec<String> = vec![SCRIPT.to_owned(), OUTPUTS_DIR.to_owned()];
    let mut converted = Vec::new();
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
        let text = TEXT_TYPES.contains(&ba_protocol::media_type_for(&upload.name));
        let copied = async {
            let from = if text {
                let (local, dest) = (local.clone(), dest.clone());
                tokio::task::spawn_blocking(move || copy_as_utf8(&local, &dest))
                    .await
                    .map_err(std::io::Error::other)??
            } else {
                None
            };
            if from.is_none() {
                tokio::fs::copy(&local, &dest).await?;
            }
            tokio::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o444)).await?;
            Ok::<_, std::io::Error>(from)
        };
        let from = copied.await.map_err(|e| BuiltinError::Environment {
            tool: NAME,
            message: format!(
                "cannot copy the upload `{}` ({name}) into the working folder: {e}",
                upload.id
            ),
        })?;
        if let Some(from) = from {
            converted.push(json!({"name": name, "from": from}));
        }
        used.push(name);
    }
    converted.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(Inputs {
        names: used.split_off(2),
        converted,
    })
}

/// Writes `local` to `dest` as UTF-8 when `auto` finds it is text in another encoding (a UTF-16
/// byte-order mark, GBK); the encoding it was in, or `None` — nothing written — when it is
/// UTF-8 already, not recognised, or does not decode whole.
fn copy_as_utf8(local: &Path, dest: &Path) -> std::io::Result<Option<String>> {
    use std::io::{Read as _, Write as _};
    let mut file = std::fs::File::open(local)?;
    let mut head = vec![0; 64 * 1024];
    let n = crate::csv_file::read_up_to(&mut file, &mut head)?;
    head.truncate(n);
    let detected = encoding::detect(&head, EncodingRequest::Auto, None);
    if detected.encoding == encoding_rs::UTF_8 {
        return Ok(None);
    }
    let mut raw = std::io::Cursor::new(head).chain(file);
    std::io::copy(
        &mut (&mut raw).take(detected.bom_len as u64),
        &mut std::io::sink(),
    )?;
    let mut decoder = DecodeReader::new(raw, detected, OnError::Strict);
    let mut out = std::io::BufWriter::new(std::fs::File::create(dest)?);
    match std::io::copy(&mut decoder, &mut out).and_then(|_| out.flush()) {
        Ok(()) => Ok(Some(detected.label())),
        Err(e) if encoding::malformed_of(&e).is_some() => {
            drop(out);
            std::fs::remove_file(dest)?;
            Ok(None)
        }
        Err(e) => Err(e),
    }
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

//! The code store (ST3): code blocks the model writes, saved as files with their language
//! checked against seed 003's list (unknown languages fall back to Python with a warning) and
//! metadata with line and character counts, so reports can cite them as `<code_ref>`.
//! Superseded by [`crate::workspace::code`], where the language list and [`CodeMeta`] now live.

use std::path::{Path, PathBuf};

use crate::atomic::write_atomic;
use crate::error::{Result, StorageError};
use crate::id::check_name;
pub use crate::workspace::code::{CodeMeta, LANGUAGES, Saved, language};

/// Code blocks on disk: `<root>/<conversation_id>/<code_id>.<ext>` and
/// `<root>/<conversation_id>/<code_id>.meta.json`, so two conversations may use the same code
/// id without one replacing the other's; blocks saved outside any conversation live in
/// `<root>` itself.
#[derive(Debug, Clone)]
pub struct CodeStore {
    root: PathBuf,
}

impl CodeStore {
    /// A store under `root`, created if missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| StorageError::io("creating", &root, e))?;
        Ok(Self { root })
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder of a conversation's blocks (`root` for none), its id checked.
    fn folder(&self, conversation_id: Option<&str>) -> Result<PathBuf> {
        match conversation_id {
            Some(id) => {
                check_name("conversation id", id)?;
                Ok(self.root.join(id))
            }
            None => Ok(self.root.clone()),
        }
    }

    /// Saves (or replaces) a code block of `conversation_id` (or of none).
    pub fn save(
        &self,
        code_id: &str,
        code: &str,
        language_name: &str,
        description: &str,
        conversation_id: Option<&str>,
    ) -> Result<Saved> {
        check_name("code id", code_id)?;
        let folder = self.folder(conversation_id)?;
        let (lang, ext, warning) = match language(language_name) {
            Some((lang, ext)) => (lang, ext, None),
            None => {
                let warning = format!(
                    "code `{code_id}`: language `{language_name}` is not supported; saved as python"
                );
                tracing::warn!("{warning}");
                ("python", "py", Some(warning))
            }
        };
        let file_name = format!("{code_id}.{ext}");
        let meta = CodeMeta {
            code_id: code_id.to_owned(),
            language: lang.to_owned(),
            file_name: file_name.clone(),
            description: description.to_owned(),
            line_count: code.lines().count(),
            char_count: code.chars().count(),
            conversation_id: conversation_id.map(str::to_owned),
        };
        std::fs::create_dir_all(&folder).map_err(|e| StorageError::io("creating", &folder, e))?;
        if let Ok(old) = self.meta(conversation_id, code_id)
            && old.file_name != file_name
        {
            let _ = std::fs::remove_file(folder.join(&old.file_name));
        }
        write_atomic(&folder.join(&file_name), code.as_bytes())?;
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| StorageError::Format {
            what: format!("metadata of code `{code_id}`"),
            message: e.to_string(),
        })?;
        write_atomic(&folder.join(format!("{code_id}.meta.json")), &json)?;
        Ok(Saved { meta, warning })
    }

    /// The metadata of a code block of `conversation_id` (or of none).
    pub fn meta(&self, conversation_id: Option<&str>, code_id: &str) -> Result<CodeMeta> {
        check_name("code id", code_id)?;
        let path = self
            .folder(conversation_id)?
            .join(format!("{code_id}.meta.json"));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StorageError::invalid(
                    format!("code `{code_id}`"),
                    "no code block with this id was saved",
                ));
            }
            Err(e) => return Err(StorageError::io("reading", path, e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| StorageError::Format {
            what: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// A code block of `conversation_id` (or of none) and its metadata.
    pub fn get(&self, conversation_id: Option<&str>, code_id: &str) -> Result<(CodeMeta, String)> {
        let meta = self.meta(conversation_id, code_id)?;
        let path = self.folder(conversation_id)?.join(&meta.file_name);
        let code =
            std::fs::read_to_string(&path).map_err(|e| StorageError::io("reading", &path, e))?;
        Ok((meta, code))
    }

    /// The blocks of `conversation_id` (or those saved outside any conversation), by id.
    pub fn list(&self, conversation_id: Option<&str>) -> Result<Vec<CodeMeta>> {
        let folder = self.folder(conversation_id)?;
        let read = match std::fs::read_dir(&folder) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StorageError::io("listing", &folder, e)),
        };
        let mut out = Vec::new();
        for item in read.flatten() {
            let name = item.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".meta.json") {
                out.push(self.meta(conversation_id, id)?);
            }
        }
        out.sort_by(|a, b| a.code_id.cmp(&b.code_id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_validated_and_unknown_falls_back_to_python() {
        let dir = tempfile::tempdir().unwrap();
        let store = CodeStore::open(dir.path()).unwrap();
        let saved = store
            .save(
                "code_chart",
                "const a = 1;\nconsole.log(a);\n",
                "JS",
                "chart",
                Some("c1"),
            )
            .unwrap();
        assert_eq!(saved.meta.language, "javascript");
        assert_eq!(saved.meta.file_name, "code_chart.js");
        assert_eq!((saved.meta.line_count, saved.meta.char_count), (2, 29));
        assert!(saved.warning.is_none());
        let saved = store
            .save("code_x", "print('é')", "cobol", "x", None)
            .unwrap();
        assert_eq!(saved.meta.file_name, "code_x.py");
        assert_eq!(
            saved.warning.as_deref(),
            Some("code `code_x`: language `cobol` is not supported; saved as python")
        );
        assert_eq!(saved.meta.char_count, 10);
        let (meta, code) = store.get(Some("c1"), "code_chart").unwrap();
        assert_eq!(meta.description, "chart");
        assert!(code.starts_with("const"));
        assert_eq!(store.list(Some("c1")).unwrap().len(), 1);
        assert_eq!(store.list(None).unwrap().len(), 1);
        assert!(store.list(Some("c2")).unwrap().is_empty());
        assert!(store.save("../evil", "x", "python", "", None).is_err());
        assert!(store.save("ok", "x", "python", "", Some("../c1")).is_err());
        assert!(store.get(Some(".."), "code_chart").is_err());
        assert!(
            store
                .get(None, "missing")
                .unwrap_err()
                .to_string()
                .contains("no code block")
        );
        for (lang, ext, _) in LANGUAGES {
            assert_eq!(language(lang), Some((*lang, *ext)));
        }
    }

    #[test]
    fn two_conversations_keep_their_own_block_of_the_same_id() {
        let dir = tempfile::tempdir().unwrap();
        let store = CodeStore::open(dir.path()).unwrap();
        store
            .save("code_q", "SELECT 1", "sql", "first", Some("c1"))
            .unwrap();
        store
            .save("code_q", "print(2)", "python", "second", Some("c2"))
            .unwrap();
        let (one, code_one) = store.get(Some("c1"), "code_q").unwrap();
        let (two, code_two) = store.get(Some("c2"), "code_q").unwrap();
        assert_eq!(
            (one.file_name.as_str(), code_one.as_str()),
            ("code_q.sql", "SELECT 1")
        );
        assert_eq!(
            (two.file_name.as_str(), code_two.as_str()),
            ("code_q.py", "print(2)")
        );
        assert_eq!(one.conversation_id.as_deref(), Some("c1"));
        // Replacing a block in another language removes the old file of that conversation only.
        store
            .save("code_q", "x = 1", "python", "again", Some("c1"))
            .unwrap();
        assert!(!dir.path().join("c1/code_q.sql").exists());
        assert_eq!(store.get(Some("c2"), "code_q").unwrap().1, "print(2)");
    }
}

//! Level 3: the files of a skill folder, listed at Level 2 and read on demand through a
//! reader that never leaves the folder.

use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::discover::SKILL_FILE;
use crate::error::{Result, SkillsError};

/// One file of a skill folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceEntry {
    /// Path relative to the skill folder, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// Lists the files of `dir` (not its `SKILL.md`), sorted, at most `max` of them and at most
/// `max_depth` folders deep. Symlinks are listed only when they resolve inside the folder.
pub(crate) fn list(dir: &Path, max: usize, max_depth: usize) -> Result<Vec<ResourceEntry>> {
    let root = dir.canonicalize().map_err(|source| SkillsError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    walk(&root, &root, 0, max, max_depth, &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    max: usize,
    max_depth: usize,
    out: &mut Vec<ResourceEntry>,
) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|source| SkillsError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if out.len() >= max {
            return Ok(());
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let (is_dir, is_file, len) = if meta.file_type().is_symlink() {
            match path.canonicalize() {
                Ok(target) if target.starts_with(root) => match std::fs::metadata(&target) {
                    Ok(m) => (false, m.is_file(), m.len()),
                    Err(_) => continue,
                },
                _ => continue,
            }
        } else {
            (meta.is_dir(), meta.is_file(), meta.len())
        };
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        if is_dir {
            let hidden = rel
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if depth < max_depth && !hidden {
                walk(root, &path, depth + 1, max, max_depth, out)?;
            }
        } else if is_file && rel != Path::new(SKILL_FILE) {
            out.push(ResourceEntry {
                path: rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/"),
                bytes: len,
            });
        }
    }
    Ok(())
}

/// Checks a relative resource path without touching the disk.
fn check_relative(skill: &str, rel: &str) -> Result<PathBuf> {
    let refuse = |reason| SkillsError::InvalidResourcePath {
        skill: skill.to_owned(),
        path: rel.to_owned(),
        reason,
    };
    if rel.trim().is_empty() {
        return Err(refuse("the path is empty"));
    }
    if rel.contains('\0') {
        return Err(refuse("the path holds a NUL byte"));
    }
    // Windows separators and drive letters are refused everywhere, so a path means the same on
    // every platform.
    if rel.contains('\\') || rel.chars().nth(1) == Some(':') {
        return Err(refuse(
            "the path must use `/` separators and no drive letter",
        ));
    }
    let path = Path::new(rel);
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(refuse("the path climbs out with `..`")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse(
                    "the path is absolute; give it relative to the skill folder",
                ));
            }
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(refuse("the path names the skill folder itself"));
    }
    Ok(clean)
}

/// Reads `rel` inside `dir` (whose canonical form is `canonical_dir`), refusing `..`, absolute
/// paths and symlinks that resolve outside the folder, and files over `limit` bytes.
pub(crate) fn read(
    skill: &str,
    dir: &Path,
    canonical_dir: &Path,
    rel: &str,
    limit: u64,
) -> Result<String> {
    let clean = check_relative(skill, rel)?;
    let joined = dir.join(&clean);
    let resolved = match joined.canonicalize() {
        Ok(p) => p,
        // `a.md/b` fails with "not a directory": for the caller that file does not exist either.
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Err(SkillsError::ResourceNotFound {
                skill: skill.to_owned(),
                path: rel.to_owned(),
                dir: dir.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(SkillsError::Io {
                path: joined,
                source,
            });
        }
    };
    if !resolved.starts_with(canonical_dir) {
        return Err(SkillsError::ResourceEscapes {
            skill: skill.to_owned(),
            path: rel.to_owned(),
        });
    }
    let io = |source| SkillsError::Io {
        path: resolved.clone(),
        source,
    };
    let file = std::fs::File::open(&resolved).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(SkillsError::ResourceNotAFile {
            skill: skill.to_owned(),
            path: rel.to_owned(),
        });
    }
    if meta.len() > limit {
        return Err(SkillsError::ResourceTooLarge {
            skill: skill.to_owned(),
            path: rel.to_owned(),
            size: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow after the size check; never read past the limit.
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(SkillsError::ResourceTooLarge {
            skill: skill.to_owned(),
            path: rel.to_owned(),
            size: bytes.len() as u64,
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|_| SkillsError::ResourceNotText {
        skill: skill.to_owned(),
        path: rel.to_owned(),
    })
}

/// The relative file references of a skill body, in order of first appearance: Markdown link
/// targets (`[text](reference/x.md)`) and code spans that look like a relative file path
/// (`` `scripts/run.py` ``). URLs, anchors and absolute paths are left out; `./` and `#anchor`
/// are stripped.
///
/// ```
/// let body = "See [the guide](./reference/guide.md#setup), run `scripts/run.py`, \
///             or read <https://example.com> and [top](#top).";
/// assert_eq!(ba_skills::references(body), ["reference/guide.md", "scripts/run.py"]);
/// ```
pub fn references(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |target: &str| {
        if let Some(t) = relative_target(target)
            && !out.iter().any(|o| o == &t)
        {
            out.push(t);
        }
    };
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b']' if bytes.get(i + 1) == Some(&b'(') => {
                if let Some(end) = body[i + 2..].find(')') {
                    let inner = &body[i + 2..i + 2 + end];
                    // A target may be wrapped in `<…>` (then it may hold spaces) or be followed
                    // by a title: `(path "title")`.
                    let target = match inner.trim_start().strip_prefix('<') {
                        Some(rest) => rest.split('>').next().unwrap_or(""),
                        None => inner.split_whitespace().next().unwrap_or(""),
                    };
                    push(target);
                    i += 2 + end;
                }
            }
            b'`' => {
                if let Some(end) = body[i + 1..].find('`') {
                    let span = &body[i + 1..i + 1 + end];
                    if looks_like_path(span) {
                        push(span);
                    }
                    i += 1 + end;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

fn looks_like_path(span: &str) -> bool {
    let Some((dir, file)) = span.rsplit_once('/') else {
        return false;
    };
    !dir.is_empty()
        && file.contains('.')
        && !file.ends_with('.')
        && span
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
}

fn relative_target(target: &str) -> Option<String> {
    let target = target.split('#').next().unwrap_or("");
    let target = target.strip_prefix("./").unwrap_or(target);
    if target.is_empty()
        || target.contains("://")
        || target.starts_with('/')
        || target.starts_with('~')
        || target.starts_with("mailto:")
        || target.starts_with("..")
    {
        return None;
    }
    Some(target.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_checked_before_the_disk() {
        for bad in [
            "",
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a\\b",
            "C:/x",
            ".",
            "a\0b",
        ] {
            assert!(
                matches!(
                    check_relative("s", bad),
                    Err(SkillsError::InvalidResourcePath { .. })
                ),
                "{bad:?} accepted"
            );
        }
        assert_eq!(
            check_relative("s", "./a/b.md").unwrap(),
            PathBuf::from("a/b.md")
        );
    }

    #[test]
    fn references_ignore_urls_and_prose() {
        let body = "[a](http://x.y/z.md) [b](reference/b.md \"Title\") `cargo run` `x.md` \
                    `a/b` `path/to/file.md` [c](<refs/c d.md>) `{lang}/README.md` [b2](reference/b.md)";
        assert_eq!(
            references(body),
            ["reference/b.md", "path/to/file.md", "refs/c d.md"]
        );
    }
}

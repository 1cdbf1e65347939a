//! Finding skill folders: every folder holding a `SKILL.md`, at any depth under a root.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Diagnostic, Rule, Severity};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// A folder that holds a `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Index of the root it was found under (0 = first root, which wins clashes).
    pub root_index: usize,
    /// The skill folder.
    pub dir: PathBuf,
    /// Its `SKILL.md` (or the marker file it was found by).
    pub skill_md: PathBuf,
}

/// Folder names never searched: version control and package caches are large and hold no
/// skills of their own.
const SKIPPED_DIRS: [&str; 3] = [".git", "node_modules", "__pycache__"];

/// Lists the skill folders under `roots`, in root order and then path order. A skill folder is
/// not searched further: its subfolders are its resources. Symlinked folders are followed once
/// each (a link back to a root or to a folder already followed is not a loop).
pub fn discover(roots: &[PathBuf], max_depth: usize) -> (Vec<Found>, Vec<Diagnostic>) {
    discover_files(roots, SKILL_FILE, "skill", max_depth)
}

/// [`discover`] for any marker file (`WORKFLOW.md` makes a workflow folder); `what` names the
/// roots in the diagnostic of one that cannot be read.
pub(crate) fn discover_files(
    roots: &[PathBuf],
    marker: &str,
    what: &str,
    max_depth: usize,
) -> (Vec<Found>, Vec<Diagnostic>) {
    let mut found = Vec::new();
    let mut diagnostics = Vec::new();
    // Canonical forms of the roots and of every symlinked folder followed. Plain folders need no
    // entry: without a symlink a tree cannot lead back into itself, and skipping the
    // canonicalisation of each one keeps a 1,000-skill index fast.
    let mut seen: HashSet<PathBuf> = roots.iter().filter_map(|r| r.canonicalize().ok()).collect();
    for (root_index, root) in roots.iter().enumerate() {
        if !root.is_dir() {
            diagnostics.push(Diagnostic::new(
                root,
                Severity::Error,
                Rule::RootUnreadable,
                format!("{what} root {} is not a readable folder", root.display()),
            ));
            continue;
        }
        let mut walker = Walker {
            root_index,
            marker,
            max_depth,
            seen: &mut seen,
            found: &mut found,
            diagnostics: &mut diagnostics,
        };
        walker.walk(root, 0);
    }
    (found, diagnostics)
}

struct Walker<'a> {
    root_index: usize,
    marker: &'a str,
    max_depth: usize,
    seen: &'a mut HashSet<PathBuf>,
    found: &'a mut Vec<Found>,
    diagnostics: &'a mut Vec<Diagnostic>,
}

impl Walker<'_> {
    fn walk(&mut self, dir: &Path, depth: usize) {
        let skill_md = dir.join(self.marker);
        if skill_md.is_file() {
            self.found.push(Found {
                root_index: self.root_index,
                dir: dir.to_path_buf(),
                skill_md,
            });
            return;
        }
        if depth >= self.max_depth {
            return;
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) => {
                self.diagnostics.push(Diagnostic::new(
                    dir,
                    Severity::Error,
                    Rule::Io,
                    format!("could not list {}: {err}", dir.display()),
                ));
                return;
            }
        };
        let mut subdirs: Vec<PathBuf> = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || SKIPPED_DIRS.contains(&name.as_ref()) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                subdirs.push(path);
            } else if kind.is_symlink()
                && path.is_dir()
                && let Ok(target) = path.canonicalize()
                && self.seen.insert(target)
            {
                subdirs.push(path);
            }
        }
        subdirs.sort();
        for sub in subdirs {
            self.walk(&sub, depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "---\nname: x\ndescription: y\n---\n").unwrap();
    }

    #[test]
    fn finds_nested_skills_and_stops_at_a_skill_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        touch(&root.join("a/SKILL.md"));
        touch(&root.join("a/inner/SKILL.md")); // a resource of `a`, not a skill
        touch(&root.join("plugins/p1/skills/b/SKILL.md"));
        touch(&root.join(".hidden/c/SKILL.md"));
        touch(&root.join("node_modules/d/SKILL.md"));
        let (found, diags) = discover(&[root.to_path_buf()], 16);
        assert!(diags.is_empty());
        let dirs: Vec<_> = found
            .iter()
            .map(|f| f.dir.strip_prefix(root).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            dirs,
            vec![PathBuf::from("a"), PathBuf::from("plugins/p1/skills/b")]
        );
    }

    #[test]
    fn a_root_that_is_a_skill_and_a_missing_root() {
        let tmp = tempfile::tempdir().unwrap();
        touch(&tmp.path().join("SKILL.md"));
        let missing = tmp.path().join("nope");
        let (found, diags) = discover(&[tmp.path().to_path_buf(), missing.clone()], 16);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].dir, tmp.path());
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].rule, Rule::RootUnreadable);
        assert_eq!(diags[0].path, missing);
    }

    #[cfg(unix)]
    #[test]
    fn symlink_loops_end() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        touch(&root.join("x/s/SKILL.md"));
        std::os::unix::fs::symlink(root, root.join("x/loop")).unwrap();
        let (found, _) = discover(&[root.to_path_buf()], 64);
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn depth_limit_is_respected() {
        let tmp = tempfile::tempdir().unwrap();
        touch(&tmp.path().join("1/2/3/s/SKILL.md"));
        assert_eq!(discover(&[tmp.path().to_path_buf()], 3).0.len(), 0);
        assert_eq!(discover(&[tmp.path().to_path_buf()], 4).0.len(), 1);
    }
}

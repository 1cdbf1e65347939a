//! Skills and plugins' skills reload when their folders change: a file watcher on every skill
//! root calls [`SkillSet::reload`] after each burst of changes. The agent renders the catalogue
//! (and the `activate_skill` tool) at the start of each run, so the next run sees the new
//! catalogue and a run in flight keeps the one it started with. A reload that cannot read a
//! skill keeps its last good version and says why ([`SkillSet::reload`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;

use anyhow::Context as _;
use ba_skills::{Diagnostic, ReloadReport, Rule, SkillSet};
use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecursiveMode, Watcher as _};

/// Watches the roots of a [`SkillSet`] and reloads it on change, until dropped.
pub(crate) struct SkillWatcher {
    // Dropping the watcher closes the channel, which ends the reloading thread.
    _watcher: notify::RecommendedWatcher,
}

impl std::fmt::Debug for SkillWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillWatcher").finish_non_exhaustive()
    }
}

impl SkillWatcher {
    /// Watches every root of `skills` that exists; `on_reload` hears each reload that changed
    /// something, with the diagnostics after it.
    pub(crate) fn start(
        skills: Arc<SkillSet>,
        on_reload: impl Fn(&ReloadReport, &[Diagnostic]) + Send + 'static,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let mut watcher = notify::recommended_watcher(move |event| {
            // The reloading thread is gone only when the watcher is being dropped.
            let _ = tx.send(event);
        })
        .context("starting the skills file watcher")?;
        for root in skills.roots() {
            if root.is_dir() {
                watcher
                    .watch(root, RecursiveMode::Recursive)
                    .with_context(|| format!("watching the skill folder {}", root.display()))?;
            }
        }
        std::thread::Builder::new()
            .name("skills-reload".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    // One reload for a burst: an editor's save is several events.
                    let mut relevant = changes_files(&first);
                    while let Ok(more) = rx.try_recv() {
                        relevant |= changes_files(&more);
                    }
                    if !relevant {
                        continue;
                    }
                    let report = skills.reload();
                    if !report.is_empty() {
                        on_reload(&report, &skills.diagnostics());
                    }
                }
            })
            .context("starting the skills reload thread")?;
        Ok(Self { _watcher: watcher })
    }
}

/// Whether an event may change what a reload reads (reads and opens do not).
fn changes_files(event: &notify::Result<notify::Event>) -> bool {
    match event {
        // A watcher error (an overflowed queue) may hide changes: reload to be sure.
        Err(_) => true,
        Ok(e) => match e.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
            EventKind::Access(_) => false,
            _ => !e.paths.iter().all(|p| is_editor_scratch(p)),
        },
    }
}

/// Swap and backup files editors write beside the real ones.
fn is_editor_scratch(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.ends_with(".swp") || name.ends_with(".swx") || name.ends_with('~')
}

/// Prints a reload on stderr: what changed, and each skill kept at its last good version.
pub(crate) fn print_reload(report: &ReloadReport, diagnostics: &[Diagnostic]) {
    let mut parts = Vec::new();
    for (what, names) in [
        ("added", &report.added),
        ("changed", &report.changed),
        ("removed", &report.removed),
    ] {
        if !names.is_empty() {
            parts.push(format!("{what} {}", names.join(", ")));
        }
    }
    if !parts.is_empty() {
        eprintln!(
            "skills reloaded ({}); the next message sees them",
            parts.join("; ")
        );
    }
    for d in diagnostics.iter().filter(|d| d.rule == Rule::KeptLastGood) {
        eprintln!("warning: {}", d.message);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use std::time::Duration;

    /// Writes `text` to `path` whole (write, then rename), as editors save.
    fn save(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }

    fn skill(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\nSteps.\n")
    }

    /// Waits for a reload whose report satisfies `done`.
    fn wait_for(
        rx: &mpsc::Receiver<(ReloadReport, Vec<Diagnostic>)>,
        done: impl Fn(&ReloadReport) -> bool,
    ) -> (ReloadReport, Vec<Diagnostic>) {
        loop {
            let got = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("a reload within 20 s");
            if done(&got.0) {
                return got;
            }
        }
    }

    #[test]
    fn a_change_under_a_root_reloads_the_set_and_a_bad_edit_keeps_the_last_good_skill() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("skills");
        save(
            &root.join("report/SKILL.md"),
            &skill("report", "Writes reports."),
        );
        let set = Arc::new(SkillSet::load([&root]));
        let (tx, rx) = mpsc::channel();
        let watcher = SkillWatcher::start(Arc::clone(&set), move |report, diags| {
            let _ = tx.send((report.clone(), diags.to_vec()));
        })
        .unwrap();

        save(
            &root.join("forecast/SKILL.md"),
            &skill("forecast", "Forecasts."),
        );
        wait_for(&rx, |r| r.added == ["forecast"]);
        assert_eq!(set.names(), ["forecast", "report"]);

        // A broken edit: the skill stays at its last good version, and the reload says why.
        save(&root.join("report/SKILL.md"), "---\nname: report\n");
        let (_, diags) = wait_for(&rx, |r| r.kept == ["report"]);
        assert_eq!(set.names(), ["forecast", "report"]);
        assert_eq!(set.get("report").unwrap().description(), "Writes reports.");
        assert!(diags.iter().any(|d| d.rule == Rule::KeptLastGood));

        save(
            &root.join("report/SKILL.md"),
            &skill("report", "Writes better reports."),
        );
        wait_for(&rx, |r| r.changed == ["report"]);
        assert_eq!(
            set.get("report").unwrap().description(),
            "Writes better reports."
        );
        drop(watcher);
    }
}

//! What a run leaves on the terminal and the disk: the final answer with its saved code
//! expanded, and the outputs it wrote, saved under their names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ba_agent::response::{Files, render_for_terminal};
use ba_agent::{Agent, RunSummary};
use ba_storage::{ConversationId, FileId, FileKind, FileMeta};

use crate::config::Config;
use crate::out::outln;

/// The final answer as a terminal shows it: saved code expanded, files named.
pub(super) async fn rendered(agent: &Agent, summary: &RunSummary) -> Option<String> {
    let response = summary.response.as_ref()?;
    let id = ConversationId::new(&summary.conversation_id).ok()?;
    let files = agent.workspace().map(|w| Files {
        workspace: w.as_ref(),
        conversation: &id,
    });
    Some(render_for_terminal(response, files).await)
}

/// The ids of the conversation's outputs now (to tell the ones a run adds).
pub(super) async fn output_ids(agent: &Agent, id: &ConversationId) -> BTreeSet<FileId> {
    let Some(files) = agent.workspace() else {
        return BTreeSet::new();
    };
    files
        .list(id)
        .await
        .map(|list| {
            list.into_iter()
                .filter(|f| f.kind == FileKind::Output)
                .map(|f| f.id)
                .collect()
        })
        .unwrap_or_default()
}

/// `--outputs` (`chosen`), else `outputs/<conversation>` in the home folder.
pub(super) fn outputs_folder(
    config: &Config,
    chosen: Option<&Path>,
    id: &ConversationId,
) -> PathBuf {
    chosen
        .map(Path::to_path_buf)
        .unwrap_or_else(|| config.home().join("outputs").join(id.as_str()))
}

/// A file name of `name` that stays in its folder: its last component, with anything but
/// letters, digits, `._- ` replaced; `id` when nothing is left.
pub(super) fn local_name(name: &str, id: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or("");
    let safe: String = last
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "._- ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim().trim_start_matches('.').to_owned();
    if safe.is_empty() { id.to_owned() } else { safe }
}

/// Saves the outputs the run added (not in `before`) into `dir` under their names (a name
/// already there gets the output's id in front) and says where, unless `say` is false.
pub(super) async fn save_outputs(
    agent: &Agent,
    id: &ConversationId,
    before: &BTreeSet<FileId>,
    dir: &Path,
    say: bool,
) -> anyhow::Result<()> {
    let Some(files) = agent.workspace() else {
        return Ok(());
    };
    let new: Vec<FileMeta> = files
        .list(id)
        .await?
        .into_iter()
        .filter(|f| f.kind == FileKind::Output && !before.contains(&f.id))
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    tokio::fs::create_dir_all(dir)
        .await
        .with_context(|| format!("creating {}", dir.display()))?;
    if say {
        outln!();
        outln!("Outputs:");
    }
    for meta in new {
        let mut path = dir.join(local_name(&meta.name, &meta.id));
        if tokio::fs::try_exists(&path).await.unwrap_or(false) {
            path = dir.join(format!("{}-{}", meta.id, local_name(&meta.name, &meta.id)));
        }
        let mut content = files.open(id, &meta.id).await?.reader;
        let mut out = tokio::fs::File::create(&path)
            .await
            .with_context(|| format!("writing {}", path.display()))?;
        tokio::io::copy(&mut content, &mut out)
            .await
            .with_context(|| format!("writing {}", path.display()))?;
        if say {
            outln!(
                "  {} {} ({} bytes) saved to {}",
                meta.id,
                meta.name,
                meta.size,
                path.display()
            );
        }
    }
    Ok(())
}

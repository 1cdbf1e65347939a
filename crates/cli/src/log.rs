//! `ba-agent log`: the conversation store from the command line (import, export, list, show,
//! verify). The store is the one every command uses: `--home DIR`, else `BA_AGENT_HOME` (or
//! `home:` of the configuration), else `.ba-agent/` in the working directory. Only `import`
//! creates it; the reading subcommands leave a missing store missing.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use ba_storage::rfc3339;
use ba_storage::{ConversationId, ConversationStore, FileStore, FileStoreOptions, StorageError};
use ba_storage::{broken_pairs, duplicate_ids, orphan_workspaces};
use ba_storage::{read_claude_code, read_codex, store_imported};

use crate::convert::{self, OutputFormat};
use crate::exit::{CliError, CliResult};
use crate::out::shown;

/// Formats `log import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ImportFormat {
    /// A Claude Code session (JSONL), with its `<session>/subagents/` files.
    ClaudeCode,
    /// A Codex rollout (JSONL).
    Codex,
}

/// The store folder option shared by every subcommand (`--store` is the old name).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StoreArg {
    /// Where conversations live (default `.ba-agent`, or `BA_AGENT_HOME`).
    #[arg(long, alias = "store", value_name = "DIR")]
    home: Option<PathBuf>,
    /// Act as this person (also `BA_AGENT_USER`): `list` shows their conversations only,
    /// and another person's is not found for them unless they are an admin.
    #[arg(long, value_name = "NAME", env = "BA_AGENT_USER")]
    user: Option<String>,
}

/// Subcommands of `log`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Import a session file into a new conversation; prints its id.
    Import {
        /// Format of the file.
        #[arg(long)]
        from: ImportFormat,
        /// The session file.
        file: PathBuf,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Print a conversation as a request body (what `convert --to` prints).
    Export {
        /// Conversation id.
        conv: String,
        /// Output format.
        #[arg(long, value_enum)]
        to: OutputFormat,
        #[command(flatten)]
        store: StoreArg,
    },
    /// List conversations: id, entries, last update, title.
    List {
        #[command(flatten)]
        store: StoreArg,
    },
    /// Print a conversation one entry a line.
    Show {
        /// Conversation id.
        conv: String,
        #[command(flatten)]
        store: StoreArg,
    },
    /// A new conversation whose history is CONV's up to entry SEQ (the parent is not copied
    /// and not changed); prints the new id on its last line.
    Fork {
        /// The conversation to fork.
        conv: String,
        /// Its last entry the fork keeps (0 for none).
        #[arg(long, value_name = "SEQ")]
        at: u64,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Report torn or corrupt lines, broken tool-call pairs, a fork whose parent is gone and
    /// files of conversations that no longer exist; exit 1 when there are any.
    Verify {
        /// Conversation id.
        conv: String,
        #[command(flatten)]
        store: StoreArg,
    },
}

pub(crate) fn run(cmd: Command) -> CliResult {
    let runtime = crate::exit::runtime()?;
    runtime.block_on(run_async(cmd))
}

/// Opens the store, creating it (for `import`).
fn open(store: &StoreArg) -> Result<FileStore, CliError> {
    let home = crate::config::resolve_home(store.home.clone())?;
    let store = FileStore::open(&home).map_err(CliError::input)?;
    warn_store(&store);
    Ok(store)
}

/// Opens an existing store (for the reading subcommands), creating nothing; `None` when
/// there is none.
fn open_existing(store: &StoreArg) -> Result<Option<FileStore>, CliError> {
    let home = crate::config::resolve_home(store.home.clone())?;
    match FileStore::open_existing(&home, FileStoreOptions::default()) {
        Ok(store) => {
            warn_store(&store);
            Ok(Some(store))
        }
        Err(StorageError::NoStore { .. }) => Ok(None),
        Err(e) => Err(CliError::input(e)),
    }
}

/// Opens an existing store holding conversation `id` that `--user`, when given, may read.
async fn open_conversation(store: &StoreArg, id: &ConversationId) -> Result<FileStore, CliError> {
    let opened = open_read(store)?;
    if let Some(user) = &store.user {
        crate::users::check_access(&opened, id, user)
            .await
            .map_err(CliError::input)?;
    }
    Ok(opened)
}

/// Opens an existing store, or fails naming where it was looked for.
fn open_read(store: &StoreArg) -> Result<FileStore, CliError> {
    match open_existing(store)? {
        Some(store) => Ok(store),
        None => {
            let home = crate::config::resolve_home(store.home.clone())?;
            Err(CliError::input(anyhow!(
                "no conversation store at {} (give --home DIR or set BA_AGENT_HOME)",
                home.display()
            )))
        }
    }
}

/// What the store worked around while opening (a rebuilt index, unreadable metadata).
fn warn_store(store: &FileStore) {
    for w in store.warnings() {
        eprintln!("warning: {w}");
    }
}

fn conv_id(conv: &str) -> Result<ConversationId, CliError> {
    ConversationId::new(conv).map_err(CliError::input)
}

fn out(text: &str) -> Result<(), CliError> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing stdout")
        .map_err(CliError::input)
}

async fn run_async(cmd: Command) -> CliResult {
    match cmd {
        Command::Import { from, file, store } => import(from, file, store).await,
        Command::Export { conv, to, store } => export(conv, to, store).await,
        Command::List { store } => list(store).await,
        Command::Show { conv, store } => show(conv, store).await,
        Command::Fork { conv, at, store } => fork(conv, at, store).await,
        Command::Verify { conv, store } => verify(conv, store).await,
    }
}

/// `log import`: a session file into new conversations (its subagents beside it); prints the
/// main one's id.
async fn import(from: ImportFormat, file: PathBuf, store: StoreArg) -> CliResult {
    let imported = match from {
        ImportFormat::ClaudeCode => read_claude_code(&file),
        ImportFormat::Codex => read_codex(&file),
    }
    .map_err(CliError::input)?;
    if imported.main.entries.is_empty() {
        return Err(CliError::input(anyhow!(
            "{}: no conversation records found (is it a {} file?)",
            file.display(),
            match from {
                ImportFormat::ClaudeCode => "Claude Code session",
                ImportFormat::Codex => "Codex rollout",
            }
        )));
    }
    let store = open(&store)?;
    let ids = store_imported(&store, &imported, None)
        .await
        .map_err(|e| CliError::input(anyhow!(e)))?;
    for conv in std::iter::once(&imported.main).chain(&imported.subagents) {
        for loss in &conv.losses {
            eprintln!(
                "dropped: {}: {}: {}",
                conv.source.display(),
                shown(&loss.path),
                shown(&loss.what)
            );
        }
        // Imported as they are, but named: `log verify` reports them again.
        for b in broken_pairs(&conv.entries) {
            eprintln!(
                "warning: {}: entry {}: {}",
                conv.source.display(),
                b.position,
                shown(&b.message)
            );
        }
        for d in duplicate_ids(&conv.entries) {
            eprintln!(
                "warning: {}: entry {}: id `{}` repeats entry {}",
                conv.source.display(),
                d.position,
                shown(&d.id),
                d.first
            );
        }
    }
    for (id, sub) in ids.iter().skip(1).zip(&imported.subagents) {
        eprintln!(
            "subagent: {id} ({} entries from {})",
            sub.entries.len(),
            sub.source.display()
        );
    }
    let main = ids
        .first()
        .ok_or_else(|| CliError::input(anyhow!("nothing imported")))?;
    out(&format!("{main}\n"))?;
    Ok(ExitCode::SUCCESS)
}

/// `log export`: a conversation as a request body.
async fn export(conv: String, to: OutputFormat, store: StoreArg) -> CliResult {
    let id = conv_id(&conv)?;
    let loaded = open_conversation(&store, &id)
        .await?
        .load(&id)
        .await
        .map_err(CliError::input)?;
    for d in &loaded.diagnostics {
        eprintln!("warning: {conv}: {d}");
    }
    let (text, losses) = convert::render(&loaded.into_entries(), to)?;
    for loss in losses {
        eprintln!("lost: {}: {}", shown(&loss.path), shown(&loss.what));
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `log list`: one conversation a line; an absent store lists nothing and stays absent.
async fn list(store: StoreArg) -> CliResult {
    let metas = match open_existing(&store)? {
        Some(opened) => match &store.user {
            Some(user) => owned_all(&opened, user).await?,
            None => opened.list_all().await.map_err(CliError::input)?,
        },
        // No store yet: nothing to list, and nothing created.
        None => Vec::new(),
    };
    let mut text = String::new();
    for m in metas {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            m.id,
            m.last_seq,
            rfc3339(m.updated_ms),
            shown(m.title.as_deref().unwrap_or_default())
        ));
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Every conversation of `user`, page after page.
async fn owned_all(
    store: &FileStore,
    user: &str,
) -> Result<Vec<ba_storage::ConversationMeta>, CliError> {
    let mut out = Vec::new();
    let mut page = ba_storage::Page::first(500);
    loop {
        let got = store
            .list_owned(user, page.clone())
            .await
            .map_err(CliError::input)?;
        out.extend(got.items);
        match got.next {
            Some(next) => page.after = Some(next),
            None => return Ok(out),
        }
    }
}

/// `log show`: one entry a line, its first line cut at 100 characters.
async fn show(conv: String, store: StoreArg) -> CliResult {
    let id = conv_id(&conv)?;
    let loaded = open_conversation(&store, &id)
        .await?
        .load(&id)
        .await
        .map_err(CliError::input)?;
    for d in &loaded.diagnostics {
        eprintln!("warning: {conv}: {d}");
    }
    let mut text = String::new();
    for s in &loaded.entries {
        let e = &s.entry;
        let mut line = format!("{:>4} {:<9}", s.seq, e.role.as_str());
        if let Some(call) = &e.tool_call_id {
            line.push_str(&format!(" [result {call}]"));
        }
        for c in e.calls() {
            line.push_str(&format!(" [call {} {}]", c.id, c.function.name));
        }
        if !e.include_in_context {
            line.push_str(" [ui]");
        }
        let body = e.text();
        let first = body.lines().next().unwrap_or("");
        let mut short: String = first.chars().take(100).collect();
        if short.len() < body.len() {
            short.push('…');
        }
        if !short.is_empty() {
            line.push(' ');
            line.push_str(&shown(&short));
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `log fork`: a new conversation sharing CONV's history up to entry `at`.
async fn fork(conv: String, at: u64, store: StoreArg) -> CliResult {
    let parent = conv_id(&conv)?;
    let owner = store.user.clone();
    let store = open_conversation(&store, &parent).await?;
    let child = ConversationId::random();
    // A fork made by a person is theirs; without --user it keeps the parent's owner.
    let owner = match owner {
        Some(user) => user,
        None => {
            store
                .metadata(&parent)
                .await
                .map_err(CliError::input)?
                .owner
        }
    };
    let meta = ba_storage::fork_with_files(
        &store,
        &parent,
        at,
        &child,
        ba_storage::NewConversation {
            owner: Some(owner),
            ..ba_storage::NewConversation::default()
        },
    )
    .await
    .map_err(CliError::input)?;
    out(&format!(
        "forked {parent} at entry {at} ({} entries shared)\n{}\n",
        meta.last_seq, meta.id
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `log verify`: every problem found, one a line; exit 1 when there is any.
async fn verify(conv: String, store: StoreArg) -> CliResult {
    let id = conv_id(&conv)?;
    let store = open_conversation(&store, &id).await?;
    let mut text = String::new();
    let mut problems = 0;
    let mut report = |text: &mut String, line: String| {
        problems += 1;
        text.push_str(&line);
        text.push('\n');
    };
    // A fork reads its history from its parent: the link first.
    let meta = store.metadata(&id).await.map_err(CliError::input)?;
    if let Some(fork) = &meta.fork {
        let parent = conv_id(&fork.parent)?;
        match store.metadata(&parent).await {
            Ok(p) if p.last_seq < fork.at_seq => report(
                &mut text,
                format!(
                    "broken fork: cut at entry {} of {}, which has {} entries",
                    fork.at_seq, fork.parent, p.last_seq
                ),
            ),
            Ok(_) => {}
            Err(e) => {
                report(
                    &mut text,
                    format!(
                        "broken fork: its parent {} cannot be read: {e}",
                        fork.parent
                    ),
                );
                text.push_str(&format!("{conv}: {problems} problem(s)\n"));
                out(&text)?;
                return Ok(ExitCode::from(1));
            }
        }
    }
    let loaded = store.load(&id).await.map_err(CliError::input)?;
    if let Some(why) = store.metadata_problem(&id).await.map_err(CliError::input)? {
        report(&mut text, format!("unfinished: {why}"));
    }
    for d in &loaded.diagnostics {
        report(&mut text, format!("{}: {d}", kind_name(d.kind)));
    }
    if loaded.entries.is_empty() && loaded.diagnostics.is_empty() {
        report(
            &mut text,
            "empty: the conversation holds no entries".to_owned(),
        );
    }
    // Pairs and ids are checked on the history as it stands: a rewind may leave a call
    // without its result in the part it took back.
    let history = ba_storage::after_rewinds(loaded.entries.clone());
    let entries: Vec<_> = history.iter().map(|s| s.entry.clone()).collect();
    let seq_of = |position: usize| history.get(position - 1).map_or(0, |s| s.seq);
    for b in broken_pairs(&entries) {
        report(
            &mut text,
            format!("broken pair: entry {}: {}", seq_of(b.position), b.message),
        );
    }
    for d in duplicate_ids(&entries) {
        report(
            &mut text,
            format!(
                "duplicate id: entry {}: id `{}` is already used by entry {}",
                seq_of(d.position),
                d.id,
                seq_of(d.first)
            ),
        );
    }
    // Files left behind by a conversation that is gone (a delete cut short): store-wide.
    for orphan in orphan_workspaces(&store).await.map_err(CliError::input)? {
        report(
            &mut text,
            format!("orphan files: the workspace of conversation {orphan}, which does not exist"),
        );
    }
    text.push_str(&format!(
        "{conv}: {} entries, {problems} problem(s)\n",
        loaded.entries.len()
    ));
    out(&text)?;
    if problems > 0 {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn kind_name(kind: ba_storage::DiagnosticKind) -> &'static str {
    use ba_storage::DiagnosticKind as K;
    match kind {
        K::TornTail => "torn tail",
        K::Quarantined => "quarantined",
        K::Corrupt => "corrupt line",
        K::NotUtf8 => "not utf-8",
        K::OutOfOrder => "out of order",
        _ => "problem",
    }
}

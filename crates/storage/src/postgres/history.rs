//! A conversation's history across forks, and search over the conversations: a fork's rows
//! hold only its own entries (numbered after `fork_at`), its history up to the cut is read from
//! `fork_parent` in the same snapshot.

use ba_protocol::LogEntry;

use super::{META_COLUMNS, PostgresStore, db, meta_of, mode_text, page_of, to_i64};
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::store::{
    ConversationMeta, Diagnostic, DiagnosticKind, ListPage, Loaded, NewConversation, Page,
    StoredEntry,
};

impl PostgresStore {
    /// A fork's entries are its parent's up to the cut (recursively), then its own: every
    /// segment is read in one snapshot.
    pub(super) async fn load_through_forks(
        &self,
        id: &ConversationId,
        from_seq: u64,
    ) -> Result<Loaded> {
        let mut client = self.client().await?;
        // One snapshot for the existence check and the rows.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db)?;
        let Some(head) = tx
            .query_opt(
                "SELECT last_seq, fork_parent, fork_at FROM ba_conversations WHERE id = $1",
                &[&id.as_str()],
            )
            .await
            .map_err(db)?
        else {
            return Err(StorageError::NotFound { id: id.to_string() });
        };
        let last_seq = u64::try_from(head.get::<_, i64>(0)).unwrap_or(0);
        // The segments, this conversation first: (conversation, last seq it gives).
        let mut segments: Vec<(String, i64)> = vec![(id.to_string(), i64::MAX)];
        let mut link: Option<(String, i64)> = head.get::<_, Option<String>>(1).zip(head.get(2));
        while let Some((parent, at)) = link.take() {
            if i64::try_from(from_seq).unwrap_or(i64::MAX) > at {
                break;
            }
            if segments.len() > crate::store::MAX_FORK_DEPTH {
                return Err(StorageError::invalid(
                    format!("conversation `{id}`"),
                    format!("forks go deeper than {}", crate::store::MAX_FORK_DEPTH),
                ));
            }
            let up = tx
                .query_opt(
                    "SELECT fork_parent, fork_at FROM ba_conversations WHERE id = $1",
                    &[&parent],
                )
                .await
                .map_err(db)?
                .ok_or_else(|| StorageError::NotFound { id: parent.clone() })?;
            let upto = segments.last().map_or(at, |s| s.1.min(at));
            link = up.get::<_, Option<String>>(0).zip(up.get(1));
            segments.push((parent, upto));
        }
        let mut rows = Vec::new();
        for (conversation, upto) in segments.iter().rev() {
            rows.extend(
                tx.query(
                    "SELECT seq, appended_ms, entry FROM ba_entries
                     WHERE conversation_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
                    &[conversation, &to_i64(from_seq)?, upto],
                )
                .await
                .map_err(db)?,
            );
        }
        tx.commit().await.map_err(db)?;
        let mut loaded = Loaded {
            last_seq,
            ..Loaded::default()
        };
        for row in rows {
            let seq = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
            let text: &str = row.get(2);
            match LogEntry::from_json(text) {
                Ok(entry) => loaded.entries.push(StoredEntry {
                    seq,
                    appended_ms: row.get(1),
                    entry,
                }),
                Err(e) => loaded.diagnostics.push(Diagnostic {
                    kind: DiagnosticKind::Corrupt,
                    line: seq,
                    offset: 0,
                    message: format!("entry {seq} is not a log entry ({e}); skipped"),
                }),
            }
        }
        Ok(loaded)
    }

    pub(super) async fn fork_by_link(
        &self,
        parent: &ConversationId,
        at_seq: u64,
        child: &ConversationId,
        new: NewConversation,
    ) -> Result<ConversationMeta> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        // KEY SHARE: the parent cannot be deleted before the fork's row is in.
        let row = tx
            .query_opt(
                "SELECT last_seq, title, mode FROM ba_conversations WHERE id = $1 FOR KEY SHARE",
                &[&parent.as_str()],
            )
            .await
            .map_err(db)?
            .ok_or_else(|| StorageError::NotFound {
                id: parent.to_string(),
            })?;
        let last = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        crate::store::check_fork_point(parent, at_seq, last)?;
        let owner = new.owner_name()?;
        let title = crate::text::clean_title_opt(new.title.or_else(|| row.get(1)));
        let mode: Option<String> = mode_text(new.mode)
            .map(str::to_owned)
            .or_else(|| row.get(2));
        let now = self.clock.now_ms();
        let rows = tx
            .query(
                &format!(
                    "INSERT INTO ba_conversations
                        (id, title, mode, parent, created_ms, updated_ms, last_seq,
                         fork_parent, fork_at, owner)
                     VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $6, $8) ON CONFLICT (id) DO NOTHING
                     RETURNING {META_COLUMNS}"
                ),
                &[
                    &child.as_str(),
                    &title,
                    &mode,
                    &new.parent,
                    &now,
                    &to_i64(at_seq)?,
                    &parent.as_str(),
                    &owner,
                ],
            )
            .await
            .map_err(db)?;
        let Some(meta) = rows.first().map(meta_of) else {
            return Err(StorageError::AlreadyExists {
                id: child.to_string(),
            });
        };
        tx.commit().await.map_err(db)?;
        Ok(meta)
    }

    /// In the database: the title, or the text of a question's or an answer's content; among
    /// `owner`'s conversations when given.
    pub(super) async fn search_in_db(
        &self,
        owner: Option<&str>,
        query: &str,
        page: Page,
    ) -> Result<ListPage> {
        let needle = query.trim().to_lowercase();
        let client = self.client().await?;
        let limit = page.limit.max(1);
        let rows = client
            .query(
                &format!(
                    "SELECT {META_COLUMNS} FROM ba_conversations c
                     WHERE ($1::TEXT IS NULL OR c.id > $1)
                       AND ($4::TEXT IS NULL OR c.owner = $4)
                       AND ($2 = '' OR strpos(lower(COALESCE(c.title, '')), $2) > 0
                            OR EXISTS (SELECT 1 FROM ba_entries e
                                       WHERE e.conversation_id = c.id
                                         AND e.entry::jsonb->>'role' IN ('user', 'assistant')
                                         AND strpos(lower((e.entry::jsonb->'content')::TEXT),
                                                    $2) > 0))
                     ORDER BY c.id LIMIT $3"
                ),
                &[
                    &page.after,
                    &needle,
                    &i64::try_from(limit + 1).unwrap_or(i64::MAX),
                    &owner,
                ],
            )
            .await
            .map_err(db)?;
        Ok(page_of(&rows, limit))
    }
}

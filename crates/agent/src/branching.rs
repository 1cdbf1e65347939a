//! Other paths from a conversation: a fork (a new conversation whose history is another's up
//! to a cut) and a rewind (the entries after a point leave the history the model sees).

use std::sync::Arc;

use ba_storage::{ConversationId, NewConversation};

use crate::agent::Agent;
use crate::error::AgentError;
use crate::history::History;

impl Agent {
    /// A new conversation whose history is `id`'s up to entry `at_seq` (see
    /// [`ba_storage::ConversationStore::fork`]): the parent is not copied and not changed, and
    /// the files it had at the cut are the fork's too ([`ba_storage::fork_with_files`]). Its
    /// mode is the parent's, and so is its title when the history it shares holds a question;
    /// a fork before the first question (its edit) is named by the question asked in it.
    ///
    /// # Errors
    /// The store's (`NotFound`, a cut past the end).
    pub async fn fork(
        &self,
        id: &ConversationId,
        at_seq: u64,
    ) -> Result<ConversationId, AgentError> {
        self.fork_as(id, at_seq, None).await
    }

    /// [`Agent::fork`], the fork owned by `owner` (a reader of a shared conversation forks
    /// it as their own); `None` keeps the parent's owner.
    ///
    /// # Errors
    /// As [`Agent::fork`].
    pub async fn fork_as(
        &self,
        id: &ConversationId,
        at_seq: u64,
        owner: Option<&str>,
    ) -> Result<ConversationId, AgentError> {
        let owner = match owner {
            Some(owner) => owner.to_owned(),
            None => self.inner.store.metadata(id).await?.owner,
        };
        let child = ConversationId::random();
        // The history the fork shares: the entries up to the cut, with the rewinds among them
        // (one after the cut is the parent's alone).
        let shared = History::open_at(Arc::clone(&self.inner.store), id.clone(), at_seq).await?;
        let asked = shared.has_question();
        // An empty title is an untitled conversation: the first run names it.
        let new = NewConversation {
            title: (!asked).then(String::new),
            owner: Some(owner),
            ..NewConversation::default()
        };
        ba_storage::fork_with_files(self.inner.store.as_ref(), id, at_seq, &child, new).await?;
        Ok(child)
    }

    /// Takes back the entries after `to_seq` from the history the model sees: a hidden
    /// rewind entry is appended (the log stays append-only; a fork at the entry before the
    /// rewind brings the old branch back as a conversation of its own). The window,
    /// compactions, active skills, pending calls and the cache prefix follow. Takes the
    /// conversation's lease like a run. Returns how many entries left the history.
    ///
    /// # Errors
    /// [`AgentError::Busy`] while a run holds the conversation; the store's `Invalid` for a
    /// point past the end, with nothing after it, or inside a round of tool calls (a call
    /// kept, its result taken back).
    pub async fn rewind(&self, id: &ConversationId, to_seq: u64) -> Result<usize, AgentError> {
        self.rewind_by(id, to_seq, None).await
    }

    /// [`Agent::rewind`], recording `actor` (who took the history back) on the rewind entry.
    ///
    /// # Errors
    /// As [`Agent::rewind`].
    pub async fn rewind_by(
        &self,
        id: &ConversationId,
        to_seq: u64,
        actor: Option<&str>,
    ) -> Result<usize, AgentError> {
        let _lease = self
            .inner
            .leases
            .take(id, &format!("rewind_{}", uuid::Uuid::new_v4().simple()))
            .await?;
        let mut history = History::open(Arc::clone(&self.inner.store), id.clone()).await?;
        let taken = history.rewind(to_seq, actor).await?;
        Ok(taken)
    }
}

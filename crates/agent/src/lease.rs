//! The right to run a conversation, as this agent takes it: the store's lease, named after
//! this process, and the table of the runs going on in it (a cancelled run of this process is
//! waited for rather than reported as busy).

use std::sync::Arc;

use ba_storage::{ConversationId, ConversationStore, RunHolder, RunLease, RunLock};

use crate::error::AgentError;
use crate::run::{LiveRuns, Signal};

/// Takes conversations' leases for the runs (and the compactions and rewinds) of this agent.
pub(crate) struct Leases {
    store: Arc<dyn ConversationStore>,
    /// How this process is named to a run refused the lease: the settings' `holder`, the
    /// process id and the host.
    holder: String,
    /// The runs going on in this process, for cancels by run id.
    live: Arc<LiveRuns>,
}

impl Leases {
    pub(crate) fn new(store: Arc<dyn ConversationStore>, holder: String) -> Self {
        Self {
            store,
            holder,
            live: Arc::default(),
        }
    }

    /// The runs going on in this process.
    pub(crate) fn live(&self) -> &Arc<LiveRuns> {
        &self.live
    }

    /// Takes the conversation's run lease for `run_id`, or says who holds it. A run of this
    /// process that was cancelled (a dropped [`crate::Run`]) is waited for: it is writing its
    /// last records and lets the conversation go within moments.
    pub(crate) async fn take(
        &self,
        id: &ConversationId,
        run_id: &str,
    ) -> Result<RunLease, AgentError> {
        let holder = RunHolder::new(run_id, self.holder.clone());
        let mut looked_again = false;
        loop {
            let ended = self.live.ended();
            match self.store.lock_run(id, &holder).await? {
                RunLock::Taken(lease) => return Ok(lease),
                RunLock::Held(Some(h)) => match self.live.get(id, &h.run_id) {
                    Some(c) if c.signal() == Signal::Cancel => ended.await,
                    // A run of this process that left its table between the lock and this
                    // look: it let the lease go before it left, so one more try takes it.
                    None if h.holder == self.holder && !looked_again => looked_again = true,
                    _ => {
                        return Err(AgentError::Busy {
                            conversation: id.to_string(),
                            holder: Some(h),
                        });
                    }
                },
                // The store could not name the holder: a lease between its lock and its
                // name, or one letting go (its name is cleared before its lock). A cancelled
                // run of this process still in the table is that one, and is waited for.
                RunLock::Held(None) if self.live.cancelled_in(id) => ended.await,
                RunLock::Held(holder) => {
                    return Err(AgentError::Busy {
                        conversation: id.to_string(),
                        holder,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ba_storage::FileStore;

    use super::*;
    use crate::run::Control;

    /// The `.run` file of `id` under the store's folder.
    fn run_file(root: &std::path::Path, id: &ConversationId) -> std::path::PathBuf {
        let name = format!("{id}.run");
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.file_name().is_some_and(|n| n == name.as_str()) {
                    return path;
                }
            }
        }
        panic!("no {name} under {}", root.display());
    }

    /// A cancelled run letting go clears its name before its lock: a run taking the lease in
    /// that moment finds it held by nobody it can name, and waits for the cancelled run
    /// rather than calling the conversation busy.
    #[tokio::test]
    async fn a_lease_letting_go_unnamed_is_waited_for_when_a_cancelled_run_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir.path()).unwrap());
        let id = ConversationId::random();
        let leases = Leases::new(Arc::clone(&store), "this process".into());
        let first = match store
            .lock_run(&id, &RunHolder::new("run_a", "this process"))
            .await
            .unwrap()
        {
            RunLock::Taken(lease) => lease,
            RunLock::Held(h) => panic!("held by {h:?}"),
        };
        // The moment between the name cleared and the lock released.
        std::fs::File::options()
            .write(true)
            .open(run_file(dir.path(), &id))
            .unwrap()
            .set_len(0)
            .unwrap();

        // Not cancelled: busy, holder unknown.
        let (control, _signal) = Control::new();
        let live = leases.live().insert(&id, "run_a", control.clone());
        match leases.take(&id, "run_b").await {
            Err(AgentError::Busy { holder: None, .. }) => {}
            other => panic!("expected busy, got {:?}", other.map(|_| ())),
        }

        // Cancelled: the new run waits until the old one has let go, then takes the lease.
        control.raise(Signal::Cancel);
        let mut waiting = tokio::spawn(async move { leases.take(&id, "run_b").await.map(|_| ()) });
        // Refusing takes a few file operations; waiting lasts until the old run lets go.
        if let Ok(done) = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await {
            panic!(
                "the lease was given or refused while held: {:?}",
                done.unwrap()
            );
        }
        drop(first);
        drop(live);
        tokio::time::timeout(Duration::from_secs(20), waiting)
            .await
            .expect("the waiting run never took the lease")
            .unwrap()
            .unwrap();
    }
}

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

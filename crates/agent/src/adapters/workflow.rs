//! `complete_node`: how a model completes the active node of a workflow run. The run puts its
//! [`WorkflowRun`] into its run scope; a call checks the outputs against the active node (a
//! refusal is an error the model reads) and leaves the completion's record in the scope, where
//! the run takes it for the tool entry it appends.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use ba_protocol::{ToolErrorCode, ToolErrorKind, WorkflowRecord};
use ba_tools::{CallContext, ConversationFiles, RunScope, Tool, ToolCapabilities, ToolError};
use serde_json::Value;

use crate::workflow::{COMPLETE_NODE, COMPLETE_NODE_DESCRIPTION, WorkflowRun, complete_node_spec};

/// What a run shares with its `complete_node` calls.
#[derive(Debug, Default)]
struct RunWorkflow {
    state: Mutex<Option<WorkflowRun>>,
    outcomes: Mutex<HashMap<String, WorkflowRecord>>,
}

/// The `complete_node` tool, offered in run mode by an agent that has workflows.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompleteNodeTool;

impl CompleteNodeTool {
    /// Puts the run's workflow state (or none) where its calls read it.
    pub(crate) fn set_state(scope: &RunScope, run: Option<WorkflowRun>) {
        let shared = scope.get_or_default::<RunWorkflow>();
        *shared.state.lock().unwrap_or_else(PoisonError::into_inner) = run;
    }

    /// The run's workflow state as its calls left it.
    pub(crate) fn state(scope: &RunScope) -> Option<WorkflowRun> {
        let shared = scope.get::<RunWorkflow>()?;
        let state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.clone()
    }

    /// The completion call `call_id` recorded, taken out of the scope (`None` when it made
    /// none: another tool, or a refusal).
    pub(crate) fn outcome(scope: &RunScope, call_id: &str) -> Option<WorkflowRecord> {
        let shared = scope.get::<RunWorkflow>()?;
        let mut outcomes = shared
            .outcomes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        outcomes.remove(call_id)
    }
}

#[async_trait]
impl Tool for CompleteNodeTool {
    fn name(&self) -> &str {
        COMPLETE_NODE
    }

    fn description(&self) -> &str {
        COMPLETE_NODE_DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        complete_node_spec().input_schema
    }

    fn capabilities(&self) -> ToolCapabilities {
        // Callable under any skill, never retried (a completion is recorded once), and
        // offered only to runs in run mode.
        ToolCapabilities::default()
            .with_always_allowed(true)
            .with_max_retries(0)
            .with_run_mode_only(true)
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let refused = |message: String| {
            ToolError::new(ToolErrorKind::InvalidParameters, message)
                .with_code(ToolErrorCode::NodeOutputs)
        };
        let Some(scope) = &ctx.scope else {
            return Err(refused("no workflow run is going on".into()));
        };
        let shared = scope.get_or_default::<RunWorkflow>();
        let no_run = || refused("no workflow run is going on in this conversation".into());
        // Checked on a copy first, so the files are looked up without holding the lock.
        let snapshot = shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(no_run)?;
        let record = snapshot.complete(&input).map_err(refused)?;
        if let Some(files) = &ctx.files {
            named_files_exist(&snapshot, &record, files.as_ref())
                .await
                .map_err(refused)?;
        }
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(run) = state.as_mut() else {
            return Err(no_run());
        };
        // Again on the state itself: another call of the round may have moved it on.
        let record = run.complete(&input).map_err(refused)?;
        run.apply(&record);
        let node = record.node.clone().unwrap_or_default();
        let text = match (&record.next, run.active_node()) {
            (Some(next), Some(n)) => format!(
                "Node `{node}` is complete. Next: node `{next}` ({}); its brief comes with the \
                 next request.",
                n.title
            ),
            _ => format!(
                "Node `{node}` is complete, and with it the workflow run. Report its results to \
                 the user."
            ),
        };
        shared
            .outcomes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(ctx.call_id.to_string(), record);
        Ok(Value::String(text))
    }
}

/// Most files a refusal lists.
const LISTED_FILES: usize = 30;

/// Refuses a completion whose `figure` or `file` outputs name a file the conversation does not
/// have (a chart no tool wrote): the sentence names each such file and the files there are.
async fn named_files_exist(
    run: &WorkflowRun,
    record: &WorkflowRecord,
    files: &dyn ConversationFiles,
) -> Result<(), String> {
    let (Some(node), Some(outputs)) = (run.active_node(), record.outputs.as_ref()) else {
        return Ok(());
    };
    let mut missing = Vec::new();
    for named in node.file_references(outputs) {
        match files.find(&named.reference).await {
            Ok(Some(_)) => {}
            Ok(None) => missing.push(format!(
                "output `{}` ({}) names `{}`, which is no file of this conversation",
                named.output,
                named.kind.as_str(),
                named.reference
            )),
            Err(e) => return Err(format!("the conversation's files could not be read: {e}")),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let listed = files.list().await.unwrap_or_default();
    let there = if listed.is_empty() {
        "it has no files yet".to_owned()
    } else {
        let mut names: Vec<String> = listed
            .iter()
            .take(LISTED_FILES)
            .map(|f| format!("`{}` ({})", f.name, f.id))
            .collect();
        if listed.len() > LISTED_FILES {
            names.push(format!("and {} more", listed.len() - LISTED_FILES));
        }
        format!("its files are {}", names.join(", "))
    };
    Err(format!(
        "node `{}` is not complete: {}; {there}. Write the file first (run_python keeps what the \
         code saves under outputs/), then call `{COMPLETE_NODE}` naming it by its name or id.",
        node.id,
        missing.join("; ")
    ))
}

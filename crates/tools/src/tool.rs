//! The [`Tool`] trait and what a tool sees while it runs ([`CallContext`]).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ba_protocol::{InvocationContext, OutputLevel, PermissionLevel, ToolApproval};
use serde_json::Value;

use crate::error::ToolError;
use crate::files::ConversationFiles;
use crate::scope::RunScope;

/// What a tool can do beyond being called. New capabilities are added here with a default, so
/// adding one breaks no implementor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ToolCapabilities {
    /// The same arguments always give the same result and running twice does no harm, so a
    /// repeated call may be answered from the idempotency cache.
    pub idempotent: bool,
    /// The lowest caller permission level allowed to run the tool.
    pub required_permission: PermissionLevel,
    /// A timeout of this tool is deterministic: the same arguments would time out again (user
    /// code, a query), so a timeout is not retried. Off by default: most timeouts are a
    /// slow network or a busy service.
    pub deterministic_timeouts: bool,
    /// The timeout of one attempt, in milliseconds, when the configuration names none for the
    /// tool (`tools.NAME.timeout_ms`); the invocation's when absent. A tool that keeps its own,
    /// finer clock (an MCP tool's idle timeout, reset by progress) declares a longer cap here.
    pub timeout_ms: Option<u64>,
    /// The most retries the tool allows when the configuration names no retry policy for it
    /// (`tools.NAME.retry`); the configuration's when absent. `Some(0)` for a tool whose call
    /// may have had an effect that a silent second call would repeat.
    pub max_retries: Option<u32>,
    /// The tool may be called whatever the active skill's `allowed_tools` say (a meta-tool the
    /// model needs under any skill: activating another one). The permission level still
    /// applies.
    pub always_allowed: bool,
    /// The result is text the model must read whole (a skill's instructions): it is shown as
    /// it is, bounded like a `full` result, at every output level, and never spilled.
    pub verbatim: bool,
    /// Whether a person approves a call before it runs, when the configuration names no
    /// policy for the tool (`approvals.tools.NAME`). `never` by default.
    pub approval: ToolApproval,
    /// The tool changes something outside the conversation (writes a database, sends a
    /// request that acts, runs code with effects): refused in the `read_only` approval mode.
    pub writes: bool,
    /// The tool is offered only to runs in run mode (a workflow's `complete_node`): a chat or
    /// agent conversation's requests do not list it.
    pub run_mode_only: bool,
    /// The tool finds the tools a request left out (a tool search): it is offered only when
    /// some are, and never left out itself.
    pub finds_tools: bool,
    /// Calls whose argument named `.0` is the string `.1` only read (a memory tool's `view`):
    /// they never wait for approval, whatever the tool's policy.
    pub reads_when: Option<(&'static str, &'static str)>,
    /// The provider's own type of this tool (`memory_20250818`), declared that way to a
    /// provider that has it; elsewhere the tool is an ordinary one with the same schema.
    pub native_type: Option<&'static str>,
}

impl ToolCapabilities {
    /// Declares that a call whose argument `key` is `value` only reads (never asked about).
    #[must_use]
    pub fn with_reads_when(mut self, key: &'static str, value: &'static str) -> Self {
        self.reads_when = Some((key, value));
        self
    }

    /// Declares the provider's own type of this tool.
    #[must_use]
    pub fn with_native_type(mut self, native_type: &'static str) -> Self {
        self.native_type = Some(native_type);
        self
    }

    /// Declares the tool a tool search (offered only when tools are left out).
    #[must_use]
    pub fn with_finds_tools(mut self, finds_tools: bool) -> Self {
        self.finds_tools = finds_tools;
        self
    }

    /// Offers the tool only to runs in run mode.
    #[must_use]
    pub fn with_run_mode_only(mut self, run_mode_only: bool) -> Self {
        self.run_mode_only = run_mode_only;
        self
    }

    /// Sets the tool's own approval policy.
    #[must_use]
    pub fn with_approval(mut self, approval: ToolApproval) -> Self {
        self.approval = approval;
        self
    }

    /// Declares that the tool writes (refused in the `read_only` approval mode).
    #[must_use]
    pub fn with_writes(mut self, writes: bool) -> Self {
        self.writes = writes;
        self
    }

    /// Marks the tool idempotent.
    #[must_use]
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Sets the lowest permission level that may run the tool.
    #[must_use]
    pub fn with_required_permission(mut self, level: PermissionLevel) -> Self {
        self.required_permission = level;
        self
    }

    /// Declares the tool's timeouts deterministic: never retried.
    #[must_use]
    pub fn with_deterministic_timeouts(mut self, yes: bool) -> Self {
        self.deterministic_timeouts = yes;
        self
    }

    /// Sets the tool's own timeout of one attempt.
    #[must_use]
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// Caps the retries of the tool's calls (0: never retried).
    #[must_use]
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = Some(max_retries);
        self
    }

    /// Lets the tool be called under any skill's `allowed_tools`.
    #[must_use]
    pub fn with_always_allowed(mut self, always_allowed: bool) -> Self {
        self.always_allowed = always_allowed;
        self
    }

    /// Shows the tool's result as it is, never leveled or spilled.
    #[must_use]
    pub fn with_verbatim(mut self, verbatim: bool) -> Self {
        self.verbatim = verbatim;
        self
    }
}

/// A handle through which a running tool reports output as it goes, so that a call cut off by
/// its timeout can still show the model what it had done.
#[derive(Debug, Clone, Default)]
pub struct PartialOutput {
    text: Arc<Mutex<String>>,
}

impl PartialOutput {
    /// Appends `text` to what has been reported.
    pub fn report(&self, text: &str) {
        // A poisoned lock only means a previous reporter panicked mid-append; the text is
        // still the best record there is.
        let mut guard = self.text.lock().unwrap_or_else(|p| p.into_inner());
        guard.push_str(text);
    }

    /// Replaces what has been reported.
    pub fn set(&self, text: impl Into<String>) {
        let mut guard = self.text.lock().unwrap_or_else(|p| p.into_inner());
        *guard = text.into();
    }

    /// What has been reported so far.
    pub fn snapshot(&self) -> String {
        self.text.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Empties the handle (done between attempts so one attempt's output is not mistaken for
    /// the next one's).
    pub fn clear(&self) {
        self.text.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// What a tool sees of the call it is running: the invocation context, the call id, the
/// attempt number, the partial-output handle and the files of the call's conversation. Cheap
/// to clone.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The call being answered.
    pub call_id: Arc<str>,
    /// Caller, permission level, storage directory, conversation.
    pub invocation: Arc<InvocationContext>,
    /// 0 for the first attempt, 1 for the first retry, …
    pub attempt: u32,
    /// The timeout of this attempt, in milliseconds.
    pub timeout_ms: u64,
    /// Where the tool reports output as it goes.
    pub partial: PartialOutput,
    /// The files of the conversation the call belongs to (its uploads, code, outputs and
    /// data), and of no other; `None` when the caller has none to give.
    pub files: Option<Arc<dyn ConversationFiles>>,
    /// The state the calls of the caller's run share (see [`RunScope`]); `None` outside a run.
    pub scope: Option<Arc<RunScope>>,
}

impl CallContext {
    /// A context for calling a tool directly, outside a runtime (tests, benches), without
    /// conversation files.
    pub fn detached(call_id: &str) -> Self {
        let invocation = InvocationContext::default();
        Self {
            call_id: Arc::from(call_id),
            timeout_ms: invocation.timeout_ms,
            invocation: Arc::new(invocation),
            attempt: 0,
            partial: PartialOutput::default(),
            files: None,
            scope: None,
        }
    }

    /// The same context with the files of a conversation.
    #[must_use]
    pub fn with_files(mut self, files: Arc<dyn ConversationFiles>) -> Self {
        self.files = Some(files);
        self
    }
}

/// A tool the model can call.
///
/// Four methods are required; the rest have defaults. The runtime validates the arguments
/// against [`input_schema`](Tool::input_schema) before [`call`](Tool::call) runs, so a tool
/// may rely on the shape the schema describes. Most tools are written as plain async functions
/// with a typed argument struct through [`typed_tool`](crate::typed_tool) instead.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls the tool by.
    fn name(&self) -> &str;

    /// What the tool does, for the model.
    fn description(&self) -> &str;

    /// The JSON Schema of the arguments (a JSON object).
    fn input_schema(&self) -> Value;

    /// Runs the tool and returns its raw data; the runtime formats it for the model.
    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError>;

    /// The level the tool's results are shown at when the call does not ask for one.
    fn default_level(&self) -> Option<OutputLevel> {
        None
    }

    /// What the tool can do beyond being called.
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::default()
    }

    /// Brings arguments written for an earlier version of the tool (a field since renamed) to
    /// its current schema; the runtime calls it before the arguments are validated, so a
    /// recorded session or a model that learnt the old name still works. By default the
    /// arguments are taken as they are.
    fn upgrade_arguments(&self, arguments: Value) -> Value {
        arguments
    }
}

#[async_trait]
impl<T: Tool + ?Sized> Tool for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn description(&self) -> &str {
        (**self).description()
    }
    fn input_schema(&self) -> Value {
        (**self).input_schema()
    }
    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        (**self).call(input, ctx).await
    }
    fn default_level(&self) -> Option<OutputLevel> {
        (**self).default_level()
    }
    fn capabilities(&self) -> ToolCapabilities {
        (**self).capabilities()
    }
    fn upgrade_arguments(&self, arguments: Value) -> Value {
        (**self).upgrade_arguments(arguments)
    }
}

#[async_trait]
impl<T: Tool + ?Sized> Tool for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn description(&self) -> &str {
        (**self).description()
    }
    fn input_schema(&self) -> Value {
        (**self).input_schema()
    }
    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        (**self).call(input, ctx).await
    }
    fn default_level(&self) -> Option<OutputLevel> {
        (**self).default_level()
    }
    fn capabilities(&self) -> ToolCapabilities {
        (**self).capabilities()
    }
    fn upgrade_arguments(&self, arguments: Value) -> Value {
        (**self).upgrade_arguments(arguments)
    }
}

fn _object_safe(_: &dyn Tool) {}

//! Hooks: code of the operator's that runs at fixed points of a run — before and after each
//! tool call, before a user message is sent, before a `/compact`, and when a run is about to
//! end with an answer. In Claude Code's shape, so its hook scripts work as they are: a command
//! gets the event as JSON on stdin (`hook_event_name`, `session_id`, `tool_name`,
//! `tool_input`, `tool_response`, `prompt`, …); exit 0 allows (stdout may be JSON with
//! `hookSpecificOutput.updatedInput` / `additionalContext` / `permissionDecision`, or a
//! `decision: "block"` with a `reason`; plain stdout of a `user_prompt_submit` hook is added
//! context), exit 2 blocks with stderr as the reason the model reads, any other exit is a
//! failure that is reported and does not block. A command runs in its own process group with
//! a cleared environment and a timeout; the group is killed when the time is up.
//!
//! Library users implement [`Hook`] instead. Every run of a hook is in the log (a hidden
//! entry of kind `hook`) and is a span event.

use std::time::Instant;

use async_trait::async_trait;
use ba_protocol::{HookEvent, HookVerdict};
use serde_json::Value;

/// Bytes of a hook's stdout and stderr read at most.
#[cfg(feature = "command-hooks")]
const MAX_OUTPUT: usize = 64 * 1024;
/// Characters of a reason or failure kept in the log and shown to the model.
const MAX_MESSAGE: usize = 2_000;
/// Variables a command hook keeps from the environment (the rest is cleared).
#[cfg(feature = "command-hooks")]
const ENV_KEPT: [&str; 8] = [
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "USER", "TZ",
];

/// What a hook answered.
#[derive(Debug, Clone, PartialEq)]
pub struct HookOutput {
    /// Allow, block, or a failure (reported, not blocking).
    pub verdict: HookVerdict,
    /// The reason of a block (read by the model), or what a failure said.
    pub message: Option<String>,
    /// A `pre_tool_use` hook's new arguments for the call.
    pub updated_input: Option<Value>,
    /// Context to add: to the user's message (`user_prompt_submit`) or the tool's result
    /// (`post_tool_use`).
    pub context: Option<String>,
    /// The command's exit code.
    pub exit_code: Option<i32>,
}

impl HookOutput {
    /// Go on, unchanged.
    pub fn allow() -> Self {
        Self {
            verdict: HookVerdict::Allow,
            message: None,
            updated_input: None,
            context: None,
            exit_code: None,
        }
    }

    /// Stop what the event guards; the model reads `reason`.
    pub fn block(reason: impl Into<String>) -> Self {
        Self {
            verdict: HookVerdict::Block,
            message: Some(bounded(reason.into())),
            ..Self::allow()
        }
    }

    #[cfg(feature = "command-hooks")]
    fn failed(verdict: HookVerdict, message: impl Into<String>, exit_code: Option<i32>) -> Self {
        Self {
            verdict,
            message: Some(bounded(message.into())),
            exit_code,
            ..Self::allow()
        }
    }
}

/// A hook. `input` is the event's JSON as Claude Code sends it to a hook script.
#[async_trait]
pub trait Hook: Send + Sync {
    /// How the log names it.
    fn name(&self) -> String;

    /// Whether it runs for `event` (and, for tool events, `tool`).
    fn matches(&self, event: HookEvent, tool: Option<&str>) -> bool;

    /// Runs it.
    async fn call(&self, event: HookEvent, input: &Value) -> HookOutput;
}

#[cfg(feature = "command-hooks")]
pub use command::CommandHook;

/// Hooks that are shell commands (feature `command-hooks`).
#[cfg(feature = "command-hooks")]
mod command {
    use std::process::Stdio;
    use std::time::Duration;

    use async_trait::async_trait;
    use ba_protocol::{HookEvent, HookVerdict};
    use serde_json::Value;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::{ENV_KEPT, Hook, HookOutput, MAX_OUTPUT, bounded};

    /// A command run through `sh -c` for one event, for the tools its matcher names (a tool
    /// name, `A|B` for several, `*` or nothing for all).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CommandHook {
        /// The event.
        pub event: HookEvent,
        /// The tools of a tool event it runs for.
        pub matcher: Option<String>,
        /// The shell command.
        pub command: String,
        /// How long it may run (default 60 s).
        pub timeout: Duration,
    }

    impl CommandHook {
        /// A hook running `command` for `event`, for every tool, with the default timeout.
        pub fn new(event: HookEvent, command: impl Into<String>) -> Self {
            Self {
                event,
                matcher: None,
                command: command.into(),
                timeout: Duration::from_secs(60),
            }
        }

        /// Runs only for these tools (`A|B`, `*` for all).
        #[must_use]
        pub fn with_matcher(mut self, matcher: impl Into<String>) -> Self {
            self.matcher = Some(matcher.into());
            self
        }

        /// Sets the timeout.
        #[must_use]
        pub fn with_timeout(mut self, timeout: Duration) -> Self {
            self.timeout = timeout;
            self
        }
    }

    #[async_trait]
    impl Hook for CommandHook {
        fn name(&self) -> String {
            self.command.clone()
        }

        fn matches(&self, event: HookEvent, tool: Option<&str>) -> bool {
            if event != self.event {
                return false;
            }
            match (self.matcher.as_deref().map(str::trim), tool) {
                (None | Some("" | "*"), _) | (Some(_), None) => true,
                (Some(m), Some(tool)) => m.split('|').any(|m| m.trim() == tool),
            }
        }

        async fn call(&self, event: HookEvent, input: &Value) -> HookOutput {
            run_command(&self.command, self.timeout, event, input).await
        }
    }

    /// Kills a hook's process group when dropped.
    struct GroupKiller(Option<u32>);

    impl Drop for GroupKiller {
        fn drop(&mut self) {
            let group = self
                .0
                .and_then(|p| i32::try_from(p).ok())
                .and_then(rustix::process::Pid::from_raw);
            if let Some(pid) = group {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
    }

    async fn run_command(
        command: &str,
        timeout: Duration,
        event: HookEvent,
        input: &Value,
    ) -> HookOutput {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c").arg(command).env_clear();
        for key in ENV_KEPT {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        cmd.env("BA_AGENT_HOOK_EVENT", event.as_str())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return HookOutput::failed(
                    HookVerdict::Failed,
                    format!("could not start: {e}"),
                    None,
                );
            }
        };
        let pgid = child.id();
        // Whatever ends the hook — its exit, its timeout, or the run dropping this future on a
        // cancel — nothing of its process group outlives it.
        let _group = GroupKiller(pgid);
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return HookOutput::failed(
                HookVerdict::Failed,
                "its streams could not be opened",
                None,
            );
        };
        let body = input.to_string();
        let work = async {
            // A hook that does not read its stdin must not block the write: written beside.
            let write = async {
                let _ = stdin.write_all(body.as_bytes()).await;
                drop(stdin);
            };
            let read = |s: Box<dyn tokio::io::AsyncRead + Unpin + Send>| async move {
                let mut buf = Vec::new();
                let _ = s.take(MAX_OUTPUT as u64).read_to_end(&mut buf).await;
                String::from_utf8_lossy(&buf).into_owned()
            };
            let ((), out, err) =
                tokio::join!(write, read(Box::new(stdout)), read(Box::new(stderr)));
            let status = child.wait().await;
            (out, err, status)
        };
        let (out, err, status) = match tokio::time::timeout(timeout, work).await {
            Ok(done) => done,
            Err(_) => {
                return HookOutput::failed(
                    HookVerdict::TimedOut,
                    format!(
                        "ran past its timeout of {} ms and was killed",
                        timeout.as_millis()
                    ),
                    None,
                );
            }
        };
        let code = match status {
            Ok(s) => s.code(),
            Err(e) => {
                return HookOutput::failed(HookVerdict::Failed, format!("waiting: {e}"), None);
            }
        };
        match code {
            Some(0) => read_stdout(event, out.trim()),
            Some(2) => {
                let reason = err.trim();
                let mut o = HookOutput::block(if reason.is_empty() {
                    "blocked by a hook"
                } else {
                    reason
                });
                o.exit_code = Some(2);
                o
            }
            other => HookOutput::failed(
                HookVerdict::Failed,
                match (other, err.trim()) {
                    (Some(c), "") => format!("exited with code {c}"),
                    (Some(c), e) => format!("exited with code {c}: {e}"),
                    (None, _) => "was killed by a signal".to_owned(),
                },
                other,
            ),
        }
    }

    /// Exit 0: Claude Code's JSON output, or plain text (context of a `user_prompt_submit`).
    pub(super) fn read_stdout(event: HookEvent, out: &str) -> HookOutput {
        let mut o = HookOutput {
            exit_code: Some(0),
            ..HookOutput::allow()
        };
        let Ok(Value::Object(json)) = serde_json::from_str::<Value>(out) else {
            if event == HookEvent::UserPromptSubmit && !out.is_empty() {
                o.context = Some(bounded(out.to_owned()));
            }
            return o;
        };
        let specific = json.get("hookSpecificOutput").and_then(Value::as_object);
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        if let Some(s) = specific {
            o.updated_input = s.get("updatedInput").filter(|v| v.is_object()).cloned();
            o.context = text(s.get("additionalContext")).map(bounded);
            if s.get("permissionDecision").and_then(Value::as_str) == Some("deny") {
                let reason = text(s.get("permissionDecisionReason"))
                    .unwrap_or_else(|| "denied by a hook".into());
                return HookOutput {
                    exit_code: Some(0),
                    ..HookOutput::block(reason)
                };
            }
        }
        let blocked = json.get("decision").and_then(Value::as_str) == Some("block")
            || json.get("continue").and_then(Value::as_bool) == Some(false);
        if blocked {
            let reason = text(json.get("reason"))
                .or_else(|| text(json.get("stopReason")))
                .unwrap_or_else(|| "blocked by a hook".into());
            return HookOutput {
                exit_code: Some(0),
                context: o.context,
                ..HookOutput::block(reason)
            };
        }
        o
    }
}

/// The hidden entry that records one hook's run.
pub(crate) fn hook_entry(record: ba_protocol::HookRecord) -> ba_protocol::LogEntry {
    let verdict = match record.verdict {
        HookVerdict::Allow => "allowed",
        HookVerdict::Block => "blocked",
        HookVerdict::Failed => "failed",
        HookVerdict::TimedOut => "timed out",
    };
    let mut e = ba_protocol::LogEntry::new(
        crate::ids::new_id(),
        ba_protocol::LogRole::System,
        crate::ids::now(),
    )
    .with_text(format!(
        "Hook {} ({}): {verdict}",
        record.event.as_str(),
        record.hook
    ));
    e.include_in_context = false;
    e.records.kind = Some(ba_protocol::EntryKind::Hook);
    e.records.hook = Some(record);
    e
}

fn bounded(mut s: String) -> String {
    if s.chars().count() > MAX_MESSAGE {
        s = s.chars().take(MAX_MESSAGE).collect::<String>() + "…";
    }
    s
}

/// What the hooks of one event said together: the first block wins; inputs chain (each hook
/// sees the input the one before it left); contexts join.
#[derive(Debug, Default)]
pub(crate) struct Combined {
    pub(crate) blocked: Option<String>,
    pub(crate) updated_input: Option<Value>,
    pub(crate) context: Vec<String>,
    pub(crate) records: Vec<ba_protocol::HookRecord>,
}

/// Runs the hooks of `event` in order; `input` is the event's JSON (its `tool_input` is
/// replaced by an earlier hook's new input for the later ones).
pub(crate) async fn run_hooks(
    hooks: &[std::sync::Arc<dyn Hook>],
    event: HookEvent,
    tool: Option<(&str, &str)>,
    mut input: Value,
) -> Combined {
    let mut out = Combined::default();
    for h in hooks.iter().filter(|h| h.matches(event, tool.map(|t| t.0))) {
        let start = Instant::now();
        let o = h.call(event, &input).await;
        let duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(
            hook.event = event.as_str(),
            hook.name = %h.name(),
            hook.verdict = ?o.verdict,
            hook.exit_code = o.exit_code,
            hook.duration_ms = duration_ms,
            "hook"
        );
        out.records.push(ba_protocol::HookRecord {
            event,
            hook: h.name(),
            verdict: o.verdict,
            tool: tool.map(|t| t.0.to_owned()),
            call_id: tool.map(|t| t.1.to_owned()),
            exit_code: o.exit_code,
            changed_input: o.updated_input.is_some(),
            message: o.message.clone(),
            duration_ms,
        });
        if let Some(c) = o.context {
            out.context.push(c);
        }
        if o.verdict == HookVerdict::Block {
            out.blocked = o.message.or_else(|| Some("blocked by a hook".into()));
            break;
        }
        if let Some(new) = o.updated_input {
            if let Some(obj) = input.as_object_mut() {
                obj.insert("tool_input".into(), new.clone());
            }
            out.updated_input = Some(new);
        }
    }
    out
}

#[cfg(all(test, feature = "command-hooks"))]
mod tests {
    use super::command::read_stdout;
    use super::*;

    #[test]
    fn matchers_name_tools() {
        let h = CommandHook::new(HookEvent::PreToolUse, "true").with_matcher("run_python|web");
        assert!(h.matches(HookEvent::PreToolUse, Some("run_python")));
        assert!(h.matches(HookEvent::PreToolUse, Some("web")));
        assert!(!h.matches(HookEvent::PreToolUse, Some("file_reader")));
        assert!(!h.matches(HookEvent::PostToolUse, Some("run_python")));
        let all = CommandHook::new(HookEvent::PreToolUse, "true").with_matcher("*");
        assert!(all.matches(HookEvent::PreToolUse, Some("anything")));
    }

    #[test]
    fn claude_code_outputs_are_read() {
        let o = read_stdout(
            HookEvent::PreToolUse,
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}"#,
        );
        assert_eq!(
            (o.verdict, o.message.as_deref()),
            (HookVerdict::Block, Some("no"))
        );
        let o = read_stdout(
            HookEvent::PreToolUse,
            r#"{"hookSpecificOutput": {"updatedInput": {"a": 1}}}"#,
        );
        assert_eq!(o.updated_input, Some(serde_json::json!({"a": 1})));
        let o = read_stdout(HookEvent::UserPromptSubmit, "Today is Monday.");
        assert_eq!(o.context.as_deref(), Some("Today is Monday."));
        let o = read_stdout(
            HookEvent::Stop,
            r#"{"decision": "block", "reason": "tests fail"}"#,
        );
        assert_eq!(o.verdict, HookVerdict::Block);
        // Plain text of a tool hook is not context.
        assert_eq!(read_stdout(HookEvent::PreToolUse, "ok").context, None);
    }
}

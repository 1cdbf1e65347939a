//! Where a run calls the operator's hooks (see [`crate::hooks`]): the input of each event in
//! Claude Code's shape, and the record of every hook's run in the log.

use ba_protocol::{HookEvent, HookRecord, LogToolCall};
use serde_json::{Map, Value, json};

use super::{Runner, Stop};
use crate::error::ErrorKind;
use crate::hooks::{Combined, run_hooks};

impl Runner {
    /// The event's JSON: what every event carries, then `fields`.
    fn hook_input(&self, event: HookEvent, fields: Value) -> Value {
        let mut m = Map::new();
        m.insert("session_id".into(), self.id.as_str().into());
        m.insert("transcript_path".into(), "".into());
        m.insert(
            "cwd".into(),
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
                .into(),
        );
        m.insert("hook_event_name".into(), event.claude_name().into());
        if let Value::Object(f) = fields {
            m.extend(f);
        }
        Value::Object(m)
    }

    /// Runs the hooks of `event` and records them; nothing when none is configured.
    pub(super) async fn hooks(
        &mut self,
        event: HookEvent,
        tool: Option<&LogToolCall>,
        fields: Value,
    ) -> Result<Combined, Stop> {
        if self.inner.hooks.is_empty() {
            return Ok(Combined::default());
        }
        let input = self.hook_input(event, fields);
        let hooks = self.inner.hooks.clone();
        // A cancel does not wait for a hook: its processes go with the dropped future.
        let cancel = self.signal.clone();
        let combined = tokio::select! {
            combined = run_hooks(
                &hooks,
                event,
                tool.map(|c| (c.function.name.as_str(), c.id.as_str())),
                input,
            ) => combined,
            () = super::wait_for_cancel(cancel) => {
                return Err(Stop {
                    kind: ErrorKind::Cancelled,
                    message: format!("the run was cancelled while a {} hook ran", event.as_str()),
                });
            }
        };
        for r in &combined.records {
            self.record_hook(r.clone()).await?;
        }
        Ok(combined)
    }

    async fn record_hook(&mut self, record: HookRecord) -> Result<(), Stop> {
        self.append(crate::hooks::hook_entry(record)).await
    }

    /// `user_prompt_submit`: the context the hooks add to the message (a block of its own,
    /// after what the person wrote), or a stop when a hook blocks it (nothing is appended then
    /// but the hooks' records).
    pub(super) async fn prompt_hooks(&mut self, text: &str) -> Result<Option<String>, Stop> {
        let combined = self
            .hooks(HookEvent::UserPromptSubmit, None, json!({"prompt": text}))
            .await?;
        if let Some(reason) = combined.blocked {
            return Err(Stop {
                kind: ErrorKind::Hook,
                message: format!("a user_prompt_submit hook blocked the message: {reason}"),
            });
        }
        if combined.context.is_empty() {
            return Ok(None);
        }
        Ok(Some(format!(
            "<hook_context>\n{}\n</hook_context>",
            combined.context.join("\n")
        )))
    }
}

impl Runner {
    /// `stop`, on an answered run: the reason a hook gives to go on, if one blocks (and the
    /// run has not been sent back [`super::MAX_STOP_CONTINUES`] times already).
    pub(super) async fn stop_hooks(
        &mut self,
        summary: &crate::events::RunSummary,
    ) -> Result<Option<String>, Stop> {
        if summary.status != crate::events::RunStatus::Answered
            || self.inner.hooks.is_empty()
            || self.stop_continues >= super::MAX_STOP_CONTINUES
        {
            return Ok(None);
        }
        let said = self
            .hooks(
                HookEvent::Stop,
                None,
                json!({
                    "stop_hook_active": self.stop_continues > 0,
                    "last_assistant_message": summary.final_answer,
                }),
            )
            .await?;
        if said.blocked.is_some() {
            self.stop_continues += 1;
        }
        Ok(said.blocked)
    }
}

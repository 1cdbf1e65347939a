//! How the agent commands show a run: one line per step for people, or one JSON object per
//! event (`--json`) for scripts.

use crate::out::{out, outln};
use ba_agent::{AgentEvent, RunSummary};

/// Prints events as they come.
pub(crate) struct Printer {
    /// One JSON object per line.
    pub json: bool,
    /// Print text deltas as they stream (native mode); structured answers show their plan.
    pub deltas: bool,
    /// Whether the last thing printed was a delta without its newline.
    open_line: bool,
}

fn clip(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

impl Printer {
    pub(crate) fn new(json: bool, deltas: bool) -> Self {
        Self {
            json,
            deltas,
            open_line: false,
        }
    }

    fn line(&mut self, text: &str) {
        if self.open_line {
            outln!();
            self.open_line = false;
        }
        outln!("{text}");
    }

    /// Prints one event; the final report is printed by [`Printer::final_report`].
    pub(crate) fn event(&mut self, event: &AgentEvent) {
        if self.json {
            if let Ok(text) = serde_json::to_string(event) {
                outln!("{text}");
            }
            return;
        }
        match event {
            AgentEvent::TextDelta { text, .. } if self.deltas => {
                if !self.open_line {
                    out!("   ");
                }
                out!("{}", text.replace('\n', "\n   "));
                crate::out::flush();
                self.open_line = true;
            }
            AgentEvent::FinalAnswer { .. } if self.open_line => {
                outln!();
                self.open_line = false;
            }
            _ => {
                if let Some(line) = progress_line(event) {
                    self.line(&line);
                }
            }
        }
    }

    /// Prints the final report under its heading: `rendered` (the answer with its saved code
    /// expanded), else the response as it is.
    pub(crate) fn final_report(&mut self, summary: &RunSummary, rendered: Option<&str>) {
        if self.json {
            return;
        }
        let Some(response) = &summary.response else {
            return;
        };
        self.line("");
        outln!("Final report");
        outln!("============");
        outln!("{}", rendered.unwrap_or(&response.response));
        let m = &response.metadata;
        if !m.saved_codes.is_empty() {
            outln!();
            for c in &m.saved_codes {
                outln!(
                    "Saved code: {} ({}, {} lines) — {}",
                    c.code_id,
                    c.language,
                    c.line_count,
                    c.description
                );
            }
        }
        if !m.recommended_questions.is_empty() {
            outln!();
            outln!("Follow-up questions:");
            for q in &m.recommended_questions {
                outln!("  - {q}");
            }
        }
    }
}

/// The line of progress an event prints as; none for the events progress does not show (the
/// run's start and end, thinking, streamed text and the answer, printed apart).
fn progress_line(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::RoundStarted { round, model } => Some(format!("── Round {round} · {model}")),
        AgentEvent::ContextCompressed {
            tokens_before,
            tokens_after,
            strategies,
            dropped,
            skills_reinjected,
            ..
        } => {
            let mut text = format!(
                "   ⇣ context compressed: {tokens_before} → {tokens_after} message tokens ({}), {dropped} entries left out",
                strategies.join(", ")
            );
            if !skills_reinjected.is_empty() {
                text.push_str(&format!(
                    "; skill instructions kept: {}",
                    skills_reinjected.join(", ")
                ));
            }
            Some(text)
        }
        AgentEvent::ModelAnswered {
            input_tokens,
            output_tokens,
            retries,
            ..
        } => {
            let retries = if *retries > 0 {
                format!(", {retries} retries")
            } else {
                String::new()
            };
            Some(format!(
                "   model: {input_tokens} tokens in, {output_tokens} out{retries}"
            ))
        }
        AgentEvent::Plan { task_analysis, .. } => {
            Some(format!("   thinking: {}", clip(task_analysis, 160)))
        }
        AgentEvent::ToolCallStarted {
            name, arguments, ..
        } => Some(format!("   ⇢ {name} {}", clip(&arguments.to_string(), 140))),
        AgentEvent::ToolResult {
            name,
            success,
            observation,
            data_ref,
            duration_ms,
            ..
        } => {
            let mark = if *success { "✓" } else { "✗" };
            let mut text = format!(
                "   {mark} {name} ({duration_ms} ms): {}",
                clip(observation, 120)
            );
            if let Some(r) = data_ref {
                text.push_str(&format!(" [data: {r}]"));
            }
            Some(text)
        }
        AgentEvent::SkillActivated {
            skill,
            allowed_tools,
            model,
            ..
        } => {
            let mut text = format!("   ★ skill {skill} active");
            if let Some(tools) = allowed_tools {
                text.push_str(&format!(" (tools: {})", tools.join(", ")));
            }
            if let Some(m) = model {
                text.push_str(&format!(" (model: {m})"));
            }
            Some(text)
        }
        AgentEvent::Error {
            kind,
            message,
            resumable,
            ..
        } => {
            let hint = if *resumable {
                " (send `continue` to resume)"
            } else {
                ""
            };
            Some(format!("   ! {kind}: {message}{hint}"))
        }
        AgentEvent::WorkflowStarted {
            workflow,
            inputs,
            nodes,
            ..
        } => {
            let inputs = ba_agent::shown_inputs(inputs);
            let path: Vec<&str> = nodes.iter().map(|n| n.id.as_str()).collect();
            Some(format!(
                "▶ workflow {workflow} ({}): {}",
                inputs.join(", "),
                path.join(" → ")
            ))
        }
        AgentEvent::NodeStarted { node, title, .. } => Some(format!("● node {node}: {title}")),
        AgentEvent::NodeCompleted {
            node,
            outputs,
            next,
            ..
        } => {
            let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
            Some(format!(
                "✓ node {node} done ({}) → {}",
                names.join(", "),
                next.as_deref().unwrap_or("end")
            ))
        }
        AgentEvent::WorkflowCompleted { workflow, .. } => {
            Some(format!("■ workflow {workflow} complete"))
        }
        AgentEvent::Cancelled { partial_saved, .. } => {
            let kept = if *partial_saved {
                "; the cut model call is in the log"
            } else {
                ""
            };
            Some(format!(
                "   ! cancelled{kept} (`ba-agent run --resume ID` goes on from here)"
            ))
        }
        _ => None,
    }
}

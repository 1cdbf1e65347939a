//! A model as the context crate's summarizer.

use std::sync::Arc;

use async_trait::async_trait;
use ba_context::Summarizer;
use ba_context::SummaryError;
use ba_model::{ModelClient, ModelRequest};
use ba_protocol::{LogEntry, LogRole};

/// The context crate's [`Summarizer`] backed by a model: the entries leaving the window are
/// rendered as a transcript and a (usually cheaper) model writes the summary.
#[derive(Clone)]
pub struct ModelSummarizer {
    client: Arc<dyn ModelClient>,
    model: String,
}

impl std::fmt::Debug for ModelSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSummarizer")
            .field("provider", &self.client.provider())
            .field("model", &self.model)
            .finish()
    }
}

/// The instruction the summarizing model gets.
pub const SUMMARY_INSTRUCTION: &str = "You summarise part of a business-analysis conversation \
so the analysis can go on without it. Keep every figure, table name, file path, query, decision \
and open question; drop pleasantries and repeated tool output. Write plain sentences and short \
lists, no preamble.";

/// The instruction the model that names a conversation gets.
pub const TITLE_INSTRUCTION: &str = "You name business-analysis conversations. Given the first \
question, answer with a title of at most eight words that says what is analysed (the measure, the \
scope, the period), in the question's language, with no quotes and no final period.";

impl ModelSummarizer {
    /// Summaries by `model` through `client`.
    pub fn new(client: Arc<dyn ModelClient>, model: impl Into<String>) -> Self {
        Self {
            client,
            model: model.into(),
        }
    }
}

/// The entries as one plain transcript: `[role] text`, tool calls with their arguments, tool
/// results with the call they answer.
pub fn transcript(entries: &[LogEntry]) -> String {
    let mut out = String::new();
    for e in entries.iter().filter(|e| e.include_in_context) {
        let text = e.text();
        if !text.trim().is_empty() {
            let who = match (&e.role, &e.tool_call_id) {
                (LogRole::Tool, Some(id)) => format!("tool result {id}"),
                (role, _) => role.as_str().to_owned(),
            };
            out.push_str(&format!("[{who}] {}\n", text.trim()));
        }
        for c in e.calls() {
            out.push_str(&format!(
                "[tool call {} {}] {}\n",
                c.id, c.function.name, c.function.arguments
            ));
        }
        if let Some(err) = &e.llm_error {
            out.push_str(&format!("[model error] {}\n", err.message));
        }
    }
    out
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    async fn summarize(
        &self,
        entries: &[LogEntry],
        max_tokens: usize,
    ) -> Result<String, SummaryError> {
        let prompt = format!(
            "Summarise this part of the conversation in at most {max_tokens} tokens.\n\n{}",
            transcript(entries)
        );
        let user = LogEntry::new("summary-request", LogRole::User, "1970-01-01T00:00:00Z")
            .with_text(prompt);
        let request = ModelRequest::new(self.model.clone(), vec![user])
            .with_system(SUMMARY_INSTRUCTION)
            .with_max_tokens(u32::try_from(max_tokens.max(64)).unwrap_or(u32::MAX));
        let response = self.client.complete(&request).await?;
        let text = response.message.text();
        if text.trim().is_empty() {
            return Err("the summarizing model answered with no text".into());
        }
        Ok(text.trim().to_owned())
    }

    async fn title(&self, question: &str) -> Result<Option<String>, SummaryError> {
        let user = LogEntry::new("title-request", LogRole::User, "1970-01-01T00:00:00Z")
            .with_text(question.chars().take(4_000).collect::<String>());
        let request = ModelRequest::new(self.model.clone(), vec![user])
            .with_system(TITLE_INSTRUCTION)
            .with_max_tokens(32);
        let response = self.client.complete(&request).await?;
        Ok(Some(response.message.text()))
    }
}

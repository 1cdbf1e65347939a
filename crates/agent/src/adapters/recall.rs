//! `recall`: the way back to what a compressed window left out. A tool result that left the
//! window whole is left as a trace naming `full output: recall m32`; this tool reads that entry
//! of the conversation's own log, a page at a time.

use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::{LogEntry, LogRole};
use ba_storage::{ConversationId, ConversationStore};
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The tool's name.
pub const RECALL_TOOL: &str = "recall";

/// Characters of one page.
pub const RECALL_PAGE_CHARS: usize = 6_000;

/// Reads an entry of the calling run's conversation whole, paged: a tool result, a message or
/// a call that the window shows only as a trace or a cut.
#[derive(Clone)]
pub struct RecallTool {
    store: Arc<dyn ConversationStore>,
}

impl std::fmt::Debug for RecallTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallTool").finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct RecallArgs {
    /// The entry id a trace names after `recall` (`m32`).
    entry: String,
    /// The page to read, from 1 (each page is about 6,000 characters).
    #[serde(default)]
    page: Option<usize>,
}

impl RecallTool {
    /// The tool over the conversations of `store`; a call reads the conversation of its run.
    pub fn new(store: Arc<dyn ConversationStore>) -> Self {
        Self { store }
    }
}

/// The text of an entry as the model would have read it: a result's output, a message's text,
/// an answer's text and its calls.
fn full_text(e: &LogEntry) -> String {
    let mut text = e.text().into_owned();
    for call in e.calls() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "call {} {}({})",
            call.id, call.function.name, call.function.arguments
        ));
    }
    text
}

/// Page `page` (from 1) of `text`, cut at line ends where a line ends within the page, and the
/// number of pages.
fn page_of(text: &str, page: usize, size: usize) -> (String, usize) {
    let mut pages: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < text.len() {
        // The end of the page's `size` chars (or of the text).
        let mut end = text[start..]
            .char_indices()
            .nth(size)
            .map_or(text.len(), |(i, _)| start + i);
        if end < text.len()
            && let Some(nl) = text[start..end].rfind('\n')
            && nl > 0
        {
            end = start + nl + 1;
        }
        pages.push((start, end));
        start = end;
    }
    let total = pages.len().max(1);
    let text = pages
        .get(page - 1)
        .map(|&(a, b)| text[a..b].to_owned())
        .unwrap_or_default();
    (text, total)
}

#[async_trait]
impl Tool for RecallTool {
    fn name(&self) -> &str {
        RECALL_TOOL
    }

    fn description(&self) -> &str {
        "Reads an earlier entry of this conversation whole: the full output of a tool call that \
         is shown only as a trace (`[trace of … full output: recall m32]`), or a message that \
         was cut. Long entries come a page at a time; ask for the next page to read on."
    }

    fn input_schema(&self) -> Value {
        serde_json::to_value(schemars::schema_for!(RecallArgs)).unwrap_or(Value::Null)
    }

    fn capabilities(&self) -> ToolCapabilities {
        // It reads the conversation's own log: allowed under any skill, read whole (its pages
        // are its bound), and the same answer every time.
        ToolCapabilities::default()
            .with_idempotent(true)
            .with_always_allowed(true)
            .with_verbatim(true)
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let args: RecallArgs = serde_json::from_value(input)
            .map_err(|e| ToolError::invalid_parameters(format!("recall: {e}")))?;
        let page = args.page.unwrap_or(1);
        if page == 0 {
            return Err(ToolError::invalid_parameters("recall: pages count from 1"));
        }
        let conversation =
            ctx.invocation.conversation_id.as_deref().ok_or_else(|| {
                ToolError::execution("recall: the call belongs to no conversation")
            })?;
        let id = ConversationId::new(conversation)
            .map_err(|e| ToolError::execution(format!("recall: {e}")))?;
        let log = crate::history::whole_log(self.store.as_ref(), &id)
            .await
            .map_err(|e| ToolError::resource(format!("recall: {e}")))?;
        let wanted = args.entry.trim();
        let Some(entry) = log.iter().map(|s| &s.entry).find(|e| e.id == wanted) else {
            return Err(ToolError::invalid_parameters(format!(
                "recall: this conversation has no entry `{wanted}` (a trace names it after `recall`)"
            )));
        };
        let text = full_text(entry);
        let (body, pages) = page_of(&text, page, RECALL_PAGE_CHARS);
        if page > pages {
            return Err(ToolError::invalid_parameters(format!(
                "recall: entry {wanted} has {pages} page(s), not {page}"
            )));
        }
        let what = match entry.role {
            LogRole::Tool => format!(
                "the output of {}",
                entry.tool_name.as_deref().unwrap_or("a tool call")
            ),
            LogRole::User => "a user message".to_owned(),
            LogRole::Assistant => "an answer".to_owned(),
            LogRole::System | LogRole::Developer => "a system entry".to_owned(),
        };
        let mut out = format!("[recall {wanted}: {what}, page {page} of {pages}]\n{body}");
        if page < pages {
            out.push_str(&format!(
                "\n[more: recall {{\"entry\": \"{wanted}\", \"page\": {}}}]",
                page + 1
            ));
        }
        Ok(Value::String(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cut_at_line_ends_and_cover_the_text() {
        let text: String = (0..500)
            .map(|i| format!("row {i}: value {i}.00\n"))
            .collect();
        let (first, pages) = page_of(&text, 1, 1_000);
        assert!(pages > 1);
        assert!(first.ends_with('\n'));
        let all: String = (1..=pages).map(|p| page_of(&text, p, 1_000).0).collect();
        assert_eq!(all, text);
        assert_eq!(page_of("", 1, 10), (String::new(), 1));
        // A line longer than a page is cut inside it, on a char boundary.
        let long = "é".repeat(25);
        let (p1, n) = page_of(&long, 1, 10);
        assert_eq!((p1.chars().count(), n), (10, 3));
    }
}

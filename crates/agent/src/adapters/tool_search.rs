//! `tool_search`: how the model finds the tools that were left out of its requests because
//! there were too many to send every time. The run puts the deferred tools in its scope
//! ([`DeferredTools`]); a search ranks them (BM25, or a regular expression on request) and
//! the tools it names are offered from the next request on, for the rest of the conversation
//! (the run records them on the result's entry as `tools_found`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use ba_protocol::{ToolErrorKind, ToolSpec};
use ba_tools::{CallContext, RunScope, Tool, ToolCapabilities, ToolError, ToolIndex};
use serde_json::{Value, json};

/// The tool's name.
pub const TOOL_SEARCH_TOOL: &str = "tool_search";

/// Tools a search names at most.
const MAX_RESULTS: usize = 10;
/// Tools a search names when the model does not say.
const DEFAULT_RESULTS: usize = 5;

/// How a search reads the query when the model does not say.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SearchKind {
    /// Words ranked by BM25 over names, descriptions and parameters.
    #[default]
    Bm25,
    /// A regular expression matched against the same text.
    Regex,
}

/// The tools a run left out of its requests, indexed, and what each search call found (until
/// the run takes it).
#[derive(Debug, Default)]
pub(crate) struct DeferredTools {
    state: Mutex<DeferredState>,
}

#[derive(Debug, Default)]
struct DeferredState {
    specs: Vec<ToolSpec>,
    index: ToolIndex,
    default_kind: SearchKind,
    found: HashMap<String, Vec<String>>,
}

impl DeferredTools {
    /// Sets the tools left out (the run's tool list changed).
    pub(crate) fn set(&self, specs: Vec<ToolSpec>, kind: SearchKind) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.index = ToolIndex::new(&specs);
        state.specs = specs;
        state.default_kind = kind;
    }

    /// The tools call `call_id` found, taken out (`None` when it was no search).
    pub(crate) fn found(scope: &RunScope, call_id: &str) -> Option<Vec<String>> {
        let tools = scope.get::<Self>()?;
        let mut state = tools.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.found.remove(call_id)
    }
}

/// Characters of a found tool's description the result quotes.
const DESCRIPTION_CHARS: usize = 240;

/// `text` cut to [`DESCRIPTION_CHARS`], at a word where it can.
fn short(text: &str) -> String {
    if text.chars().count() <= DESCRIPTION_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(DESCRIPTION_CHARS).collect();
    let at = cut.rfind(' ').unwrap_or(cut.len());
    format!("{}…", &cut[..at])
}

/// The `tool_search` tool (see the module).
#[derive(Debug, Clone, Default)]
pub struct ToolSearchTool;

#[async_trait]
impl Tool for ToolSearchTool {
    fn name(&self) -> &str {
        TOOL_SEARCH_TOOL
    }

    fn description(&self) -> &str {
        "Find tools that are not in your list yet: many tools are available but only the \
         common ones are listed. Describe what you need to do in a few words (`query`); the \
         best matching tools are named with what they do, and you can call them from your \
         next turn on. Set `regex: true` to match a pattern against tool names and \
         descriptions instead."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in a few words (or a pattern with `regex`)."},
                "regex": {"type": "boolean", "description": "Read `query` as a regular expression."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Tools to name at most (default 5)."}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::default()
            .with_idempotent(true)
            .with_always_allowed(true)
            .with_finds_tools(true)
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let bad = |m: String| ToolError::new(ToolErrorKind::InvalidParameters, m);
        let query = input
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .ok_or_else(|| bad("`query` must be a non-empty string".into()))?;
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_RESULTS, |n| {
                usize::try_from(n).unwrap_or(MAX_RESULTS)
            })
            .clamp(1, MAX_RESULTS);
        let Some(deferred) = ctx.scope.as_ref().and_then(|s| s.get::<DeferredTools>()) else {
            return Ok(
                json!({"found": [], "note": "no tool is waiting to be found: every tool is already in your list"}),
            );
        };
        let mut state = deferred
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let regex = match input.get("regex").and_then(Value::as_bool) {
            Some(r) => r,
            None => state.default_kind == SearchKind::Regex,
        };
        let hits = if regex {
            state
                .index
                .regex(query, limit)
                .map_err(|e| bad(e.to_string()))?
        } else {
            state.index.bm25(query, limit)
        };
        let found: Vec<Value> = hits
            .iter()
            .filter_map(|h| state.specs.iter().find(|s| s.name == h.name))
            // The definition comes with the next request; the model reads here what it does.
            .map(|s| json!({"name": s.name, "description": short(&s.description)}))
            .collect();
        let names: Vec<String> = hits.into_iter().map(|h| h.name).collect();
        let note = if names.is_empty() {
            "no tool matched: try other words (what the tool acts on, what it does)".to_owned()
        } else {
            "these tools are in your list from your next turn on".to_owned()
        };
        state.found.insert(ctx.call_id.to_string(), names);
        Ok(json!({"found": found, "note": note}))
    }
}

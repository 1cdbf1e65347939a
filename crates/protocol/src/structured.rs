//! The structured model response and the API response built from it.
//!
//! In structured-JSON mode the model answers with one JSON object: its analysis, its plan, the
//! round, and an action — tool calls (at most six, run in parallel) or the final report.
//! [`StructuredResponse::parse`] is strict and names the field that is wrong;
//! [`StructuredResponse::parse_lenient`] also accepts the object inside a markdown fence or
//! surrounded by prose, as models often write it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::{JsonMap, kind_of};

/// At most this many tool calls in one structured action.
pub const MAX_STRUCTURED_TOOL_CALLS: usize = 6;

/// One tool call of a structured `tool_call` action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StructuredToolCall {
    /// Tool name.
    pub tool_name: String,
    /// Unique call id.
    pub tool_call_id: String,
    /// Arguments object.
    pub arguments: Value,
}

/// A code block the model wants saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CodeBlock {
    /// Id the report can reference with `<code_ref>`.
    pub code_id: String,
    /// The code.
    pub code: String,
    /// Language as the model named it (validated when saved).
    #[serde(default = "default_language")]
    pub language: String,
    /// What the code does.
    #[serde(default)]
    pub description: String,
}

fn default_language() -> String {
    "python".to_owned()
}

/// What the model does this round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// Call tools (in parallel, at most six).
    ToolCall {
        /// The calls.
        content: Vec<StructuredToolCall>,
    },
    /// Finish with a report.
    Complete {
        /// The report (markdown or HTML, may hold `<code_ref>`/`<file_ref>` tags).
        content: String,
        /// Follow-up questions to offer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recommended_questions: Option<Vec<String>>,
        /// File names to offer for download.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        download_links: Option<Vec<String>>,
        /// Code to save.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code_blocks: Option<Vec<CodeBlock>>,
    },
}

/// The model's structured answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StructuredResponse {
    /// Chain of thought: intent, risks, approach.
    pub task_analysis: String,
    /// Plan across rounds (`R1: …; R2: …`).
    pub execution_plan: String,
    /// Round number, from 1.
    pub current_round: u32,
    /// What to do now.
    pub action: Action,
}

/// Why a structured response could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StructuredError {
    /// The text is not JSON (strict mode) or holds no JSON object (lenient mode).
    #[error("the response is not a JSON object: {0}")]
    NotJson(String),
    /// A field is missing or has the wrong type or value.
    #[error("field `{field}`: {message}")]
    Field {
        /// JSON path of the field (`action.content[2].tool_name`).
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn field_err(field: impl Into<String>, message: impl Into<String>) -> StructuredError {
    StructuredError::Field {
        field: field.into(),
        message: message.into(),
    }
}

fn obj<'a>(value: &'a Value, path: &str) -> Result<&'a JsonMap, StructuredError> {
    value
        .as_object()
        .ok_or_else(|| field_err(path, format!("must be an object, found {}", kind_of(value))))
}

fn string(map: &JsonMap, key: &str, path: &str) -> Result<String, StructuredError> {
    let here = join(path, key);
    match map.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(field_err(
            here,
            format!("must be a string, found {}", kind_of(other)),
        )),
        None => Err(field_err(here, "is missing")),
    }
}

fn opt_strings(
    map: &JsonMap,
    key: &str,
    path: &str,
) -> Result<Option<Vec<String>>, StructuredError> {
    let here = join(path, key);
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(field_err(
                    format!("{here}[{i}]"),
                    format!("must be a string, found {}", kind_of(other)),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(field_err(
            here,
            format!("must be an array of strings, found {}", kind_of(other)),
        )),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl StructuredResponse {
    /// Reads the response strictly: the whole text must be the JSON object.
    pub fn parse(text: &str) -> Result<Self, StructuredError> {
        let value: Value = serde_json::from_str(text.trim())
            .map_err(|e| StructuredError::NotJson(e.to_string()))?;
        Self::from_value(&value)
    }

    /// Reads the response leniently: the object may sit in a markdown code fence or among prose.
    /// The first balanced JSON object that reads as a structured response wins; if none does,
    /// the error of the first object found is returned (it names the field).
    pub fn parse_lenient(text: &str) -> Result<Self, StructuredError> {
        if let Ok(value) = serde_json::from_str::<Value>(text.trim()) {
            return Self::from_value(&value);
        }
        let mut first_error = None;
        for candidate in json_objects(text) {
            if let Ok(value) = serde_json::from_str::<Value>(candidate) {
                match Self::from_value(&value) {
                    Ok(parsed) => return Ok(parsed),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        Err(first_error.unwrap_or_else(|| {
            StructuredError::NotJson("no JSON object found in the text".to_owned())
        }))
    }

    /// Reads from parsed JSON, naming the first field that is wrong.
    pub fn from_value(value: &Value) -> Result<Self, StructuredError> {
        let map = obj(value, "$")?;
        let task_analysis = string(map, "task_analysis", "")?;
        let execution_plan = string(map, "execution_plan", "")?;
        let current_round = match map.get("current_round") {
            Some(Value::Number(n)) => {
                n.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        field_err(
                            "current_round",
                            format!("must be a non-negative integer, found {n}"),
                        )
                    })?
            }
            Some(other) => {
                return Err(field_err(
                    "current_round",
                    format!("must be an integer, found {}", kind_of(other)),
                ));
            }
            None => return Err(field_err("current_round", "is missing")),
        };
        let action_value = map
            .get("action")
            .ok_or_else(|| field_err("action", "is missing"))?;
        let action_map = obj(action_value, "action")?;
        let action = match action_map.get("type").and_then(Value::as_str) {
            Some("tool_call") => {
                let items = match action_map.get("content") {
                    Some(Value::Array(items)) => items,
                    Some(other) => {
                        return Err(field_err(
                            "action.content",
                            format!("must be an array of tool calls, found {}", kind_of(other)),
                        ));
                    }
                    None => return Err(field_err("action.content", "is missing")),
                };
                if items.is_empty() {
                    return Err(field_err("action.content", "holds no tool call"));
                }
                if items.len() > MAX_STRUCTURED_TOOL_CALLS {
                    return Err(field_err(
                        "action.content",
                        format!(
                            "holds {} tool calls; at most {MAX_STRUCTURED_TOOL_CALLS} are allowed",
                            items.len()
                        ),
                    ));
                }
                let mut calls = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let path = format!("action.content[{i}]");
                    let call = obj(item, &path)?;
                    let arguments = match call.get("arguments") {
                        Some(v @ Value::Object(_)) => v.clone(),
                        None | Some(Value::Null) => Value::Object(JsonMap::new()),
                        Some(other) => {
                            return Err(field_err(
                                format!("{path}.arguments"),
                                format!("must be an object, found {}", kind_of(other)),
                            ));
                        }
                    };
                    calls.push(StructuredToolCall {
                        tool_name: string(call, "tool_name", &path)?,
                        tool_call_id: string(call, "tool_call_id", &path)?,
                        arguments,
                    });
                }
                Action::ToolCall { content: calls }
            }
            Some("complete") => {
                let content = string(action_map, "content", "action")?;
                let code_blocks = match action_map.get("code_blocks") {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(items)) => {
                        let mut blocks = Vec::with_capacity(items.len());
                        for (i, item) in items.iter().enumerate() {
                            let path = format!("action.code_blocks[{i}]");
                            let block = obj(item, &path)?;
                            blocks.push(CodeBlock {
                                code_id: string(block, "code_id", &path)?,
                                code: string(block, "code", &path)?,
                                language: match block.get("language") {
                                    None | Some(Value::Null) => default_language(),
                                    Some(_) => string(block, "language", &path)?,
                                },
                                description: match block.get("description") {
                                    None | Some(Value::Null) => String::new(),
                                    Some(_) => string(block, "description", &path)?,
                                },
                            });
                        }
                        Some(blocks)
                    }
                    Some(other) => {
                        return Err(field_err(
                            "action.code_blocks",
                            format!("must be an array, found {}", kind_of(other)),
                        ));
                    }
                };
                Action::Complete {
                    content,
                    recommended_questions: opt_strings(
                        action_map,
                        "recommended_questions",
                        "action",
                    )?,
                    download_links: opt_strings(action_map, "download_links", "action")?,
                    code_blocks,
                }
            }
            Some(other) => {
                return Err(field_err(
                    "action.type",
                    format!("must be \"tool_call\" or \"complete\", found \"{other}\""),
                ));
            }
            None => return Err(field_err("action.type", "is missing or not a string")),
        };
        Ok(Self {
            task_analysis,
            execution_plan,
            current_round,
            action,
        })
    }
}

/// Balanced `{…}` spans of `text`, in order, skipping braces inside JSON strings.
fn json_objects(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut end = None;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(close) => {
                out.push(&text[open..=close]);
                start = close + 1;
            }
            None => start = open + 1,
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// API response

/// The action type of an API response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionType {
    /// Tools are running.
    ToolCall,
    /// The report is final.
    Complete,
}

/// Where the request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    /// Tools are running.
    Processing,
    /// Done.
    Complete,
    /// Failed.
    Error,
}

/// How the front end renders `response`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContentType {
    /// Markdown / plain text.
    #[default]
    Markdown,
    /// HTML (charts and the like).
    Html,
}

/// A tool call shown while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallInfo {
    /// Tool name.
    pub tool_name: String,
    /// Call id.
    pub tool_call_id: String,
    /// Arguments.
    pub arguments: Value,
    /// `processing` while it runs.
    pub status: ResponseStatus,
}

/// A `<code_ref>` resolved against the code store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CodeRef {
    /// Code id.
    pub code_id: String,
    /// Language.
    pub language: String,
    /// Description.
    pub description: String,
    /// Placeholder number: `{{CODE:index}}`.
    pub index: usize,
}

/// A `<file_ref>` resolved against the upload store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileRef {
    /// File id.
    pub file_id: String,
    /// File name.
    pub filename: String,
    /// File type (`csv`, …).
    pub file_type: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Placeholder number: `{{FILE:index}}`.
    pub index: usize,
}

/// A code block saved from the response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SavedCode {
    /// Code id.
    pub code_id: String,
    /// Language after validation.
    pub language: String,
    /// Description.
    pub description: String,
    /// Lines.
    pub line_count: usize,
    /// Characters.
    pub char_count: usize,
}

/// Metadata of an API response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApiMetadata {
    /// Tool call or complete.
    pub action_type: ActionType,
    /// Processing, complete or error.
    pub status: ResponseStatus,
    /// Calls in flight (tool_call responses).
    #[serde(default)]
    pub tool_calls: Vec<ToolCallInfo>,
    /// How to render `response`.
    #[serde(default)]
    pub content_type: ContentType,
    /// Whether `response` holds HTML.
    #[serde(default)]
    pub contains_html: bool,
    /// Resolved code references.
    #[serde(default)]
    pub code_refs: Vec<CodeRef>,
    /// Resolved file references.
    #[serde(default)]
    pub file_refs: Vec<FileRef>,
    /// Code blocks saved from this response.
    #[serde(default)]
    pub saved_codes: Vec<SavedCode>,
    /// Follow-up questions.
    #[serde(default)]
    pub recommended_questions: Vec<String>,
    /// Downloadable files.
    #[serde(default)]
    pub download_links: Vec<String>,
    /// The model's analysis.
    #[serde(default)]
    pub task_analysis: String,
    /// The model's plan.
    #[serde(default)]
    pub execution_plan: String,
    /// The round.
    #[serde(default)]
    pub current_round: u32,
}

/// What the back end returns to the front end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApiResponse {
    /// The report (placeholders for references), or empty while tools run.
    pub response: String,
    /// Everything else.
    pub metadata: ApiMetadata,
}

impl ApiResponse {
    /// The response for a structured answer, before references are resolved and code is saved
    /// (those need the stores; the orchestrator fills `code_refs`, `file_refs`, `saved_codes`).
    pub fn from_structured(structured: &StructuredResponse) -> Self {
        let mut metadata = ApiMetadata {
            action_type: ActionType::Complete,
            status: ResponseStatus::Complete,
            tool_calls: Vec::new(),
            content_type: ContentType::Markdown,
            contains_html: false,
            code_refs: Vec::new(),
            file_refs: Vec::new(),
            saved_codes: Vec::new(),
            recommended_questions: Vec::new(),
            download_links: Vec::new(),
            task_analysis: structured.task_analysis.clone(),
            execution_plan: structured.execution_plan.clone(),
            current_round: structured.current_round,
        };
        let response = match &structured.action {
            Action::ToolCall { content } => {
                metadata.action_type = ActionType::ToolCall;
                metadata.status = ResponseStatus::Processing;
                metadata.tool_calls = content
                    .iter()
                    .map(|c| ToolCallInfo {
                        tool_name: c.tool_name.clone(),
                        tool_call_id: c.tool_call_id.clone(),
                        arguments: c.arguments.clone(),
                        status: ResponseStatus::Processing,
                    })
                    .collect();
                String::new()
            }
            Action::Complete {
                content,
                recommended_questions,
                download_links,
                ..
            } => {
                metadata.recommended_questions = recommended_questions.clone().unwrap_or_default();
                metadata.download_links = download_links.clone().unwrap_or_default();
                metadata.contains_html = contains_html(content);
                if metadata.contains_html {
                    metadata.content_type = ContentType::Html;
                }
                content.clone()
            }
        };
        Self { response, metadata }
    }
}

/// Whether a report holds HTML to render (a document, a chart container, a script, a table).
pub fn contains_html(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "<!doctype html",
        "<html",
        "<div",
        "<script",
        "<table",
        "<svg",
        "<canvas",
        "<style",
        "echarts.init",
    ]
    .iter()
    .any(|tag| lower.contains(tag))
}

/// Replaces each `<tag>id</tag>` with `{{PLACEHOLDER:n}}` (n from 0 in order of first
/// appearance; a repeated id reuses its number) and returns the ids in placeholder order.
///
/// `tag` is `code_ref` or `file_ref`; `placeholder` is `CODE` or `FILE`.
pub fn replace_refs(text: &str, tag: &str, placeholder: &str) -> (String, Vec<String>) {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut out = String::with_capacity(text.len());
    let mut ids: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        let id = after[..end].trim();
        out.push_str(&rest[..start]);
        let n = match ids.iter().position(|known| known == id) {
            Some(n) => n,
            None => {
                ids.push(id.to_owned());
                ids.len() - 1
            }
        };
        out.push_str(&format!("{{{{{placeholder}:{n}}}}}"));
        rest = &after[end + close.len()..];
    }
    out.push_str(rest);
    (out, ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOL_CALL: &str = r#"{"task_analysis":"look at sales","execution_plan":"R1: query; R2: report","current_round":1,
        "action":{"type":"tool_call","content":[{"tool_name":"query_database","tool_call_id":"call_1","arguments":{"query":"SELECT 1"}}]}}"#;

    #[test]
    fn strict_parse_of_a_tool_call() {
        let r = StructuredResponse::parse(TOOL_CALL).unwrap();
        assert_eq!(r.current_round, 1);
        let Action::ToolCall { content } = &r.action else {
            panic!("not a tool call")
        };
        assert_eq!(content[0].tool_name, "query_database");
    }

    #[test]
    fn lenient_parse_in_fences_and_prose() {
        let fenced = format!("Here is my answer:\n```json\n{TOOL_CALL}\n```\nThanks.");
        assert!(StructuredResponse::parse(&fenced).is_err());
        assert_eq!(
            StructuredResponse::parse_lenient(&fenced).unwrap(),
            StructuredResponse::parse(TOOL_CALL).unwrap()
        );
        let prose = format!("I think {{not json}} then {TOOL_CALL} done");
        assert_eq!(
            StructuredResponse::parse_lenient(&prose).unwrap(),
            StructuredResponse::parse(TOOL_CALL).unwrap()
        );
    }

    #[test]
    fn errors_name_the_field() {
        let bad = TOOL_CALL.replace(r#""tool_name":"query_database","#, r#""tool_name":7,"#);
        let err = StructuredResponse::parse(&bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `action.content[0].tool_name`: must be a string, found a number"
        );
        let bad = TOOL_CALL.replace(r#""current_round":1"#, r#""current_round":"one""#);
        assert_eq!(
            StructuredResponse::parse(&bad).unwrap_err().to_string(),
            "field `current_round`: must be an integer, found a string"
        );
        let calls: Vec<String> = (0..7)
            .map(|i| format!(r#"{{"tool_name":"t","tool_call_id":"c{i}","arguments":{{}}}}"#))
            .collect();
        let seven = format!(
            r#"{{"task_analysis":"","execution_plan":"","current_round":1,"action":{{"type":"tool_call","content":[{}]}}}}"#,
            calls.join(",")
        );
        assert!(
            StructuredResponse::parse(&seven)
                .unwrap_err()
                .to_string()
                .contains("at most 6")
        );
        assert!(matches!(
            StructuredResponse::parse("{\"task_analysis\":"),
            Err(StructuredError::NotJson(_))
        ));
    }

    #[test]
    fn api_response_for_complete_with_html_and_refs() {
        let text = r#"{"task_analysis":"a","execution_plan":"p","current_round":2,"action":{"type":"complete",
            "content":"<div id=\"chart\"></div> see <code_ref>code_sales</code_ref> and <code_ref>code_sales</code_ref>",
            "recommended_questions":["Why?"]}}"#;
        let s = StructuredResponse::parse(text).unwrap();
        let api = ApiResponse::from_structured(&s);
        assert!(api.metadata.contains_html);
        assert_eq!(api.metadata.content_type, ContentType::Html);
        assert_eq!(api.metadata.recommended_questions, vec!["Why?".to_owned()]);
        let (replaced, ids) = replace_refs(&api.response, "code_ref", "CODE");
        assert_eq!(ids, vec!["code_sales".to_owned()]);
        assert!(replaced.ends_with("see {{CODE:0}} and {{CODE:0}}"));
    }
}

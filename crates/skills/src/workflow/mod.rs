//! Workflow definitions: a folder with a `WORKFLOW.md` whose frontmatter names typed inputs and
//! a graph of nodes, each with a brief, the tools it may use, the outputs it must produce and
//! where to go next. This module reads and checks definitions; running them is the agent's job.
//!
//! - [`WorkflowDef`] and its parts are plain serde types.
//! - [`WorkflowDef::resolve_inputs`], [`WorkflowNode::check_outputs`] and
//!   [`WorkflowNode::next_after`] are what a runtime calls between nodes.
//! - [`parse_workflow`] reads one text leniently, [`WorkflowSet::load`] every `WORKFLOW.md`
//!   under a list of roots, and [`validate_workflow`] applies the rules strictly.

mod graph;
mod inputs;
mod load;
mod parse;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use load::{
    MAX_WORKFLOW_BYTES, StartError, WORKFLOW_FILE, WorkflowSet, parse_workflow, validate_workflow,
    validate_workflow_text,
};

/// The node id that ends a workflow in a `next`, a case or a default.
pub const END: &str = "end";

/// A workflow read from a `WORKFLOW.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowDef {
    /// Its id: lowercase letters, digits and hyphens, as skill names.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The values a run is started with.
    pub inputs: Vec<WorkflowInput>,
    /// The nodes; the first one is where a run starts.
    pub nodes: Vec<WorkflowNode>,
    /// The Markdown body: guidance for the whole run.
    pub body: String,
    /// The `WORKFLOW.md` it was read from.
    pub path: PathBuf,
}

/// One named, typed input of a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowInput {
    /// Its name.
    pub name: String,
    /// How its text is read.
    #[serde(rename = "type")]
    pub ty: InputType,
    /// The value used when none is given, already read as [`WorkflowInput::ty`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// What it means.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether a run must be given it (true by default when there is no default).
    pub required: bool,
}

/// The type of a workflow input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum InputType {
    /// Any text.
    String,
    /// A finite number.
    Number,
    /// A whole number.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A calendar date, `YYYY-MM-DD`.
    Date,
    /// A calendar month, `YYYY-MM`.
    Month,
}

impl InputType {
    /// Every type, in the order of their names in [`InputType::as_str`].
    pub const ALL: [Self; 6] = [
        Self::String,
        Self::Number,
        Self::Integer,
        Self::Boolean,
        Self::Date,
        Self::Month,
    ];

    /// Its name in a `WORKFLOW.md`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Date => "date",
            Self::Month => "month",
        }
    }

    /// The type of this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Reads `text` as this type: numbers and booleans become JSON numbers and booleans,
    /// dates and months stay text once checked. The error is a sentence about the text.
    ///
    /// ```
    /// use ba_skills::InputType;
    /// assert_eq!(InputType::Integer.read("12").unwrap(), serde_json::json!(12));
    /// assert!(InputType::Month.read("2024-13").is_err());
    /// ```
    pub fn read(self, text: &str) -> Result<Value, String> {
        inputs::read(self, text)
    }
}

/// One node of a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowNode {
    /// Its id, unique in the workflow.
    pub id: String,
    /// A short title for people.
    pub title: String,
    /// What the model is asked to do at this node.
    pub brief: String,
    /// The tools it may call; `None` leaves the run's tools as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Skills it should use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// What it must produce.
    pub outputs: Vec<NodeOutput>,
    /// Where a run goes after it.
    pub next: Next,
}

/// One declared output of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeOutput {
    /// Its name, unique in the node.
    pub name: String,
    /// What sort of thing it is.
    pub kind: OutputKind,
    /// What it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For a decision: the values it may take (any when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// The kind of a node output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum OutputKind {
    /// A table of figures.
    Table,
    /// A chart.
    Figure,
    /// A file written to the workspace.
    File,
    /// A choice, which a branch may follow.
    Decision,
    /// One value.
    Value,
    /// Prose.
    Text,
}

impl OutputKind {
    /// Every kind.
    pub const ALL: [Self; 6] = [
        Self::Table,
        Self::Figure,
        Self::File,
        Self::Decision,
        Self::Value,
        Self::Text,
    ];

    /// Its name in a `WORKFLOW.md`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Figure => "figure",
            Self::File => "file",
            Self::Decision => "decision",
            Self::Value => "value",
            Self::Text => "text",
        }
    }

    /// The kind of this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Where a run goes after a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Next {
    /// The run ends.
    End,
    /// Always this node.
    Node(String),
    /// The node named by the case of the value the node produced for `on`.
    Branch {
        /// The output of this node whose value chooses.
        on: String,
        /// Value (as text) → node id or `end`.
        cases: BTreeMap<String, String>,
        /// Node id or `end` for a value no case names.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<String>,
    },
}

impl Next {
    /// Every node id (or `end`) it may lead to, cases first, then the default.
    pub fn targets(&self) -> Vec<&str> {
        match self {
            Self::End => vec![END],
            Self::Node(id) => vec![id.as_str()],
            Self::Branch { cases, default, .. } => cases
                .values()
                .chain(default.iter())
                .map(String::as_str)
                .collect(),
        }
    }
}

/// Why a node's next step could not be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The branch's output has no value and there is no default.
    #[error("node `{node}` branches on its output `{on}`, which was not produced")]
    BranchValueMissing {
        /// The node.
        node: String,
        /// The output it branches on.
        on: String,
    },
    /// No case names the value and there is no default.
    #[error(
        "node `{node}` branches on `{on}`, whose value `{value}` is none of the cases ({})",
        cases.join(", ")
    )]
    NoCase {
        /// The node.
        node: String,
        /// The output it branches on.
        on: String,
        /// The value produced, as text.
        value: String,
        /// The values the cases name.
        cases: Vec<String>,
    },
}

/// A produced value as a branch compares it: a string as itself, anything else as its JSON text.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn target(id: &str) -> Option<&str> {
    (id != END).then_some(id)
}

impl WorkflowDef {
    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&WorkflowNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Where a run starts.
    pub fn first_node(&self) -> Option<&WorkflowNode> {
        self.nodes.first()
    }

    /// The rules over the whole definition, for one built in code or read from a file: at
    /// least one node, unique ids, every `next` naming a node or `end`, branches on declared
    /// outputs, every node reachable from the first (a warning) and able to reach the end, and
    /// with `known_tools` every tool a node allows known. Field-level rules (types, kinds,
    /// names) are [`validate_workflow`]'s.
    pub fn check(&self, known_tools: Option<&BTreeSet<String>>) -> Vec<crate::Diagnostic> {
        graph::check(self, known_tools)
    }

    /// The inputs of a run: `given` read by type, defaults for those not given. Every problem
    /// (an unknown input, a missing required one, a value that does not read as its type) is
    /// one sentence naming the input.
    ///
    /// # Errors
    /// The sentences, when anything is wrong.
    pub fn resolve_inputs(
        &self,
        given: &BTreeMap<String, String>,
    ) -> Result<Map<String, Value>, Vec<String>> {
        inputs::resolve(&self.inputs, given)
    }
}

impl WorkflowNode {
    /// The output declared with this name.
    pub fn output(&self, name: &str) -> Option<&NodeOutput> {
        self.outputs.iter().find(|o| o.name == name)
    }

    /// The node a run goes to after this one produced `outputs`; `None` ends the run. A branch
    /// reads the value of its `on` output as text (a boolean or a number as its JSON text) and
    /// falls back to its default.
    ///
    /// # Errors
    /// A branch whose value is missing or matches no case, without a default.
    pub fn next_after(&self, outputs: &Map<String, Value>) -> Result<Option<&str>, WorkflowError> {
        match &self.next {
            Next::End => Ok(None),
            Next::Node(id) => Ok(target(id)),
            Next::Branch { on, cases, default } => {
                let value = outputs.get(on).filter(|v| !v.is_null()).map(value_text);
                let chosen = value
                    .as_ref()
                    .and_then(|v| cases.get(v))
                    .or(default.as_ref());
                match (chosen, value) {
                    (Some(id), _) => Ok(target(id)),
                    (None, None) => Err(WorkflowError::BranchValueMissing {
                        node: self.id.clone(),
                        on: on.clone(),
                    }),
                    (None, Some(value)) => Err(WorkflowError::NoCase {
                        node: self.id.clone(),
                        on: on.clone(),
                        value,
                        cases: cases.keys().cloned().collect(),
                    }),
                }
            }
        }
    }

    /// Checks what the model produced for this node: a JSON object with every declared output,
    /// none null, nothing undeclared, and each decision among its options. Returns the object;
    /// the errors are sentences naming the output, for the model to read and fix.
    ///
    /// # Errors
    /// One sentence per problem.
    pub fn check_outputs(&self, outputs: &Value) -> Result<Map<String, Value>, Vec<String>> {
        let declared = || {
            if self.outputs.is_empty() {
                return "no outputs".to_owned();
            }
            self.outputs
                .iter()
                .map(|o| format!("`{}`", o.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Value::Object(map) = outputs else {
            return Err(vec![format!(
                "the outputs of node `{}` must be a JSON object (it declares {})",
                self.id,
                declared()
            )]);
        };
        let mut problems = Vec::new();
        for out in &self.outputs {
            match map.get(&out.name) {
                None => problems.push(format!(
                    "output `{}` ({}) of node `{}` is missing",
                    out.name,
                    out.kind.as_str(),
                    self.id
                )),
                Some(Value::Null) => problems.push(format!(
                    "output `{}` ({}) of node `{}` is null; give it a value",
                    out.name,
                    out.kind.as_str(),
                    self.id
                )),
                Some(value) => {
                    let text = value_text(value);
                    if out.kind == OutputKind::Decision
                        && !out.options.is_empty()
                        && !out.options.contains(&text)
                    {
                        problems.push(format!(
                            "output `{}` of node `{}` is `{text}`, which is not one of its options: {}",
                            out.name,
                            self.id,
                            out.options.join(", ")
                        ));
                    }
                }
            }
        }
        for key in map.keys() {
            if self.output(key).is_none() {
                problems.push(format!(
                    "output `{key}` is not declared by node `{}`, which declares {}",
                    self.id,
                    declared()
                ));
            }
        }
        if problems.is_empty() {
            Ok(map.clone())
        } else {
            Err(problems)
        }
    }

    /// The files that checked `outputs` name through this node's `figure` and `file` outputs,
    /// for a runtime to look up among the conversation's files before it accepts the node: a
    /// chart the model names must be one a tool wrote. A value (a string, or a list of them)
    /// names a file when it is a `<file_ref>`, a file id (`output_001`) or one word with an
    /// extension (`chart.png`, `outputs/chart.png`: a folder in front is taken off, as a file
    /// is kept under its own name); words that describe a chart drawn elsewhere (in the final
    /// report) name none.
    pub fn file_references(&self, outputs: &Map<String, Value>) -> Vec<FileReference> {
        let mut found = Vec::new();
        for out in &self.outputs {
            if !matches!(out.kind, OutputKind::Figure | OutputKind::File) {
                continue;
            }
            let values: Vec<&Value> = match outputs.get(&out.name) {
                Some(Value::Array(items)) => items.iter().collect(),
                Some(value) => vec![value],
                None => Vec::new(),
            };
            for value in values {
                let text = value_text(value);
                if let Some(reference) = file_name_of(&text) {
                    found.push(FileReference {
                        output: out.name.clone(),
                        kind: out.kind,
                        reference: reference.to_owned(),
                    });
                }
            }
        }
        found
    }
}

/// A file a node's output names ([`WorkflowNode::file_references`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReference {
    /// The output.
    pub output: String,
    /// Its kind (`figure` or `file`).
    pub kind: OutputKind,
    /// The file's name or id, as the conversation's files are looked up by.
    pub reference: String,
}

/// The file a value names (`<file_ref>` tags, quotes and any folder in front taken off), if it
/// names one: a tagged reference, a file id, or one word with an extension.
fn file_name_of(text: &str) -> Option<&str> {
    let text = text.trim();
    let (text, tagged) = match text
        .strip_prefix("<file_ref>")
        .and_then(|t| t.strip_suffix("</file_ref>"))
    {
        Some(inner) => (inner, true),
        None => (text, false),
    };
    let text = text.trim().trim_matches(['"', '\'', '`']);
    let name = text.rsplit(['/', '\\']).next().unwrap_or(text).trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let id = ba_protocol::FileId::parse(name).is_ok_and(|id| id.prefixed_kind().is_some());
    let extension = name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && (1..=5).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
    });
    (tagged || id || extension).then_some(name)
}

#[cfg(test)]
mod tests;

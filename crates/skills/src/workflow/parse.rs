//! Reading a `WORKFLOW.md` frontmatter (already turned into JSON) into a [`WorkflowDef`],
//! reporting every field that is missing or of the wrong type.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::{
    END, InputType, Next, NodeOutput, OutputKind, WorkflowDef, WorkflowInput, WorkflowNode,
};
use crate::diagnostic::{Diagnostic, Rule, Severity};
use crate::frontmatter::split_tools;
use crate::validate::{Strictness, check_name};

const TOP_FIELDS: [&str; 4] = ["name", "description", "inputs", "nodes"];
const INPUT_FIELDS: [&str; 5] = ["name", "type", "default", "description", "required"];
const NODE_FIELDS: [&str; 7] = ["id", "title", "brief", "tools", "skills", "outputs", "next"];
const OUTPUT_FIELDS: [&str; 4] = ["name", "kind", "description", "options"];
const BRANCH_FIELDS: [&str; 3] = ["on", "cases", "default"];

/// What reading the frontmatter found, with where it is.
pub(super) struct Reader<'a> {
    path: &'a Path,
    strictness: Strictness,
    pub(super) found: Vec<Diagnostic>,
}

fn yaml_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "mapping",
    }
}

/// A scalar as text (YAML reads `2024-09` as text but `10` as a number).
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl<'a> Reader<'a> {
    pub(super) fn new(path: &'a Path, strictness: Strictness) -> Self {
        Self {
            path,
            strictness,
            found: Vec::new(),
        }
    }

    fn push(&mut self, severity: Severity, rule: Rule, message: String) {
        self.found
            .push(Diagnostic::new(self.path, severity, rule, message));
    }

    fn error(&mut self, rule: Rule, message: String) {
        self.push(Severity::Error, rule, message);
    }

    fn unexpected(&mut self, map: &Map<String, Value>, allowed: &[&str], place: &str) {
        let extra: Vec<String> = map
            .keys()
            .filter(|k| !allowed.contains(&k.as_str()))
            .map(|k| format!("`{k}`"))
            .collect();
        if extra.is_empty() {
            return;
        }
        let severity = match self.strictness {
            Strictness::Strict => Severity::Error,
            Strictness::Lenient => Severity::Warning,
        };
        let allowed: Vec<String> = allowed.iter().map(|k| format!("`{k}`")).collect();
        self.push(
            severity,
            Rule::UnexpectedField,
            format!(
                "{place}: unexpected field{} {}; the fields are {}",
                if extra.len() == 1 { "" } else { "s" },
                extra.join(", "),
                allowed.join(", ")
            ),
        );
    }

    /// A required text field; a scalar of another type is taken as its text, with an error.
    fn text(&mut self, map: &Map<String, Value>, key: &str, place: &str) -> Option<String> {
        match map.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
            None | Some(Value::Null) | Some(Value::String(_)) => {
                let rule = match (place, key) {
                    ("workflow", "name") => Rule::NameMissing,
                    ("workflow", "description") => Rule::DescriptionMissing,
                    _ => Rule::FieldMissing,
                };
                self.error(
                    rule,
                    format!("{place}: the required field `{key}` is missing or empty"),
                );
                None
            }
            Some(other) => {
                self.error(
                    Rule::FieldType,
                    format!(
                        "{place}: field `{key}` is a YAML {}, not a string",
                        yaml_kind(other)
                    ),
                );
                scalar(other)
            }
        }
    }

    /// An optional text field.
    fn optional_text(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        place: &str,
    ) -> Option<String> {
        match map.get(key)? {
            Value::Null => None,
            _ => self.text(map, key, place),
        }
    }

    /// A list of names, from a YAML list or a space- or comma-separated string.
    fn names(&mut self, map: &Map<String, Value>, key: &str, place: &str) -> Option<Vec<String>> {
        match map.get(key)? {
            Value::Null => None,
            Value::String(s) => Some(split_tools(s)),
            Value::Array(items) => {
                let mut names = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) if !s.trim().is_empty() => names.push(s.trim().to_owned()),
                        other => self.error(
                            Rule::FieldType,
                            format!(
                                "{place}: item {i} of `{key}` is a YAML {}, not a name",
                                yaml_kind(other)
                            ),
                        ),
                    }
                }
                Some(names)
            }
            other => {
                self.error(
                    Rule::FieldType,
                    format!(
                        "{place}: field `{key}` is a YAML {}, not a list of names",
                        yaml_kind(other)
                    ),
                );
                None
            }
        }
    }

    /// Named items from a list of mappings with `name`, or a mapping of name → mapping (or
    /// name → text, read as `shorthand: text`).
    fn named(
        &mut self,
        value: Option<&Value>,
        key: &str,
        place: &str,
        shorthand: &str,
    ) -> Vec<(String, Map<String, Value>)> {
        let mut items = Vec::new();
        match value {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let Value::Object(map) = item else {
                        self.error(
                            Rule::FieldType,
                            format!(
                                "{place}: item {i} of `{key}` is a YAML {}, not a mapping",
                                yaml_kind(item)
                            ),
                        );
                        continue;
                    };
                    match map
                        .get("name")
                        .and_then(scalar)
                        .filter(|n| !n.trim().is_empty())
                    {
                        Some(name) => items.push((name, map.clone())),
                        None => self.error(
                            Rule::FieldMissing,
                            format!("{place}: item {i} of `{key}` has no `name`"),
                        ),
                    }
                }
            }
            Some(Value::Object(by_name)) => {
                for (name, item) in by_name {
                    match item {
                        Value::Object(map) => items.push((name.clone(), map.clone())),
                        Value::String(s) => {
                            let mut map = Map::new();
                            map.insert(shorthand.to_owned(), Value::String(s.clone()));
                            items.push((name.clone(), map));
                        }
                        other => self.error(
                            Rule::FieldType,
                            format!(
                                "{place}: `{key}.{name}` is a YAML {}, not a mapping or a {shorthand}",
                                yaml_kind(other)
                            ),
                        ),
                    }
                }
            }
            Some(other) => self.error(
                Rule::FieldType,
                format!(
                    "{place}: field `{key}` is a YAML {}, not a list or a mapping",
                    yaml_kind(other)
                ),
            ),
        }
        items
    }

    fn input(&mut self, name: String, map: &Map<String, Value>) -> Option<WorkflowInput> {
        let place = format!("input `{name}`");
        self.unexpected(map, &INPUT_FIELDS, &place);
        let type_name = self.text(map, "type", &place)?;
        let Some(ty) = InputType::from_name(&type_name) else {
            let known: Vec<&str> = InputType::ALL.iter().map(|t| t.as_str()).collect();
            self.error(
                Rule::UnknownInputType,
                format!(
                    "{place}: unknown type `{type_name}`; the types are {}",
                    known.join(", ")
                ),
            );
            return None;
        };
        let default = match map.get("default") {
            None | Some(Value::Null) => None,
            Some(value) => match scalar(value).map(|t| ty.read(&t)) {
                Some(Ok(v)) => Some(v),
                Some(Err(why)) => {
                    self.error(Rule::BadDefault, format!("{place}: the default {why}"));
                    None
                }
                None => {
                    self.error(
                        Rule::BadDefault,
                        format!(
                            "{place}: the default is a YAML {}, not a {}",
                            yaml_kind(value),
                            ty.as_str()
                        ),
                    );
                    None
                }
            },
        };
        let required = match map.get("required") {
            None | Some(Value::Null) => default.is_none(),
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                self.error(
                    Rule::FieldType,
                    format!(
                        "{place}: field `required` is a YAML {}, not a boolean",
                        yaml_kind(other)
                    ),
                );
                default.is_none()
            }
        };
        Some(WorkflowInput {
            description: self.optional_text(map, "description", &place),
            name,
            ty,
            default,
            required,
        })
    }

    fn output(&mut self, node: &str, name: String, map: &Map<String, Value>) -> Option<NodeOutput> {
        let place = format!("node `{node}`, output `{name}`");
        self.unexpected(map, &OUTPUT_FIELDS, &place);
        let kind_name = self.text(map, "kind", &place)?;
        let Some(kind) = OutputKind::from_name(&kind_name) else {
            let known: Vec<&str> = OutputKind::ALL.iter().map(|k| k.as_str()).collect();
            self.error(
                Rule::UnknownOutputKind,
                format!(
                    "{place}: unknown kind `{kind_name}`; the kinds are {}",
                    known.join(", ")
                ),
            );
            return None;
        };
        let options = match map.get("options") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if kind == OutputKind::Decision => {
                let mut options = Vec::new();
                for item in items {
                    match scalar(item) {
                        Some(text) => options.push(text),
                        None => self.error(
                            Rule::FieldType,
                            format!(
                                "{place}: an option is a YAML {}, not a value",
                                yaml_kind(item)
                            ),
                        ),
                    }
                }
                options
            }
            Some(Value::Array(_)) => {
                self.error(
                    Rule::FieldType,
                    format!("{place}: only a decision has `options`; this output is a {kind_name}"),
                );
                Vec::new()
            }
            Some(other) => {
                self.error(
                    Rule::FieldType,
                    format!(
                        "{place}: field `options` is a YAML {}, not a list",
                        yaml_kind(other)
                    ),
                );
                Vec::new()
            }
        };
        Some(NodeOutput {
            description: self.optional_text(map, "description", &place),
            name,
            kind,
            options,
        })
    }

    /// `next` as written: `None` when absent (the following node, or the end after the last).
    fn next(&mut self, node: &str, value: Option<&Value>) -> Option<Next> {
        let place = format!("node `{node}`");
        match value? {
            Value::Null => None,
            Value::String(id) if id == END => Some(Next::End),
            Value::String(id) => Some(Next::Node(id.clone())),
            Value::Object(map) => {
                self.unexpected(map, &BRANCH_FIELDS, &format!("{place}, `next`"));
                let on = self.text(map, "on", &format!("{place}, `next`"))?;
                let mut cases = BTreeMap::new();
                match map.get("cases") {
                    Some(Value::Object(by_value)) if !by_value.is_empty() => {
                        for (value, to) in by_value {
                            match to {
                                Value::String(id) => {
                                    cases.insert(value.clone(), id.clone());
                                }
                                other => self.error(
                                    Rule::FieldType,
                                    format!(
                                        "{place}: case `{value}` leads to a YAML {}, not a node id",
                                        yaml_kind(other)
                                    ),
                                ),
                            }
                        }
                    }
                    _ => self.error(
                        Rule::FieldMissing,
                        format!("{place}: the branch on `{on}` needs `cases`, a mapping of value to node id"),
                    ),
                }
                let default = self.optional_text(map, "default", &format!("{place}, `next`"));
                Some(Next::Branch { on, cases, default })
            }
            other => {
                self.error(
                    Rule::FieldType,
                    format!(
                        "{place}: field `next` is a YAML {}, not a node id or a branch",
                        yaml_kind(other)
                    ),
                );
                Some(Next::End)
            }
        }
    }

    fn node(&mut self, index: usize, item: &Value) -> Option<(WorkflowNode, bool)> {
        let Value::Object(map) = item else {
            self.error(
                Rule::FieldType,
                format!("node {index} is a YAML {}, not a mapping", yaml_kind(item)),
            );
            return None;
        };
        let id = self.text(map, "id", &format!("node {index}"))?;
        let place = format!("node `{id}`");
        if id == END {
            self.error(
                Rule::NameInvalidCharacters,
                format!("{place}: `{END}` is reserved for the end of the workflow"),
            );
        } else if !id
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
        {
            self.error(
                Rule::NameInvalidCharacters,
                format!("{place}: an id may hold only letters, digits, hyphens and underscores"),
            );
        }
        self.unexpected(map, &NODE_FIELDS, &place);
        let title = self
            .text(map, "title", &place)
            .unwrap_or_else(|| id.clone());
        let brief = self.text(map, "brief", &place).unwrap_or_default();
        let tools = self.names(map, "tools", &place);
        let skills = self.names(map, "skills", &place).unwrap_or_default();
        let outputs = self
            .named(map.get("outputs"), "outputs", &place, "kind")
            .into_iter()
            .filter_map(|(name, m)| self.output(&id, name, &m))
            .collect();
        let next = self.next(&id, map.get("next"));
        let explicit = next.is_some();
        let node = WorkflowNode {
            id,
            title,
            brief,
            tools,
            skills,
            outputs,
            next: next.unwrap_or(Next::End),
        };
        Some((node, explicit))
    }

    /// Reads the whole frontmatter. The definition comes back when its name and nodes could
    /// be read, even with errors elsewhere; the caller decides whether it is usable.
    pub(super) fn workflow(
        &mut self,
        front: &Map<String, Value>,
        body: String,
        dir_name: Option<&str>,
    ) -> Option<WorkflowDef> {
        self.unexpected(front, &TOP_FIELDS, "workflow");
        let name = self.text(front, "name", "workflow");
        if let Some(name) = &name {
            let mut findings = Vec::new();
            check_name(name, dir_name, &mut findings);
            for f in findings {
                let severity = match (f.rule, self.strictness) {
                    (Rule::NameMismatch, Strictness::Lenient) => Severity::Warning,
                    _ => Severity::Error,
                };
                self.push(severity, f.rule, f.message);
            }
        }
        let description = self
            .text(front, "description", "workflow")
            .unwrap_or_default();
        let inputs = self
            .named(front.get("inputs"), "inputs", "workflow", "type")
            .into_iter()
            .filter_map(|(name, m)| self.input(name, &m))
            .collect();
        let mut nodes: Vec<(WorkflowNode, bool)> = match front.get("nodes") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| self.node(i, item))
                .collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(other) => {
                self.error(
                    Rule::FieldType,
                    format!(
                        "workflow: field `nodes` is a YAML {}, not a list",
                        yaml_kind(other)
                    ),
                );
                Vec::new()
            }
        };
        // An absent `next` goes on to the following node; after the last one the run ends.
        let ids: Vec<String> = nodes.iter().map(|(n, _)| n.id.clone()).collect();
        for (i, (node, explicit)) in nodes.iter_mut().enumerate() {
            if !*explicit && let Some(following) = ids.get(i + 1) {
                node.next = Next::Node(following.clone());
            }
        }
        Some(WorkflowDef {
            name: name?,
            description,
            inputs,
            nodes: nodes.into_iter().map(|(n, _)| n).collect(),
            body,
            path: self.path.to_path_buf(),
        })
    }
}

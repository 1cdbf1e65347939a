//! Splitting a `SKILL.md` into YAML frontmatter and Markdown body, and reading the frontmatter
//! into [`Frontmatter`] without giving up on values of the wrong type.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Serialize;
use yaml_rust2::{Yaml as Value, YamlLoader, yaml::Hash as Mapping};

use crate::diagnostic::Rule;
use crate::error::FrontmatterError;

/// The frontmatter fields of a skill (Agent Skills fields plus the client extensions `model`
/// and `disable-model-invocation`); every other key is kept in [`Frontmatter::extra`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Frontmatter {
    /// `name`.
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `license`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// `compatibility`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// `allowed-tools`, from a space-separated string or a YAML list.
    #[serde(rename = "allowed-tools", skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `disable-model-invocation`.
    #[serde(rename = "disable-model-invocation", skip_serializing_if = "is_false")]
    pub disable_model_invocation: bool,
    /// `metadata`, a map of strings (other scalars are turned into their text).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// Every other key, as JSON.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
    /// Every top-level key in file order, so strict validation can see which were present.
    #[serde(skip)]
    pub keys: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A problem found while reading values out of the YAML mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) rule: Rule,
    pub(crate) message: String,
}

impl Finding {
    pub(crate) fn new(rule: Rule, message: impl Into<String>) -> Self {
        Self {
            rule,
            message: message.into(),
        }
    }
}

/// The frontmatter text of a `SKILL.md` and where its body starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// The YAML between the delimiter lines.
    pub(crate) yaml: String,
    /// Byte offset of the first body byte in the file.
    pub(crate) body_offset: usize,
}

fn is_delimiter(line: &[u8]) -> bool {
    let trimmed = line
        .iter()
        .rposition(|b| !matches!(b, b'\n' | b'\r' | b' ' | b'\t'))
        .map_or(&line[..0], |end| &line[..=end]);
    trimmed == b"---"
}

fn not_text(bytes: &[u8]) -> Option<FrontmatterError> {
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Some(FrontmatterError::NotText {
            reason: format!("NUL byte at offset {at}"),
        });
    }
    std::str::from_utf8(bytes)
        .err()
        .map(|e| FrontmatterError::NotText {
            reason: format!("invalid UTF-8 at offset {}", e.valid_up_to()),
        })
}

/// Reads the frontmatter from the start of `reader`, line by line, stopping at the closing
/// delimiter so that a large body is never read at Level 1.
pub(crate) fn read_head(mut reader: impl BufRead, limit: usize) -> Result<Head, HeadError> {
    let mut line = Vec::new();
    let mut consumed = reader.read_until(b'\n', &mut line).map_err(HeadError::Io)?;
    let first = line
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(&line);
    if !is_delimiter(first) {
        return Err(HeadError::Parse(
            not_text(first).unwrap_or(FrontmatterError::Missing),
        ));
    }
    let mut yaml = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(HeadError::Io)?;
        if n == 0 {
            return Err(HeadError::Parse(
                not_text(&yaml).unwrap_or(FrontmatterError::Unterminated),
            ));
        }
        consumed += n;
        if is_delimiter(&line) {
            break;
        }
        yaml.extend_from_slice(&line);
        if yaml.len() > limit {
            return Err(HeadError::Parse(
                not_text(&yaml).unwrap_or(FrontmatterError::TooLarge { limit }),
            ));
        }
    }
    if let Some(err) = not_text(&yaml) {
        return Err(HeadError::Parse(err));
    }
    let yaml = String::from_utf8(yaml).map_err(|e| {
        HeadError::Parse(FrontmatterError::NotText {
            reason: format!("invalid UTF-8 at offset {}", e.utf8_error().valid_up_to()),
        })
    })?;
    Ok(Head {
        yaml,
        body_offset: consumed,
    })
}

/// Reading the head failed: on the disk, or in the text.
#[derive(Debug)]
pub(crate) enum HeadError {
    Io(std::io::Error),
    Parse(FrontmatterError),
}

/// Splits a whole `SKILL.md` text into its parsed frontmatter and its body (CRLF turned into LF).
///
/// ```
/// let text = "---\r\nname: demo\r\ndescription: |-\r\n  Two\r\n  lines\r\n---\r\n# Demo\r\n";
/// let (fm, _findings, body) = ba_skills::parse_document(text).unwrap();
/// assert_eq!(fm.description.as_deref(), Some("Two\nlines"));
/// assert_eq!(body, "# Demo\n");
/// ```
pub fn parse_document(text: &str) -> Result<(Frontmatter, Vec<String>, String), FrontmatterError> {
    let head = match read_head(text.as_bytes(), usize::MAX) {
        Ok(head) => head,
        Err(HeadError::Parse(err)) => return Err(err),
        Err(HeadError::Io(err)) => {
            return Err(FrontmatterError::NotText {
                reason: err.to_string(),
            });
        }
    };
    let mapping = parse_yaml(&head.yaml)?;
    let (fm, findings) = from_mapping(&mapping);
    let body = body_text(text.get(head.body_offset..).unwrap_or(""));
    Ok((fm, findings.into_iter().map(|f| f.message).collect(), body))
}

/// The body as the model should see it: LF line ends.
pub(crate) fn body_text(raw: &str) -> String {
    if raw.contains('\r') {
        raw.replace("\r\n", "\n")
    } else {
        raw.to_owned()
    }
}

/// Parses the YAML text of a frontmatter into a mapping; an empty frontmatter is an empty
/// mapping. The parser is pure safe Rust, leaves aliases unexpanded (no billion-laughs) and
/// caps flow nesting, so hostile frontmatter costs at most its (already bounded) size.
pub(crate) fn parse_yaml(yaml: &str) -> Result<Mapping, FrontmatterError> {
    let mut docs = YamlLoader::load_from_str(yaml).map_err(|e| FrontmatterError::InvalidYaml {
        // The YAML starts on line 2 of the file, after the opening delimiter.
        line: Some(e.marker().line() + 1),
        message: e.info().to_owned(),
    })?;
    let value = if docs.is_empty() {
        Value::Null
    } else {
        docs.swap_remove(0)
    };
    match value {
        Value::Hash(m) => Ok(m),
        Value::Null => Ok(Mapping::new()),
        other => Err(FrontmatterError::NotMapping {
            found: kind(&other),
        }),
    }
}

/// Reads a frontmatter that strict YAML rejects as plain `key: value` lines, the way many
/// hand-written skills mean it (`description: Use when: the user asks…` has an unquoted `: `).
/// Only flat frontmatters qualify: every line a `key: value` at column 0 with a plain value, or
/// blank, or a comment. Anything structured returns `None` and the YAML error stands.
pub(crate) fn plain_mapping(yaml: &str) -> Option<Mapping> {
    let mut map = Mapping::new();
    for line in yaml.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once(':')?;
        let value = value.trim();
        let plain_key = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let structured = value.is_empty()
            || value.starts_with(['"', '\'', '[', '{', '|', '>', '&', '*', '!', '-']);
        if !plain_key || structured {
            return None;
        }
        map.insert(
            Value::String(key.to_owned()),
            Value::String(value.to_owned()),
        );
    }
    Some(map)
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Real(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Hash(_) => "mapping",
        Value::Alias(_) => "alias",
        Value::BadValue => "bad value",
    }
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) | Value::Real(s) => Some(s.clone()),
        Value::Boolean(b) => Some(b.to_string()),
        Value::Integer(n) => Some(n.to_string()),
        _ => None,
    }
}

fn key_text(key: &Value) -> String {
    scalar_text(key).unwrap_or_else(|| match key {
        Value::Null => "null".to_owned(),
        other => to_json(other).to_string(),
    })
}

/// The value as JSON: numbers as numbers (a real that JSON cannot hold, such as `.inf`, as its
/// text), mappings with their keys as text; an alias or a bad value as `null`.
pub(crate) fn to_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::Null | Value::Alias(_) | Value::BadValue => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(n) => J::from(*n),
        Value::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(|| J::String(text.clone()), J::Number),
        Value::String(s) => J::String(s.clone()),
        Value::Array(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Hash(map) => J::Object(map.iter().map(|(k, v)| (key_text(k), to_json(v))).collect()),
    }
}

/// Fields the Agent Skills specification defines.
pub const SPEC_FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// Fields this crate reads beyond the specification (client extensions).
pub const EXTENSION_FIELDS: [&str; 2] = ["model", "disable-model-invocation"];

/// Reads the known fields out of the mapping. Values of the wrong type are converted when that
/// loses nothing (a number `name` becomes its text) and reported either way.
pub(crate) fn from_mapping(mapping: &Mapping) -> (Frontmatter, Vec<Finding>) {
    let mut fm = Frontmatter::default();
    let mut findings = Vec::new();
    for (key, value) in mapping {
        let key = key_text(key);
        fm.keys.push(key.clone());
        match key.as_str() {
            "name" => fm.name = string_field(&key, value, &mut findings),
            "description" => fm.description = string_field(&key, value, &mut findings),
            "license" => fm.license = string_field(&key, value, &mut findings),
            "compatibility" => fm.compatibility = string_field(&key, value, &mut findings),
            "model" => fm.model = string_field(&key, value, &mut findings),
            "allowed-tools" => fm.allowed_tools = allowed_tools(value, &mut findings),
            "disable-model-invocation" => {
                fm.disable_model_invocation = bool_field(&key, value, &mut findings);
            }
            "metadata" => fm.metadata = metadata(value, &mut findings),
            _ => {
                fm.extra.insert(key, to_json(value));
            }
        }
    }
    (fm, findings)
}

fn string_field(key: &str, value: &Value, findings: &mut Vec<Finding>) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        Value::Boolean(_) | Value::Integer(_) | Value::Real(_) => {
            findings.push(Finding::new(
                Rule::FieldType,
                format!("field `{key}` is a YAML {}, not a string", kind(value)),
            ));
            scalar_text(value)
        }
        _ => {
            findings.push(Finding::new(
                Rule::FieldType,
                format!(
                    "field `{key}` is a YAML {}, not a string; it is ignored",
                    kind(value)
                ),
            ));
            None
        }
    }
}

fn bool_field(key: &str, value: &Value, findings: &mut Vec<Finding>) -> bool {
    match value {
        Value::Boolean(b) => *b,
        Value::Null => false,
        Value::String(s) if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") => {
            findings.push(Finding::new(
                Rule::FieldType,
                format!("field `{key}` is the string \"{s}\", not a boolean"),
            ));
            s.eq_ignore_ascii_case("true")
        }
        _ => {
            findings.push(Finding::new(
                Rule::FieldType,
                format!(
                    "field `{key}` is a YAML {}, not a boolean; false is used",
                    kind(value)
                ),
            ));
            false
        }
    }
}

fn allowed_tools(value: &Value, findings: &mut Vec<Finding>) -> Option<Vec<String>> {
    match value {
        Value::String(s) => Some(split_tools(s)),
        Value::Null => None,
        Value::Array(items) => {
            let mut tools = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) if !s.trim().is_empty() => tools.push(s.trim().to_owned()),
                    _ => findings.push(Finding::new(
                        Rule::FieldType,
                        format!(
                            "item {i} of `allowed-tools` is a YAML {}, not a tool name; it is ignored",
                            kind(item)
                        ),
                    )),
                }
            }
            Some(tools)
        }
        _ => {
            findings.push(Finding::new(
                Rule::FieldType,
                format!(
                    "field `allowed-tools` is a YAML {}, not a string or a list of strings; it is ignored",
                    kind(value)
                ),
            ));
            None
        }
    }
}

/// Splits a space-separated tool list. Spaces inside parentheses belong to the tool pattern
/// (`Bash(git add:*)`), and commas are accepted as separators because real skills use them.
pub fn split_tools(text: &str) -> Vec<String> {
    let mut tools = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            c if depth == 0 && (c.is_whitespace() || c == ',') => {
                if !current.is_empty() {
                    tools.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        tools.push(current);
    }
    tools
}

fn metadata(value: &Value, findings: &mut Vec<Finding>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    match value {
        Value::Hash(map) => {
            for (k, v) in map {
                let key = key_text(k);
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => {
                        findings.push(Finding::new(
                            Rule::MetadataNotString,
                            format!("metadata `{key}` is a YAML {}, not a string", kind(other)),
                        ));
                        scalar_text(other).unwrap_or_else(|| to_json(other).to_string())
                    }
                };
                out.insert(key, text);
            }
        }
        Value::Null => {}
        other => findings.push(Finding::new(
            Rule::FieldType,
            format!(
                "field `metadata` is a YAML {}, not a mapping; it is ignored",
                kind(other)
            ),
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Frontmatter, Vec<Finding>, String) {
        let head = match read_head(text.as_bytes(), 1 << 16) {
            Ok(h) => h,
            Err(HeadError::Parse(e)) => panic!("{e}"),
            Err(HeadError::Io(e)) => panic!("{e}"),
        };
        let map = parse_yaml(&head.yaml).unwrap();
        let (fm, findings) = from_mapping(&map);
        (fm, findings, body_text(&text[head.body_offset..]))
    }

    fn head_err(text: &[u8]) -> FrontmatterError {
        match read_head(text, 1 << 16) {
            Err(HeadError::Parse(e)) => e,
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn crlf_and_block_scalar() {
        let (fm, findings, body) = parse(
            "---\r\nname: demo\r\ndescription: |-\r\n  First line.\r\n  Second line.\r\nlicense: MIT\r\n---\r\n\r\n# Body\r\ntext\r\n",
        );
        assert!(findings.is_empty());
        assert_eq!(fm.name.as_deref(), Some("demo"));
        assert_eq!(fm.description.as_deref(), Some("First line.\nSecond line."));
        assert_eq!(fm.license.as_deref(), Some("MIT"));
        assert_eq!(body, "\n# Body\ntext\n");
    }

    #[test]
    fn quoted_strings_with_escapes() {
        let (fm, _, _) = parse(
            "---\nname: \"demo\"\ndescription: \"Says \\\"hi\\\"\\tand\\u00e9 \\\\ done\"\nlicense: 'it''s MIT'\n---\n",
        );
        assert_eq!(fm.description.as_deref(), Some("Says \"hi\"\tandé \\ done"));
        assert_eq!(fm.license.as_deref(), Some("it's MIT"));
    }

    #[test]
    fn allowed_tools_string_or_list() {
        let (a, _, _) =
            parse("---\nname: a\ndescription: d\nallowed-tools: Bash(git add:*) Read, Grep\n---\n");
        assert_eq!(
            a.allowed_tools.unwrap(),
            vec!["Bash(git add:*)", "Read", "Grep"]
        );
        let (b, findings, _) = parse(
            "---\nname: a\ndescription: d\nallowed-tools:\n  - Read\n  - 3\n  - Write\n---\n",
        );
        assert_eq!(b.allowed_tools.unwrap(), vec!["Read", "Write"]);
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule, Rule::FieldType);
    }

    #[test]
    fn unknown_keys_are_kept_and_extensions_read() {
        let (fm, findings, _) = parse(
            "---\nname: a\ndescription: d\nmodel: claude-x\ndisable-model-invocation: true\nargument-hint: \"[file]\"\nhooks: {pre: [1, 2]}\nmetadata:\n  author: me\n  version: 1.0\n---\n",
        );
        assert_eq!(fm.model.as_deref(), Some("claude-x"));
        assert!(fm.disable_model_invocation);
        assert_eq!(fm.extra["argument-hint"], serde_json::json!("[file]"));
        assert_eq!(fm.extra["hooks"], serde_json::json!({"pre": [1, 2]}));
        assert_eq!(fm.metadata["version"], "1.0");
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].rule, Rule::MetadataNotString);
        assert_eq!(
            fm.keys,
            [
                "name",
                "description",
                "model",
                "disable-model-invocation",
                "argument-hint",
                "hooks",
                "metadata"
            ]
        );
    }

    #[test]
    fn bom_and_empty_frontmatter() {
        let (fm, findings, body) = parse("\u{feff}---\n---\nbody");
        assert_eq!(fm, Frontmatter::default());
        assert!(findings.is_empty());
        assert_eq!(body, "body");
    }

    #[test]
    fn bad_heads_are_named() {
        assert_eq!(head_err(b"# no frontmatter\n"), FrontmatterError::Missing);
        assert_eq!(head_err(b""), FrontmatterError::Missing);
        assert_eq!(head_err(b"---\nname: a\n"), FrontmatterError::Unterminated);
        assert!(matches!(
            head_err(b"\x89PNG\r\n\x1a\n\0\0\0"),
            FrontmatterError::NotText { .. }
        ));
        assert!(matches!(
            head_err(b"---\nname: \xff\xfe\n---\n"),
            FrontmatterError::NotText { .. }
        ));
        let long = format!("---\n{}", "a: b\n".repeat(20_000));
        assert_eq!(
            head_err(long.as_bytes()),
            FrontmatterError::TooLarge { limit: 1 << 16 }
        );
    }

    #[test]
    fn invalid_yaml_names_the_file_line() {
        let err = parse_yaml("name: a\ndescription: [unclosed\n").unwrap_err();
        match err {
            FrontmatterError::InvalidYaml { line, message } => {
                assert!(line.is_some_and(|l| l >= 3), "{line:?}");
                assert!(!message.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_yaml("- a\n- b\n").unwrap_err(),
            FrontmatterError::NotMapping { found: "sequence" }
        );
    }

    #[test]
    fn plain_lines_when_yaml_refuses() {
        let yaml = "name: demo\ndescription: Use when: the user asks for a demo\n# note\n";
        assert!(parse_yaml(yaml).is_err());
        let map = plain_mapping(yaml).unwrap();
        let (fm, findings) = from_mapping(&map);
        assert!(findings.is_empty());
        assert_eq!(
            fm.description.as_deref(),
            Some("Use when: the user asks for a demo")
        );
        assert!(plain_mapping("name: a\ndescription: [oops\n").is_none());
        assert!(plain_mapping("name: a\n  indented: b\n").is_none());
        assert!(plain_mapping("name: a\nlist:\n- x\n").is_none());
    }

    #[test]
    fn split_tools_keeps_parenthesised_spaces() {
        assert_eq!(
            split_tools("  Bash(git log:*)  Read,Write  "),
            vec!["Bash(git log:*)", "Read", "Write"]
        );
        assert!(split_tools("").is_empty());
    }
}

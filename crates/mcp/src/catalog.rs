//! From listed tools to offered ones: filters, schemas, names, and the table mapping model
//! names back to `(server, raw tool)`.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::config::McpServerConfig;
use crate::names::assign_model_names;
use crate::result::bounded;
use crate::schema::normalize_input_schema;
use crate::status::{McpToolInfo, SkippedTool};

/// Limits applied to each listed tool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolLimits {
    pub(crate) max_schema_bytes: usize,
    pub(crate) max_description_bytes: usize,
    pub(crate) max_tools: usize,
}

const MAX_RAW_NAME_BYTES: usize = 1024;

/// A tool a server offers, after its configuration's filters and the schema rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ListedTool {
    pub(crate) raw_name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: String,
    pub(crate) input_schema: Map<String, Value>,
    pub(crate) output_schema: Option<Value>,
    pub(crate) annotations: Option<Value>,
}

/// Sorts a server's listed tools (JSON, as sent) into offered and skipped ones.
pub(crate) fn read_tools(
    listed: &[Value],
    config: &McpServerConfig,
    limits: ToolLimits,
) -> (Vec<ListedTool>, Vec<SkippedTool>) {
    let mut offered = Vec::new();
    let mut skipped = Vec::new();
    let mut seen = HashSet::new();
    for (i, tool) in listed.iter().enumerate() {
        let name = match tool.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n,
            _ => {
                skipped.push(SkippedTool {
                    name: format!("#{}", i + 1),
                    reason: "it has no name".to_owned(),
                });
                continue;
            }
        };
        let mut skip = |reason: String| {
            skipped.push(SkippedTool {
                name: bounded(name, MAX_RAW_NAME_BYTES),
                reason,
            });
        };
        if name.len() > MAX_RAW_NAME_BYTES {
            skip(format!("its name is over {MAX_RAW_NAME_BYTES} bytes"));
            continue;
        }
        if !seen.insert(name) {
            skip("it is listed twice; the first one is offered".to_owned());
            continue;
        }
        if let Some(reason) = config.tool_filter_reason(name) {
            skip(reason.to_owned());
            continue;
        }
        let empty = Map::new();
        let schema = match tool.get("inputSchema") {
            Some(Value::Object(s)) => s,
            None | Some(Value::Null) => &empty,
            Some(_) => {
                skip("its input schema is not a JSON object".to_owned());
                continue;
            }
        };
        let input_schema = match normalize_input_schema(schema, limits.max_schema_bytes) {
            Ok(s) => s,
            Err(reason) => {
                skip(reason);
                continue;
            }
        };
        if offered.len() == limits.max_tools {
            skip(format!("the server lists over {} tools", limits.max_tools));
            continue;
        }
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let annotations = tool.get("annotations").filter(|a| a.is_object()).cloned();
        offered.push(ListedTool {
            raw_name: name.to_owned(),
            title: text(tool.get("title"))
                .or_else(|| text(annotations.as_ref().and_then(|a| a.get("title"))))
                .map(|t| bounded(&t, 256)),
            description: bounded(
                tool.get("description")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                limits.max_description_bytes,
            ),
            input_schema,
            output_schema: tool
                .get("outputSchema")
                .filter(|s| {
                    s.is_object()
                        && serde_json::to_string(s)
                            .map(|t| t.len())
                            .unwrap_or(usize::MAX)
                            <= limits.max_schema_bytes
                })
                .cloned(),
            annotations,
        });
    }
    (offered, skipped)
}

/// One server's contribution to the catalogue.
pub(crate) struct ServerTools<'a> {
    pub(crate) index: usize,
    pub(crate) name: &'a str,
    pub(crate) config: &'a McpServerConfig,
    pub(crate) tools: &'a [ListedTool],
}

/// Every offered tool with its model name, and the table back.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub(crate) tools: Vec<McpToolInfo>,
    /// Model name → (server index, raw name): the current names, then names given earlier
    /// that still point at a live tool (a tool renamed by a later collision stays callable).
    by_model: HashMap<String, (usize, String)>,
    /// Model names given earlier whose server left the catalogue (it failed or was shut
    /// down): a call of one is answered with why its server is gone, not "unknown tool".
    gone: HashMap<String, usize>,
}

impl Catalog {
    pub(crate) fn build(servers: &[ServerTools<'_>], previous: &Catalog) -> Catalog {
        let ids: Vec<(&str, &str)> = servers
            .iter()
            .flat_map(|s| s.tools.iter().map(move |t| (s.name, t.raw_name.as_str())))
            .collect();
        let names = assign_model_names(&ids);
        let mut names = names.into_iter();
        let mut catalog = Catalog::default();
        for s in servers {
            for t in s.tools {
                let model_name = names.next().unwrap_or_default();
                catalog
                    .by_model
                    .insert(model_name.clone(), (s.index, t.raw_name.clone()));
                catalog.tools.push(McpToolInfo {
                    raw_name: t.raw_name.clone(),
                    model_name,
                    server: s.name.to_owned(),
                    title: t.title.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema.clone(),
                    output_schema: t.output_schema.clone(),
                    annotations: t.annotations.clone(),
                    default_level: s.config.default_level,
                    permission: s.config.permission,
                    approval: s.config.approval,
                    timeout_ms: s.config.tool_timeout_ms,
                });
            }
        }
        let live: HashSet<(usize, &str)> = catalog
            .by_model
            .values()
            .map(|(i, raw)| (*i, raw.as_str()))
            .collect();
        let carried: Vec<(String, (usize, String))> = previous
            .by_model
            .iter()
            .filter(|(name, (i, raw))| {
                !catalog.by_model.contains_key(*name) && live.contains(&(*i, raw.as_str()))
            })
            .map(|(name, id)| (name.clone(), id.clone()))
            .collect();
        catalog.by_model.extend(carried);
        let offered: HashSet<usize> = servers.iter().map(|s| s.index).collect();
        let gone: Vec<(String, usize)> = previous
            .by_model
            .iter()
            .map(|(name, (i, _))| (name, *i))
            .chain(previous.gone.iter().map(|(name, i)| (name, *i)))
            .filter(|(name, i)| !catalog.by_model.contains_key(*name) && !offered.contains(i))
            .map(|(name, i)| (name.clone(), i))
            .collect();
        catalog.gone.extend(gone);
        catalog
    }

    /// The index of the server that offered `model_name` before it left the catalogue.
    pub(crate) fn gone_server(&self, model_name: &str) -> Option<usize> {
        self.gone.get(model_name).copied()
    }

    /// The server index and raw name of a model name.
    pub(crate) fn resolve(&self, model_name: &str) -> Option<&(usize, String)> {
        self.by_model.get(model_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMITS: ToolLimits = ToolLimits {
        max_schema_bytes: 4096,
        max_description_bytes: 16,
        max_tools: 3,
    };

    #[test]
    fn bad_tools_are_skipped_with_reasons_and_the_rest_offered() {
        let config = McpServerConfig::stdio("x", Vec::<String>::new()).with_disabled_tools(["off"]);
        let listed = vec![
            json!({"name": "ok", "description": "a long description indeed", "inputSchema": {}}),
            json!({"inputSchema": {}}),
            json!({"name": "", "inputSchema": {}}),
            json!({"name": "ok", "inputSchema": {}}),
            json!({"name": "off", "inputSchema": {}}),
            json!({"name": "str", "inputSchema": {"type": "string"}}),
            json!({"name": "bool", "inputSchema": true}),
            json!({"name": "noschema"}),
            json!({"name": "third", "inputSchema": {"type": "object"}}),
            json!({"name": "fourth", "inputSchema": {"type": "object"}}),
        ];
        let (offered, skipped) = read_tools(&listed, &config, LIMITS);
        let names: Vec<&str> = offered.iter().map(|t| t.raw_name.as_str()).collect();
        assert_eq!(names, ["ok", "noschema", "third"]);
        assert_eq!(offered[0].description, "a long descripti");
        assert_eq!(
            offered[1].input_schema,
            json!({"type": "object", "properties": {}})
                .as_object()
                .unwrap()
                .clone()
        );
        let reasons: Vec<String> = skipped
            .iter()
            .map(|s| format!("{}: {}", s.name, s.reason))
            .collect();
        assert_eq!(
            reasons,
            [
                "#2: it has no name",
                "#3: it has no name",
                "ok: it is listed twice; the first one is offered",
                "off: in `disabled_tools`",
                "str: its input schema's top-level type is \"string\"; the model APIs need \"object\"",
                "bool: its input schema is not a JSON object",
                "fourth: the server lists over 3 tools",
            ]
        );
    }

    #[test]
    fn old_names_stay_callable_after_a_collision_renames_them() {
        let config = McpServerConfig::stdio("x", Vec::<String>::new());
        let tool = |n: &str| ListedTool {
            raw_name: n.to_owned(),
            title: None,
            description: String::new(),
            input_schema: Map::new(),
            output_schema: None,
            annotations: None,
        };
        let a = [tool("a.b")];
        let first = Catalog::build(
            &[ServerTools {
                index: 0,
                name: "s",
                config: &config,
                tools: &a,
            }],
            &Catalog::default(),
        );
        assert_eq!(first.tools[0].model_name, "s__a_b");
        let b = [tool("a.b"), tool("a_b")];
        let second = Catalog::build(
            &[ServerTools {
                index: 0,
                name: "s",
                config: &config,
                tools: &b,
            }],
            &first,
        );
        assert_ne!(second.tools[0].model_name, "s__a_b");
        assert_eq!(second.resolve("s__a_b"), Some(&(0, "a.b".to_owned())));
        assert_eq!(
            second.resolve(&second.tools[1].model_name),
            Some(&(0, "a_b".to_owned()))
        );
    }
}

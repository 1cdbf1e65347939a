//! Claude Code plugin folders: `.claude-plugin/plugin.json`, `.mcp.json` and `skills/`.
//!
//! This module reads what a plugin brings: its name, its MCP servers (renamed `PLUGIN__SERVER`,
//! so their tools become `PLUGIN__SERVER__tool`) and the folders its skills live in. Loading the
//! skills is the skills crate's job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::config::McpServerConfig;
use crate::error::McpError;
use crate::mcp_json::{ConfigDiagnostic, McpJson, parse_mcp_json, read_bounded};

/// The variable Claude Code sets to the plugin's folder in its `.mcp.json`.
pub const PLUGIN_ROOT_VAR: &str = "CLAUDE_PLUGIN_ROOT";

/// What one plugin folder brings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Plugin {
    /// The plugin's name (`plugin.json`'s `name`, else the folder's name).
    pub name: String,
    /// Its version, when the manifest has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its description, when the manifest has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The folder.
    pub root: PathBuf,
    /// Its MCP servers, named `PLUGIN__SERVER`.
    pub servers: BTreeMap<String, McpServerConfig>,
    /// Folders holding its skills (`skills/` and the manifest's `skills` paths that exist).
    pub skill_roots: Vec<PathBuf>,
    /// What was skipped or odd.
    pub diagnostics: Vec<ConfigDiagnostic>,
}

/// Reads the plugin folder `dir`.
///
/// Fails when the folder does not exist or its manifest is unreadable or has no usable name;
/// a bad server entry is a diagnostic. `${CLAUDE_PLUGIN_ROOT}` in `.mcp.json` is the folder,
/// other variables come from the process environment.
pub fn load_plugin(dir: &Path) -> Result<Plugin, McpError> {
    load_plugin_with(dir, |k| std::env::var(k).ok())
}

/// [`load_plugin`] with variables read through `lookup`.
pub fn load_plugin_with(
    dir: &Path,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Plugin, McpError> {
    if !dir.is_dir() {
        return Err(McpError::Config {
            path: Some(dir.to_path_buf()),
            server: None,
            message: "not a plugin folder (no such directory)".to_owned(),
        });
    }
    let mut diagnostics = Vec::new();
    let manifest_path = dir.join(".claude-plugin").join("plugin.json");
    let manifest = if manifest_path.is_file() {
        let text = read_bounded(&manifest_path)?;
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(McpError::Config {
                    path: Some(manifest_path),
                    server: None,
                    message: "the manifest is not a JSON object".to_owned(),
                });
            }
            Err(e) => {
                return Err(McpError::Config {
                    path: Some(manifest_path),
                    server: None,
                    message: format!("not valid JSON: {e}"),
                });
            }
        }
    } else {
        diagnostics.push(ConfigDiagnostic::new(
            None,
            "no .claude-plugin/plugin.json; the folder's name is the plugin's name",
        ));
        serde_json::Map::new()
    };
    let text_field = |key: &str| manifest.get(key).and_then(Value::as_str).map(str::to_owned);
    let name = match manifest.get("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_owned(),
        Some(_) => {
            return Err(McpError::Config {
                path: Some(manifest_path),
                server: None,
                message: "`name` is not a non-empty string".to_owned(),
            });
        }
        None => dir
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| McpError::Config {
                path: Some(dir.to_path_buf()),
                server: None,
                message: "the plugin has no name and its folder's name is not UTF-8".to_owned(),
            })?,
    };

    let root_text = dir.to_string_lossy().into_owned();
    let vars = |k: &str| {
        if k == PLUGIN_ROOT_VAR {
            Some(root_text.clone())
        } else {
            lookup(k)
        }
    };
    let mut found = McpJson::default();
    let mcp_path = dir.join(".mcp.json");
    if mcp_path.is_file() {
        let text = read_bounded(&mcp_path)?;
        found = parse_mcp_json(&text, vars).map_err(|e| e.in_file(&mcp_path))?;
    }
    // The manifest may name servers too: inline, or as a file relative to the folder.
    match manifest.get("mcpServers") {
        None => {}
        Some(Value::Object(servers)) => {
            let text = serde_json::json!({ "mcpServers": servers }).to_string();
            merge(&mut found, parse_mcp_json(&text, vars)?);
        }
        Some(Value::String(rel)) => match confined(dir, rel) {
            Some(path) => {
                let text = read_bounded(&path)?;
                merge(
                    &mut found,
                    parse_mcp_json(&text, vars).map_err(|e| e.in_file(&path))?,
                );
            }
            None => diagnostics.push(ConfigDiagnostic::new(
                None,
                format!("ignored `mcpServers: {rel}`: not a path inside the plugin"),
            )),
        },
        Some(_) => diagnostics.push(ConfigDiagnostic::new(
            None,
            "ignored `mcpServers` in the manifest: neither an object nor a path",
        )),
    }
    let servers = found
        .servers
        .into_iter()
        .map(|(server, config)| (format!("{name}__{server}"), config))
        .collect();
    diagnostics.extend(found.diagnostics.into_iter().map(|mut d| {
        d.server = d.server.map(|s| format!("{name}__{s}"));
        d
    }));

    let mut skill_roots = Vec::new();
    let default_skills = dir.join("skills");
    if default_skills.is_dir() {
        skill_roots.push(default_skills);
    }
    let extra: Vec<&str> = match manifest.get("skills") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    for rel in extra {
        match confined(dir, rel) {
            Some(path) if path.is_dir() => {
                if !skill_roots.contains(&path) {
                    skill_roots.push(path);
                }
            }
            _ => diagnostics.push(ConfigDiagnostic::new(
                None,
                format!("ignored the skills path `{rel}`: not a folder inside the plugin"),
            )),
        }
    }

    Ok(Plugin {
        name,
        version: text_field("version"),
        description: text_field("description"),
        root: dir.to_path_buf(),
        servers,
        skill_roots,
        diagnostics,
    })
}

fn merge(into: &mut McpJson, more: McpJson) {
    for (name, config) in more.servers {
        match into.servers.entry(name) {
            std::collections::btree_map::Entry::Occupied(e) => {
                into.diagnostics.push(ConfigDiagnostic::new(
                    Some(e.key()),
                    "defined in both .mcp.json and the manifest; the .mcp.json entry is used",
                ));
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(config);
            }
        }
    }
    into.diagnostics.extend(more.diagnostics);
}

/// `dir/rel` when `rel` is relative and has no `..`: the manifest may not point outside.
fn confined(dir: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    let ok = rel.components().all(|c| {
        matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    ok.then(|| dir.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpTransport;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn reads_a_claude_code_plugin() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("sales");
        write(
            &dir.join(".claude-plugin/plugin.json"),
            r#"{"name": "sales", "version": "1.2.0", "description": "Pipeline tools",
                "skills": ["./extra", "../outside"]}"#,
        );
        write(
            &dir.join(".mcp.json"),
            r#"{"mcpServers": {
                "crm": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/crm", "args": ["--db", "${DB:-x}"]},
                "web": {"type": "http", "url": "https://mcp.example.com/mcp"}
            }}"#,
        );
        write(
            &dir.join("skills/forecast/SKILL.md"),
            "---\nname: forecast\n---\n",
        );
        write(&dir.join("extra/x/SKILL.md"), "---\nname: x\n---\n");
        let plugin = load_plugin_with(&dir, |_| None).unwrap();
        assert_eq!(plugin.name, "sales");
        assert_eq!(plugin.version.as_deref(), Some("1.2.0"));
        assert_eq!(
            plugin.servers.keys().collect::<Vec<_>>(),
            ["sales__crm", "sales__web"]
        );
        let McpTransport::Stdio(crm) = &plugin.servers["sales__crm"].transport else {
            panic!("stdio expected")
        };
        assert_eq!(crm.command, format!("{}/bin/crm", dir.display()));
        assert_eq!(crm.args, ["--db", "x"]);
        assert_eq!(
            plugin.skill_roots,
            [dir.join("skills"), dir.join("./extra")]
        );
        assert_eq!(plugin.diagnostics.len(), 1, "{:?}", plugin.diagnostics);
        assert!(plugin.diagnostics[0].message.contains("../outside"));
    }

    #[test]
    fn a_folder_without_manifest_takes_its_name_and_a_bad_one_fails() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bare");
        write(
            &dir.join(".mcp.json"),
            r#"{"mcpServers": {"s": {"command": "x"}}}"#,
        );
        let plugin = load_plugin_with(&dir, |_| None).unwrap();
        assert_eq!(plugin.name, "bare");
        assert!(plugin.servers.contains_key("bare__s"));
        assert!(plugin.skill_roots.is_empty());

        write(&dir.join(".claude-plugin/plugin.json"), r#"{"name": ""}"#);
        assert!(load_plugin_with(&dir, |_| None).is_err());
        assert!(load_plugin_with(&tmp.path().join("missing"), |_| None).is_err());
    }

    #[test]
    fn manifest_servers_merge_with_mcp_json() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        write(
            &dir.join(".claude-plugin/plugin.json"),
            r#"{"name": "p", "mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}"#,
        );
        write(
            &dir.join(".mcp.json"),
            r#"{"mcpServers": {"a": {"command": "z"}}}"#,
        );
        let plugin = load_plugin_with(&dir, |_| None).unwrap();
        assert_eq!(plugin.servers.len(), 2);
        let McpTransport::Stdio(a) = &plugin.servers["p__a"].transport else {
            panic!("stdio expected")
        };
        assert_eq!(a.command, "z");
        assert_eq!(plugin.diagnostics.len(), 1);
    }
}

//! Claude Code's `.mcp.json`: `{"mcpServers": {NAME: {type, command, args, env, url, headers}}}`.
//!
//! Read leniently, like every loader here: a broken entry becomes a diagnostic and the other
//! servers load. `${VAR}` and `${VAR:-default}` are expanded in `command`, `args`, `env`, `url`
//! and `headers`; an unset `${VAR}` stays as written (and is reported).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::{McpServerConfig, TransportKind, transport_kind};
use crate::error::McpError;
use crate::expand::expand_vars;

/// The largest `.mcp.json` read (1 MiB): a configuration, not a data file.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The servers of one `.mcp.json`, and what was wrong with the rest.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct McpJson {
    /// The servers that could be read, by name.
    pub servers: BTreeMap<String, McpServerConfig>,
    /// Entries skipped or read with a warning.
    pub diagnostics: Vec<ConfigDiagnostic>,
}

/// A problem with one entry of a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConfigDiagnostic {
    /// The server, when the problem is one server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// What is wrong, and what was done about it.
    pub message: String,
}

impl ConfigDiagnostic {
    pub(crate) fn new(server: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            server: server.map(str::to_owned),
            message: message.into(),
        }
    }
}

/// Reads a `.mcp.json` file, expanding variables from the process environment.
///
/// Fails only when the file cannot be read or is not a JSON object; bad entries are diagnostics.
pub fn read_mcp_json(path: &Path) -> Result<McpJson, McpError> {
    let text = read_bounded(path)?;
    parse_mcp_json(&text, |k| std::env::var(k).ok()).map_err(|e| e.in_file(path))
}

pub(crate) fn read_bounded(path: &Path) -> Result<String, McpError> {
    let io = |source| McpError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(McpError::Config {
            path: Some(path.to_path_buf()),
            server: None,
            message: format!(
                "the file is {} bytes, over the {MAX_FILE_BYTES}-byte limit",
                meta.len()
            ),
        });
    }
    std::fs::read_to_string(path).map_err(io)
}

/// Parses the text of a `.mcp.json`, reading variables through `lookup`.
pub fn parse_mcp_json(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<McpJson, McpError> {
    let root: Value =
        serde_json::from_str(text).map_err(|e| McpError::config(format!("not valid JSON: {e}")))?;
    let Value::Object(root) = root else {
        return Err(McpError::config("the top level is not a JSON object"));
    };
    let mut out = McpJson::default();
    let servers = match root.get("mcpServers") {
        Some(Value::Object(servers)) => servers,
        Some(_) => return Err(McpError::config("`mcpServers` is not an object")),
        None => {
            out.diagnostics.push(ConfigDiagnostic::new(
                None,
                "no `mcpServers` object; no servers",
            ));
            return Ok(out);
        }
    };
    for (name, entry) in servers {
        match parse_entry(name, entry, &lookup, &mut out.diagnostics) {
            Ok(config) => {
                out.servers.insert(name.clone(), config);
            }
            Err(message) => out.diagnostics.push(ConfigDiagnostic::new(
                Some(name),
                format!("skipped: {message}"),
            )),
        }
    }
    Ok(out)
}

const KNOWN_KEYS: [&str; 6] = ["type", "command", "args", "env", "url", "headers"];

fn parse_entry(
    name: &str,
    entry: &Value,
    lookup: &impl Fn(&str) -> Option<String>,
    diagnostics: &mut Vec<ConfigDiagnostic>,
) -> Result<McpServerConfig, String> {
    if name.is_empty() {
        return Err("the server name is empty".to_owned());
    }
    let Value::Object(entry) = entry else {
        return Err("the entry is not an object".to_owned());
    };
    for key in entry.keys().filter(|k| !KNOWN_KEYS.contains(&k.as_str())) {
        diagnostics.push(ConfigDiagnostic::new(
            Some(name),
            format!("ignored the unknown key `{key}`"),
        ));
    }
    let kind = optional_str(entry, "type")?;
    let command = optional_str(entry, "command")?;
    let url = optional_str(entry, "url")?;
    let mut expand = |field: &str, s: &str| {
        let e = expand_vars(s, lookup);
        for var in e.unset {
            diagnostics.push(ConfigDiagnostic::new(
                Some(name),
                format!("`${{{var}}}` in `{field}` is not set; left as written"),
            ));
        }
        e.value
    };
    let config = match transport_kind(kind, command.is_some(), url.is_some())? {
        TransportKind::Stdio => {
            let command = command.ok_or("a stdio server needs `command`")?;
            let mut config =
                McpServerConfig::stdio(expand("command", command), Vec::<String>::new());
            if let crate::config::McpTransport::Stdio(s) = &mut config.transport {
                for arg in string_list(entry, "args")? {
                    s.args.push(expand("args", arg));
                }
                for (k, v) in string_map(entry, "env")? {
                    s.env.insert(k.clone(), expand("env", v));
                }
            }
            config
        }
        TransportKind::Http => {
            let url = url.ok_or("an http server needs `url`")?;
            let mut config = McpServerConfig::http(expand("url", url));
            for (k, v) in string_map(entry, "headers")? {
                let value = expand("headers", v);
                config = config.with_header(k.clone(), value);
            }
            config
        }
    };
    config.validate(name).map_err(|e| match e {
        McpError::Config { message, .. } => message,
        other => other.to_string(),
    })?;
    Ok(config)
}

fn optional_str<'a>(entry: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("`{key}` is not a string")),
    }
}

fn string_list<'a>(entry: &'a Map<String, Value>, key: &str) -> Result<Vec<&'a str>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| format!("`{key}` holds a non-string"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` is not a list")),
    }
}

fn string_map<'a>(
    entry: &'a Map<String, Value>,
    key: &str,
) -> Result<Vec<(&'a String, &'a str)>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|s| (k, s))
                    .ok_or_else(|| format!("`{key}.{k}` is not a string"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` is not an object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpTransport;

    fn env(k: &str) -> Option<String> {
        match k {
            "TOKEN" => Some("t0k".into()),
            "DATA" => Some("/data".into()),
            _ => None,
        }
    }

    #[test]
    fn reads_both_transports_with_expansion() {
        let text = r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "fs", "${DATA}", "$DATA"],
                      "env": {"KEY": "${TOKEN}", "MODE": "${MODE:-ro}"}},
            "remote": {"type": "http", "url": "https://${HOST:-api.example.com}/mcp",
                       "headers": {"Authorization": "Bearer ${TOKEN}"}}
        }}"#;
        let cfg = parse_mcp_json(text, env).unwrap();
        assert!(cfg.diagnostics.is_empty(), "{:?}", cfg.diagnostics);
        let McpTransport::Stdio(files) = &cfg.servers["files"].transport else {
            panic!("stdio expected")
        };
        assert_eq!(files.args, ["-y", "fs", "/data", "$DATA"]);
        assert_eq!(files.env["KEY"], "t0k");
        assert_eq!(files.env["MODE"], "ro");
        let McpTransport::Http(remote) = &cfg.servers["remote"].transport else {
            panic!("http expected")
        };
        assert_eq!(remote.url, "https://api.example.com/mcp");
        assert_eq!(remote.headers["Authorization"], "Bearer t0k");
    }

    #[test]
    fn bad_entries_become_diagnostics_and_the_rest_load() {
        let text = r#"{"mcpServers": {
            "old": {"type": "sse", "url": "https://x/sse"},
            "broken": {"command": 7},
            "neither": {},
            "odd": {"command": "srv", "args": ["${UNSET}"], "timeout": 5},
            "ok": {"command": "srv"}
        }}"#;
        let cfg = parse_mcp_json(text, env).unwrap();
        assert_eq!(cfg.servers.keys().collect::<Vec<_>>(), ["odd", "ok"]);
        let text: Vec<String> = cfg
            .diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.server.as_deref().unwrap_or("-"), d.message))
            .collect();
        let joined = text.join("\n");
        assert!(joined.contains("old: skipped: `type: sse`"), "{joined}");
        assert!(
            joined.contains("broken: skipped: `command` is not a string"),
            "{joined}"
        );
        assert!(
            joined.contains("neither: skipped: neither `command`"),
            "{joined}"
        );
        assert!(
            joined.contains("odd: ignored the unknown key `timeout`"),
            "{joined}"
        );
        assert!(
            joined.contains("odd: `${UNSET}` in `args` is not set"),
            "{joined}"
        );
    }

    #[test]
    fn file_level_errors() {
        assert!(parse_mcp_json("[]", env).is_err());
        assert!(parse_mcp_json("{", env).is_err());
        assert!(parse_mcp_json(r#"{"mcpServers": 1}"#, env).is_err());
        let empty = parse_mcp_json("{}", env).unwrap();
        assert!(empty.servers.is_empty());
        assert_eq!(empty.diagnostics.len(), 1);
    }
}

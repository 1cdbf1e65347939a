//! The tool-list cache that lets a lazy server offer its tools before it starts.
//!
//! One JSON file a server in the folder the caller gives ([`crate::McpOptions::with_tool_cache`]):
//! `NAME-FINGERPRINT.json` holding `{"version": 1, "server": NAME, "tools": [...]}`, the tools as
//! the server listed them (filters and schema rules are applied when read, so a configuration
//! change applies at once). The fingerprint is a hash of how the server is reached (command,
//! arguments, environment, folder, URL, headers): change any of them and the old list is not
//! used. Files are written whole to a temporary name and renamed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::McpServerConfig;
use crate::names::{fnv1a64, sanitize};

const VERSION: u32 = 1;
const MAX_CACHE_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    server: String,
    tools: Vec<Value>,
}

/// The cache file of `name` reached as `config` says.
pub(crate) fn cache_path(dir: &Path, name: &str, config: &McpServerConfig) -> PathBuf {
    let mut reach = serde_json::to_value(config).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut reach {
        // Only how the server is reached: filters and timeouts do not change its list.
        m.retain(|k, _| {
            matches!(
                k.as_str(),
                "type" | "command" | "args" | "env" | "cwd" | "url" | "headers" | "env_headers"
            )
        });
    }
    let fingerprint = fnv1a64(&[name.as_bytes(), reach.to_string().as_bytes()]);
    let mut stem = sanitize(name);
    stem.truncate(64);
    dir.join(format!("{stem}-{fingerprint:016x}.json"))
}

/// The cached tool list, when there is a readable one.
pub(crate) fn read_cache(path: &Path, name: &str) -> Option<Vec<Value>> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_CACHE_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str::<CacheFile>(&text) {
        Ok(file) if file.version == VERSION && file.server == name => Some(file.tools),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(path = %path.display(), "ignoring an unreadable MCP tool cache: {e}");
            None
        }
    }
}

/// Writes the list; a failure is logged, never fatal.
pub(crate) fn write_cache(path: &Path, name: &str, tools: &[Value]) {
    let file = CacheFile {
        version: VERSION,
        server: name.to_owned(),
        tools: tools.to_vec(),
    };
    let result = (|| -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
        let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), "cannot write the MCP tool cache: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_and_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let config = McpServerConfig::stdio("srv", ["--a"]);
        let path = cache_path(dir.path(), "my.srv", &config);
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("my_srv-")
        );
        assert_eq!(read_cache(&path, "my.srv"), None);
        write_cache(&path, "my.srv", &[json!({"name": "t"})]);
        assert_eq!(
            read_cache(&path, "my.srv"),
            Some(vec![json!({"name": "t"})])
        );
        assert_eq!(read_cache(&path, "other"), None);
        // Filters do not change the file; arguments do.
        assert_eq!(
            cache_path(
                dir.path(),
                "my.srv",
                &config.clone().with_disabled_tools(["t"])
            ),
            path
        );
        assert_ne!(
            cache_path(
                dir.path(),
                "my.srv",
                &McpServerConfig::stdio("srv", ["--b"])
            ),
            path
        );
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(read_cache(&path, "my.srv"), None);
    }
}

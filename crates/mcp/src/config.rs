//! Server settings: how to reach a server and how to treat its tools.
//!
//! The shape is the agent's `mcp_servers: NAME: {…}` section. A server is either a child process
//! spoken to over stdio (`command`, `args`, `env`, `cwd`) or a streamable-HTTP endpoint (`url`,
//! `headers`, `env_headers`); the `type` key may say which (`stdio`, `http`), otherwise `command`
//! or `url` does. Values are taken literally: `${VAR}` expansion belongs to the readers of files
//! that promise it ([`crate::read_mcp_json`]); [`crate::expand_vars`] is there for others.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ba_protocol::{OutputLevel, PermissionLevel, ToolApproval};
use serde::{Deserialize, Serialize};

use crate::error::McpError;

/// Default start-up timeout: spawn, handshake and the first tool listing (30 s).
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 30_000;
/// Default timeout of one tool call, reset by each progress notification (120 s).
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 120_000;

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A child process spoken to over its stdin and stdout.
    Stdio(StdioServer),
    /// A streamable-HTTP endpoint.
    Http(HttpServer),
}

/// A server run as a child process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioServer {
    /// The program, looked up on `PATH` when it has no slash.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the short allow-list the child inherits (`HOME`, `PATH`, `LANG`, …);
    /// nothing else of the agent's environment is passed on.
    pub env: BTreeMap<String, String>,
    /// The working directory; the agent's when absent.
    pub cwd: Option<PathBuf>,
}

/// A server reached over streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpServer {
    /// The endpoint (`https://host/mcp`).
    pub url: String,
    /// Headers sent with every request, taken literally.
    pub headers: BTreeMap<String, String>,
    /// Headers whose value is read from an environment variable at start (`HEADER: VAR`); an
    /// unset variable fails the server's start with a message naming it.
    pub env_headers: BTreeMap<String, String>,
}

/// When a server starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartupMode {
    /// With the manager, in parallel with the others (the default).
    #[default]
    Eager,
    /// On the first call of one of its tools, offering the tools of the cached list until then.
    /// Without a cached list it starts eagerly (and its list is cached for next time).
    Lazy,
}

/// One server's settings (the agent's `mcp_servers: NAME: {…}`).
///
/// Build one with [`McpServerConfig::stdio`] or [`McpServerConfig::http`] and the `with_*`
/// setters, or deserialize it: unknown keys are refused, absent ones take the defaults below.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawServerConfig", into = "RawServerConfig")]
#[non_exhaustive]
pub struct McpServerConfig {
    /// How to reach it.
    pub transport: McpTransport,
    /// Whether to use it at all (default `true`).
    pub enabled: bool,
    /// Whether the first round waits for it (bounded by its start-up timeout) and the run fails
    /// when it does not start (default `false`).
    pub required: bool,
    /// When it starts (default [`StartupMode::Eager`]).
    pub startup: StartupMode,
    /// Raw tool names to offer; all when absent.
    pub enabled_tools: Option<Vec<String>>,
    /// Raw tool names never to offer, applied after `enabled_tools`.
    pub disabled_tools: Vec<String>,
    /// Spawn, handshake and first listing, in milliseconds (default 30 000).
    pub startup_timeout_ms: u64,
    /// One call, in milliseconds, reset by each progress notification (default 120 000).
    pub tool_timeout_ms: u64,
    /// The output level of its tools' results, for the tool runtime; the runtime's when absent.
    pub default_level: Option<OutputLevel>,
    /// The permission level needed to call its tools, for the tool runtime; the runtime's
    /// default when absent.
    pub permission: Option<PermissionLevel>,
    /// Whether a person approves each call of its tools (`never`, `ask`, `always`); the
    /// agent's configuration for a tool by name wins. Default `never`.
    pub approval: Option<ToolApproval>,
}

impl McpServerConfig {
    /// A stdio server running `command` with `args`, every other setting at its default.
    pub fn stdio<I, S>(command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::with_transport(McpTransport::Stdio(StdioServer {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        }))
    }

    /// A streamable-HTTP server at `url`, every other setting at its default.
    pub fn http(url: impl Into<String>) -> Self {
        Self::with_transport(McpTransport::Http(HttpServer {
            url: url.into(),
            headers: BTreeMap::new(),
            env_headers: BTreeMap::new(),
        }))
    }

    fn with_transport(transport: McpTransport) -> Self {
        Self {
            transport,
            enabled: true,
            required: false,
            startup: StartupMode::Eager,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            startup_timeout_ms: DEFAULT_STARTUP_TIMEOUT_MS,
            tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
            default_level: None,
            permission: None,
            approval: None,
        }
    }

    /// Adds an environment variable (stdio servers; ignored for HTTP).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio(s) = &mut self.transport {
            s.env.insert(key.into(), value.into());
        }
        self
    }

    /// Sets the working directory (stdio servers; ignored for HTTP).
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        if let McpTransport::Stdio(s) = &mut self.transport {
            s.cwd = Some(cwd.into());
        }
        self
    }

    /// Adds a header (HTTP servers; ignored for stdio).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http(h) = &mut self.transport {
            h.headers.insert(name.into(), value.into());
        }
        self
    }

    /// Sets whether the server is used.
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets whether the first round waits for the server.
    pub fn with_required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    /// Asks a person before each call of its tools (see [`McpServerConfig::approval`]).
    pub fn with_approval(mut self, approval: ToolApproval) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Sets when the server starts.
    pub fn with_startup(mut self, startup: StartupMode) -> Self {
        self.startup = startup;
        self
    }

    /// Offers only these raw tool names.
    pub fn with_enabled_tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.enabled_tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Never offers these raw tool names.
    pub fn with_disabled_tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.disabled_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the start-up timeout in milliseconds.
    pub fn with_startup_timeout_ms(mut self, ms: u64) -> Self {
        self.startup_timeout_ms = ms;
        self
    }

    /// Sets the call timeout in milliseconds.
    pub fn with_tool_timeout_ms(mut self, ms: u64) -> Self {
        self.tool_timeout_ms = ms;
        self
    }

    /// The start-up timeout.
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_millis(self.startup_timeout_ms)
    }

    /// The call timeout.
    pub fn tool_timeout(&self) -> Duration {
        Duration::from_millis(self.tool_timeout_ms)
    }

    /// Whether the configuration lets `tool` (a raw name) through, and if not, why.
    pub fn tool_filter_reason(&self, tool: &str) -> Option<&'static str> {
        if let Some(enabled) = &self.enabled_tools
            && !enabled.iter().any(|t| t == tool)
        {
            return Some("not in `enabled_tools`");
        }
        if self.disabled_tools.iter().any(|t| t == tool) {
            return Some("in `disabled_tools`");
        }
        None
    }

    /// Checks what deserialization cannot: non-zero timeouts, a non-empty command or URL.
    pub fn validate(&self, name: &str) -> Result<(), McpError> {
        if name.is_empty() {
            return Err(McpError::config("a server has an empty name"));
        }
        if self.startup_timeout_ms == 0 {
            return Err(McpError::server_config(name, "`startup_timeout_ms` is 0"));
        }
        if self.tool_timeout_ms == 0 {
            return Err(McpError::server_config(name, "`tool_timeout_ms` is 0"));
        }
        match &self.transport {
            McpTransport::Stdio(s) if s.command.trim().is_empty() => {
                Err(McpError::server_config(name, "`command` is empty"))
            }
            McpTransport::Http(h)
                if !(h.url.starts_with("http://") || h.url.starts_with("https://")) =>
            {
                Err(McpError::server_config(
                    name,
                    format!("`url` must start with http:// or https://, got `{}`", h.url),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The flat wire shape, so that unknown keys are refused and both transports share one map.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServerConfig {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env_headers: BTreeMap<String, String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    startup: StartupMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enabled_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    disabled_tools: Vec<String>,
    #[serde(default = "default_startup_timeout_ms")]
    startup_timeout_ms: u64,
    #[serde(default = "default_tool_timeout_ms")]
    tool_timeout_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    default_level: Option<OutputLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    permission: Option<PermissionLevel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval: Option<ToolApproval>,
}

fn yes() -> bool {
    true
}

fn default_startup_timeout_ms() -> u64 {
    DEFAULT_STARTUP_TIMEOUT_MS
}

fn default_tool_timeout_ms() -> u64 {
    DEFAULT_TOOL_TIMEOUT_MS
}

/// The two transports, as a `type` key or the keys present name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransportKind {
    Stdio,
    Http,
}

/// The transport a `type` key names, or `command` / `url` imply when it is absent.
pub(crate) fn transport_kind(
    kind: Option<&str>,
    has_command: bool,
    has_url: bool,
) -> Result<TransportKind, String> {
    match kind {
        Some("stdio") => Ok(TransportKind::Stdio),
        Some("http" | "streamable-http" | "streamable_http" | "streamableHttp") => {
            Ok(TransportKind::Http)
        }
        Some("sse") => Err(
            "`type: sse` (the legacy HTTP+SSE transport) is not supported; use the server's \
             streamable HTTP endpoint with `type: http`"
                .to_owned(),
        ),
        Some(other) => Err(format!(
            "unknown `type` `{other}`; expected `stdio` or `http`"
        )),
        None => match (has_command, has_url) {
            (true, false) => Ok(TransportKind::Stdio),
            (false, true) => Ok(TransportKind::Http),
            (true, true) => Err("both `command` and `url` are set; a server has one".to_owned()),
            (false, false) => Err("neither `command` (stdio) nor `url` (http) is set".to_owned()),
        },
    }
}

impl TryFrom<RawServerConfig> for McpServerConfig {
    type Error = String;

    fn try_from(raw: RawServerConfig) -> Result<Self, Self::Error> {
        let kind = transport_kind(
            raw.kind.as_deref(),
            raw.command.is_some(),
            raw.url.is_some(),
        )?;
        let transport = if kind == TransportKind::Stdio {
            if raw.url.is_some() || !raw.headers.is_empty() || !raw.env_headers.is_empty() {
                return Err("a stdio server takes no `url`, `headers` or `env_headers`".to_owned());
            }
            McpTransport::Stdio(StdioServer {
                command: raw.command.ok_or("a stdio server needs `command`")?,
                args: raw.args,
                env: raw.env,
                cwd: raw.cwd,
            })
        } else {
            if raw.command.is_some()
                || !raw.args.is_empty()
                || !raw.env.is_empty()
                || raw.cwd.is_some()
            {
                return Err("an http server takes no `command`, `args`, `env` or `cwd`".to_owned());
            }
            McpTransport::Http(HttpServer {
                url: raw.url.ok_or("an http server needs `url`")?,
                headers: raw.headers,
                env_headers: raw.env_headers,
            })
        };
        Ok(Self {
            transport,
            enabled: raw.enabled,
            required: raw.required,
            startup: raw.startup,
            enabled_tools: raw.enabled_tools,
            disabled_tools: raw.disabled_tools,
            startup_timeout_ms: raw.startup_timeout_ms,
            tool_timeout_ms: raw.tool_timeout_ms,
            default_level: raw.default_level,
            permission: raw.permission,
            approval: raw.approval,
        })
    }
}

impl From<McpServerConfig> for RawServerConfig {
    fn from(c: McpServerConfig) -> Self {
        let mut raw = RawServerConfig {
            enabled: c.enabled,
            required: c.required,
            startup: c.startup,
            enabled_tools: c.enabled_tools,
            disabled_tools: c.disabled_tools,
            startup_timeout_ms: c.startup_timeout_ms,
            tool_timeout_ms: c.tool_timeout_ms,
            default_level: c.default_level,
            permission: c.permission,
            approval: c.approval,
            ..RawServerConfig::default()
        };
        match c.transport {
            McpTransport::Stdio(s) => {
                raw.kind = Some("stdio".to_owned());
                raw.command = Some(s.command);
                raw.args = s.args;
                raw.env = s.env;
                raw.cwd = s.cwd;
            }
            McpTransport::Http(h) => {
                raw.kind = Some("http".to_owned());
                raw.url = Some(h.url);
                raw.headers = h.headers;
                raw.env_headers = h.env_headers;
            }
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<McpServerConfig, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_apply_and_the_transport_is_inferred() {
        let c = parse(json!({"command": "npx", "args": ["-y", "srv"]})).unwrap();
        assert_eq!(c, McpServerConfig::stdio("npx", ["-y", "srv"]));
        assert_eq!(c.startup_timeout_ms, 30_000);
        assert_eq!(c.tool_timeout_ms, 120_000);
        assert!(c.enabled && !c.required);
        let h = parse(json!({"url": "https://x/mcp", "headers": {"X-A": "1"}})).unwrap();
        assert_eq!(
            h,
            McpServerConfig::http("https://x/mcp").with_header("X-A", "1")
        );
    }

    #[test]
    fn every_key_round_trips() {
        let c = parse(json!({
            "type": "stdio", "command": "srv", "env": {"A": "b"}, "cwd": "/tmp",
            "enabled": false, "required": true, "startup": "lazy",
            "enabled_tools": ["a"], "disabled_tools": ["b"],
            "startup_timeout_ms": 5, "tool_timeout_ms": 6,
            "default_level": "brief", "permission": "admin"
        }))
        .unwrap();
        assert_eq!(c.startup, StartupMode::Lazy);
        assert_eq!(c.default_level, Some(OutputLevel::Brief));
        assert_eq!(c.permission, Some(PermissionLevel::Admin));
        let back: McpServerConfig =
            serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn bad_shapes_are_named() {
        for (v, needle) in [
            (
                json!({"command": "a", "url": "http://x"}),
                "both `command` and `url`",
            ),
            (json!({}), "neither `command`"),
            (json!({"type": "sse", "url": "http://x"}), "not supported"),
            (
                json!({"type": "ws", "url": "http://x"}),
                "unknown `type` `ws`",
            ),
            (
                json!({"command": "a", "colour": "red"}),
                "unknown field `colour`",
            ),
            (
                json!({"type": "stdio", "command": "a", "headers": {"A": "b"}}),
                "takes no `url`",
            ),
            (
                json!({"url": "http://x", "args": ["a"]}),
                "takes no `command`",
            ),
        ] {
            let err = parse(v).unwrap_err();
            assert!(err.contains(needle), "{err} should contain {needle}");
        }
    }

    #[test]
    fn filters_and_validation() {
        let c = McpServerConfig::stdio("srv", Vec::<String>::new())
            .with_enabled_tools(["a", "b"])
            .with_disabled_tools(["b"]);
        assert_eq!(c.tool_filter_reason("a"), None);
        assert_eq!(c.tool_filter_reason("b"), Some("in `disabled_tools`"));
        assert_eq!(c.tool_filter_reason("c"), Some("not in `enabled_tools`"));
        assert!(c.validate("x").is_ok());
        assert!(c.clone().with_tool_timeout_ms(0).validate("x").is_err());
        assert!(McpServerConfig::http("ftp://x").validate("x").is_err());
        assert!(
            McpServerConfig::stdio(" ", Vec::<String>::new())
                .validate("x")
                .is_err()
        );
    }
}

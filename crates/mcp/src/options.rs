//! Settings of the manager as a whole and of one call.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::catalog::ToolLimits;
use crate::client::ProgressFn;
use crate::result::{McpProgress, ResultLimits};

/// Settings of the manager as a whole.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpOptions {
    /// Folder of the tool-list cache (see [`crate`]'s docs); no cache when absent. The crate
    /// never guesses a location: the caller passes one (for the agent, under its data folder).
    pub tool_cache_dir: Option<PathBuf>,
    /// How much of a result is kept.
    pub result_limits: ResultLimits,
    /// Bytes of one message from a server (default 16 MiB); a longer reply fails its call.
    pub max_message_bytes: usize,
    /// Bytes of one tool's input schema (default 64 KiB); a larger one skips the tool.
    pub max_schema_bytes: usize,
    /// Bytes of a tool's description kept (default 8 KiB).
    pub max_description_bytes: usize,
    /// Tools offered by one server (default 1000).
    pub max_tools_per_server: usize,
    /// Each of the two waits of a shutdown: after closing stdin, after SIGTERM (default 2 s).
    pub shutdown_grace: Duration,
    /// Whether each stdio server gets a watchdog that kills its process group if this process
    /// dies without running destructors (default `true`).
    pub watchdog: bool,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            tool_cache_dir: None,
            result_limits: ResultLimits::default(),
            max_message_bytes: 16 * 1024 * 1024,
            max_schema_bytes: 64 * 1024,
            max_description_bytes: 8 * 1024,
            max_tools_per_server: 1000,
            shutdown_grace: Duration::from_secs(2),
            watchdog: true,
        }
    }
}

impl McpOptions {
    /// Caches tool lists in `dir`.
    pub fn with_tool_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tool_cache_dir = Some(dir.into());
        self
    }

    /// Sets the result limits.
    pub fn with_result_limits(mut self, limits: ResultLimits) -> Self {
        self.result_limits = limits;
        self
    }

    /// Sets the message size limit.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets the wait of each shutdown step.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Turns the watchdog processes on or off.
    pub fn with_watchdog(mut self, on: bool) -> Self {
        self.watchdog = on;
        self
    }

    pub(crate) fn tool_limits(&self) -> ToolLimits {
        ToolLimits {
            max_schema_bytes: self.max_schema_bytes,
            max_description_bytes: self.max_description_bytes,
            max_tools: self.max_tools_per_server,
        }
    }
}

/// Settings of one call.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    /// How long to wait without an answer or a progress notification; the server's
    /// `tool_timeout_ms` when absent.
    pub timeout: Option<Duration>,
    /// A cap on the whole call, progress or not; none when absent.
    pub max_total: Option<Duration>,
    /// Called with each progress notification.
    pub progress: Option<ProgressFn>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("timeout", &self.timeout)
            .field("max_total", &self.max_total)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl CallOptions {
    /// Sets the idle timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the cap on the whole call.
    pub fn with_max_total(mut self, max_total: Duration) -> Self {
        self.max_total = Some(max_total);
        self
    }

    /// Sets the progress callback.
    pub fn with_progress(
        mut self,
        progress: impl Fn(&McpProgress) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(Arc::new(progress));
        self
    }
}

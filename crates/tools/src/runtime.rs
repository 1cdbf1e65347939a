//! The [`ToolRuntime`]: the one place where the layers are composed ([`ToolRuntime::layers`]),
//! in this order — lookup → input size → schema → permissions ([`admit`]) → output level →
//! idempotency → retry → timeout → the tool → formatting at the level → spill →
//! [`ToolResult`]. Each layer is a function of its own, tested alone beside it.

use std::sync::Arc;
use std::time::Duration;

use ba_protocol::ContextModifier;
use ba_protocol::TokenCounter;
use ba_protocol::{InvocationContext, OutputLevel, ToolCall, ToolErrorCode, ToolResult};
use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;
use tracing::Instrument;
use tracing::field::Empty;

use crate::config::{RetryConfig, ToolsConfig};
use crate::error::{ToolError, ToolsError};
use crate::files::ConversationFiles;
use crate::idempotency::{IdempotencyCache, cache_key};
use crate::levels::{FormatBounds, format_observation, format_standard, resolve_level, summarize};
use crate::metrics::{MetricsRecorder, ToolMetrics};
use crate::registry::ToolRegistry;
use crate::retry::{Jitter, RandomJitter, RetryPolicy, RetrySchedule, run_with_retry};
use crate::scope::RunScope;
use crate::spill::{
    DataSink, FsSink, data_file_name, data_hash, should_spill, spill_name, spill_observation,
};
use crate::tool::{CallContext, PartialOutput, Tool, ToolCapabilities};
use crate::{lookup, permissions, size, timeout, validate};

/// What the caller knows about the moment of a call, beyond the invocation context.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallOptions<'a> {
    /// How full the model's context is, 0..=1 (above the configured threshold, `brief` is
    /// forced).
    pub context_usage: f64,
    /// The active skill's context modifier (its `allowed_tools` limit the tools a call may
    /// use).
    pub modifier: Option<&'a ContextModifier>,
    /// An explicit idempotency key: a repeated key returns the cached result.
    pub idempotency_key: Option<&'a str>,
    /// The files of the conversation the calls belong to, handed to each call
    /// ([`CallContext::files`]); spilled data then becomes a data file of the conversation.
    pub files: Option<&'a Arc<dyn ConversationFiles>>,
    /// The state the calls of the caller's run share ([`CallContext::scope`]).
    pub scope: Option<&'a Arc<RunScope>>,
}

/// Runs tool calls through every layer. Cheap to share behind an `Arc`; all state (cache,
/// metrics) is safe to use from many tasks at once.
pub struct ToolRuntime {
    registry: Arc<ToolRegistry>,
    config: ToolsConfig,
    sink: Option<Arc<dyn DataSink>>,
    jitter: Option<Arc<dyn Jitter>>,
    counter: Option<Arc<dyn TokenCounter>>,
    cache: IdempotencyCache,
    metrics: Arc<MetricsRecorder>,
}

impl std::fmt::Debug for ToolRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRuntime")
            .field("tools", &self.registry.names().collect::<Vec<_>>())
            .field("sink", &self.sink)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

/// What the successful half of a call produced before it became a result.
struct Rendered {
    observation: String,
    data_ref: Option<String>,
    spilled: bool,
}

/// What is known of the data a tool returned, kept even when a later layer fails.
#[derive(Default)]
struct DataFacts {
    size: u64,
    hash: Option<String>,
    summary: Option<String>,
}

/// The `tool_call` span of one call: tool, call id and conversation, then the output level,
/// retries, outcome (`ok` or the error kind) and duration (ms) recorded as the call ends.
/// Names and figures only, never arguments or output. Calls run outside the runtime (skill
/// activation) open the same span.
pub fn tool_call_span(tool: &str, call_id: &str, conversation_id: &str) -> tracing::Span {
    tracing::info_span!(
        "tool_call",
        tool,
        call_id,
        conversation_id,
        level = Empty,
        retries = Empty,
        outcome = Empty,
        duration_ms = Empty,
    )
}

impl ToolRuntime {
    /// A runtime over `registry` with `config`.
    ///
    /// # Errors
    /// [`ToolsError::InvalidConfig`] when a configuration value is out of range.
    pub fn new(registry: ToolRegistry, config: ToolsConfig) -> Result<Self, ToolsError> {
        config.check()?;
        let cache = IdempotencyCache::new(
            config.idempotency.capacity,
            Duration::from_millis(config.idempotency.ttl_ms),
        );
        Ok(Self {
            registry: Arc::new(registry),
            config,
            sink: None,
            jitter: None,
            counter: None,
            cache,
            metrics: Arc::new(MetricsRecorder::new()),
        })
    }

    /// Spilled data goes to `sink` (otherwise to an [`FsSink`] at the invocation context's
    /// `storage_dir`, if it names one).
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn DataSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Replaces the random retry jitter (tests make it deterministic).
    #[must_use]
    pub fn with_jitter(mut self, jitter: Arc<dyn Jitter>) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// Counts tokens of arguments and observations for the metrics.
    #[must_use]
    pub fn with_token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = Some(counter);
        self
    }

    /// A runtime over `registry` that shares everything else with this one: configuration,
    /// sink, jitter, token counter, idempotency cache and metrics. For a caller whose tools
    /// change between runs (tools of MCP servers that join later) without losing the shared
    /// state.
    #[must_use]
    pub fn with_registry(&self, registry: ToolRegistry) -> Self {
        Self {
            registry: Arc::new(registry),
            config: self.config.clone(),
            sink: self.sink.clone(),
            jitter: self.jitter.clone(),
            counter: self.counter.clone(),
            cache: self.cache.clone(),
            metrics: Arc::clone(&self.metrics),
        }
    }

    /// The tools.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// The configuration.
    pub fn config(&self) -> &ToolsConfig {
        &self.config
    }

    /// The metrics of every call run so far.
    pub fn metrics(&self) -> &MetricsRecorder {
        &self.metrics
    }

    /// Runs one call with default options.
    pub async fn run(&self, call: &ToolCall, ctx: &InvocationContext) -> ToolResult {
        self.run_with(call, ctx, CallOptions::default()).await
    }

    /// Runs calls concurrently, at most `max_concurrency` at a time. Results come back in
    /// call order; one failure never cancels the others.
    ///
    /// The calls are polled together on the caller's task, so they overlap while they wait
    /// (I/O, timers); a tool doing long blocking work should move it to a blocking thread
    /// itself, which also keeps its timeout able to fire.
    pub async fn run_all(
        &self,
        calls: &[ToolCall],
        ctx: &InvocationContext,
        opts: CallOptions<'_>,
    ) -> Vec<ToolResult> {
        // The futures are made up front (they do nothing until polled): a closure inside the
        // stream would make the returned future lose `Send` to a higher-ranked lifetime check.
        let pending: Vec<_> = calls
            .iter()
            .map(|call| self.run_with(call, ctx, opts))
            .collect();
        futures::stream::iter(pending)
            .buffered(self.config.max_concurrency.max(1))
            .collect()
            .await
    }

    /// Runs one call through every layer. Never fails: every failure is a failed
    /// [`ToolResult`] whose observation is the standard error text.
    pub async fn run_with(
        &self,
        call: &ToolCall,
        ctx: &InvocationContext,
        opts: CallOptions<'_>,
    ) -> ToolResult {
        let span = tool_call_span(
            &call.name,
            &call.id,
            ctx.conversation_id.as_deref().unwrap_or(""),
        );
        self.run_inner(call, ctx, opts, &span)
            .instrument(span.clone())
            .await
    }

    /// The layers in their order, the one place they are composed: the checks before a call
    /// runs ([`admit`]), the output level ([`ToolRuntime::level_of`]), the idempotency cache
    /// around retry, timeout and the tool ([`ToolRuntime::cached_or_run`]), then the rendering
    /// at that level and the spill ([`ToolRuntime::present`]). What each layer learns that the
    /// result reports (level, retries, a cache hit, the data's facts) goes into `state`, kept
    /// when a later layer fails.
    async fn layers(
        &self,
        call: &ToolCall,
        ctx: &InvocationContext,
        opts: CallOptions<'_>,
        span: &tracing::Span,
        state: &mut CallState,
    ) -> Result<Rendered, ToolError> {
        let admitted = admit(&self.registry, &self.config, call, ctx, opts)?;
        state.level = self.level_of(call, &admitted, opts);
        span.record("level", state.level.as_str());
        let data = self
            .cached_or_run(call, ctx, opts, &admitted, state)
            .await?;
        self.present(call, &data, &admitted, ctx, opts, state).await
    }

    async fn run_inner(
        &self,
        call: &ToolCall,
        ctx: &InvocationContext,
        opts: CallOptions<'_>,
        span: &tracing::Span,
    ) -> ToolResult {
        let start = Instant::now();
        let mut state = CallState::default();
        let outcome = self.layers(call, ctx, opts, span, &mut state).await;
        let duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (result, spilled) = into_result(call, outcome, &mut state, duration_ms);
        span.record("retries", state.retries);
        span.record("duration_ms", duration_ms);
        span.record(
            "outcome",
            result.error.as_ref().map_or("ok", |e| e.kind.as_str()),
        );
        self.metrics
            .record(&self.metrics_of(call, ctx, &result, &state, spilled));
        result
    }

    /// The output level of an admitted call: explicit in the call, else the configured or the
    /// tool's default, forced to `brief` when the context is nearly full.
    fn level_of(
        &self,
        call: &ToolCall,
        admitted: &Admitted<'_>,
        opts: CallOptions<'_>,
    ) -> OutputLevel {
        let tool_default = self
            .config
            .tools
            .get(call.name.as_str())
            .and_then(|o| o.default_level)
            .or_else(|| admitted.tool.default_level());
        resolve_level(
            call.output_level,
            tool_default,
            opts.context_usage,
            self.config.brief_above_usage,
            self.config.default_level,
        )
    }

    /// The idempotency layer: a cached answer for the same call, else the call run through
    /// retry and timeout ([`ToolRuntime::attempts`]), its data cached when the call may be.
    async fn cached_or_run(
        &self,
        call: &ToolCall,
        ctx: &InvocationContext,
        opts: CallOptions<'_>,
        admitted: &Admitted<'_>,
        state: &mut CallState,
    ) -> Result<Arc<Value>, ToolError> {
        let key = scoped_cache_key(call, ctx, opts, &admitted.args, admitted.caps.idempotent);
        if let Some(hit) = key.as_ref().and_then(|k| self.cache.get(k)) {
            state.cached = true;
            return Ok(hit);
        }
        let data = Arc::new(self.attempts(call, ctx, opts, admitted, state).await?);
        if let Some(k) = key {
            self.cache.insert(k, data.clone());
        }
        Ok(data)
    }

    /// The retry layer around the timeout layer around the tool: attempts until one succeeds,
    /// fails in a way the policy does not retry, or the retries run out.
    async fn attempts(
        &self,
        call: &ToolCall,
        ctx: &InvocationContext,
        opts: CallOptions<'_>,
        admitted: &Admitted<'_>,
        state: &mut CallState,
    ) -> Result<Value, ToolError> {
        let caps = admitted.caps;
        let base_timeout = Duration::from_millis(
            self.config
                .tools
                .get(call.name.as_str())
                .and_then(|o| o.timeout_ms)
                .or(caps.timeout_ms)
                .unwrap_or(ctx.timeout_ms),
        );
        let retry_config = self.config.retry_with(&call.name, caps.max_retries);
        let policy = retry_policy(&retry_config, caps);
        let random;
        let jitter: &dyn Jitter = match &self.jitter {
            Some(j) => j.as_ref(),
            None => {
                random = RandomJitter::new(retry_config.jitter);
                &random
            }
        };
        let schedule = RetrySchedule {
            policy: &policy,
            backoff: retry_config.backoff(),
            growth: retry_config.growth(),
            jitter,
        };
        let call_id: Arc<str> = Arc::from(call.id.as_str());
        let invocation = Arc::new(ctx.clone());
        let partial = PartialOutput::default();
        let files = opts.files.cloned();
        let scope = opts.scope.cloned();
        let tool = admitted.tool;
        let outcome = run_with_retry(schedule, base_timeout, |attempt, limit| {
            partial.clear();
            let cctx = CallContext {
                call_id: call_id.clone(),
                invocation: invocation.clone(),
                attempt,
                timeout_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
                partial: partial.clone(),
                files: files.clone(),
                scope: scope.clone(),
            };
            let args = admitted.args.clone();
            let name = call.name.as_str();
            let partial = partial.clone();
            let span = tracing::debug_span!("tool_attempt", attempt, timeout_ms = cctx.timeout_ms);
            async move { timeout::run_attempt(name, tool.call(args, &cctx), limit, &partial).await }
                .instrument(span)
        })
        .await;
        state.retries = outcome.retries;
        outcome.result.map_err(|mut e| {
            if state.retries > 0 {
                e.message
                    .push_str(&format!(" (gave up after {} retries)", state.retries));
            }
            e
        })
    }

    /// The level layer and the spill layer: a verbatim tool's data shown whole, any other
    /// rendered at the call's level ([`ToolRuntime::render`]).
    async fn present(
        &self,
        call: &ToolCall,
        data: &Value,
        admitted: &Admitted<'_>,
        ctx: &InvocationContext,
        opts: CallOptions<'_>,
        state: &mut CallState,
    ) -> Result<Rendered, ToolError> {
        if admitted.caps.verbatim {
            state.level = OutputLevel::Full;
            return Ok(Rendered {
                observation: crate::levels::format_full(data, &self.config.format),
                data_ref: None,
                spilled: false,
            });
        }
        self.render(
            &call.id,
            data,
            state.level,
            ctx,
            opts.files,
            &mut state.facts,
        )
        .await
    }

    /// The metrics record of a finished call.
    fn metrics_of(
        &self,
        call: &ToolCall,
        ctx: &InvocationContext,
        result: &ToolResult,
        state: &CallState,
        spilled: bool,
    ) -> ToolMetrics {
        ToolMetrics {
            tool: call.name.clone(),
            call_id: call.id.clone(),
            conversation_id: ctx.conversation_id.clone(),
            duration_ms: result.duration_ms,
            tokens_in: self.counter.as_ref().map(|c| {
                let text = match &call.arguments {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                c.count(&text) as u64
            }),
            tokens_out: self
                .counter
                .as_ref()
                .map(|c| c.count(&result.observation) as u64),
            success: result.success,
            retries: state.retries,
            level: result.output_level,
            error_kind: result.error.as_ref().map(|e| e.kind),
            cached: state.cached,
            spilled,
        }
    }

    /// Formatting at the level and spill: to the conversation's files when the call has
    /// them (the reference is then the file id, `data_001`), else to the sink.
    async fn render(
        &self,
        call_id: &str,
        data: &Value,
        level: OutputLevel,
        ctx: &InvocationContext,
        files: Option<&Arc<dyn ConversationFiles>>,
        facts: &mut DataFacts,
    ) -> Result<Rendered, ToolError> {
        let bytes = serde_json::to_vec(data).map_err(|e| {
            ToolError::execution("the tool returned data that cannot be serialized")
                .with_detail(e.to_string())
        })?;
        let size = bytes.len() as u64;
        let hash = data_hash(&bytes);
        facts.size = size;
        facts.hash = Some(hash.clone());
        let bounds = &self.config.format;
        if !should_spill(level, size, self.config.spill_threshold_bytes) {
            return Ok(Rendered {
                observation: format_observation(data, level, bounds),
                data_ref: None,
                spilled: false,
            });
        }
        let fs_sink;
        let sink: Option<&dyn DataSink> = match (&self.sink, &ctx.storage_dir) {
            (Some(s), _) => Some(s.as_ref()),
            (None, Some(dir)) => {
                fs_sink = FsSink::new(dir);
                Some(&fs_sink)
            }
            (None, None) => None,
        };
        let summary = summarize(data);
        facts.summary = Some(summary.clone());
        let preview = preview(data, level, bounds);
        if let Some(files) = files {
            let name = data_file_name(call_id, &hash);
            return match files.add_data(&name, &bytes).await {
                Ok(file) => Ok(Rendered {
                    observation: spill_observation(&file.id, size, &summary, &preview),
                    data_ref: Some(file.id.into()),
                    spilled: true,
                }),
                Err(e) => Err(spill_failed(size, &summary, &name, &preview, &e)),
            };
        }
        let Some(sink) = sink else {
            // Nowhere to put it: show what fits and say so, rather than pretend it was saved.
            let note = format!(
                "Note: the data is {size} bytes and no data store is configured, so it was not \
                 saved; only part of it is shown.\n"
            );
            let shown = if size > self.config.spill_threshold_bytes {
                format!("{note}{}", format_observation(data, level, bounds))
            } else {
                format_observation(data, level, bounds)
            };
            let cap = bounds.max_bytes(level);
            return Ok(Rendered {
                observation: crate::levels::truncate_middle(&shown, cap, usize::MAX).into_owned(),
                data_ref: None,
                spilled: false,
            });
        };
        let name = spill_name(call_id, &hash);
        match sink.put(&name, &bytes).await {
            Ok(reference) => Ok(Rendered {
                observation: spill_observation(&reference, size, &summary, &preview),
                data_ref: Some(reference),
                spilled: true,
            }),
            Err(e) => Err(spill_failed(size, &summary, &name, &preview, &e)),
        }
    }
}

/// A call that passed the checks before it runs: its tool, what the tool can do, and the
/// arguments as a JSON object.
struct Admitted<'r> {
    tool: &'r Arc<dyn Tool>,
    caps: ToolCapabilities,
    args: Value,
}

/// What the layers learn of a call that its result and metrics report.
struct CallState {
    level: OutputLevel,
    retries: u32,
    cached: bool,
    facts: DataFacts,
}

impl Default for CallState {
    fn default() -> Self {
        Self {
            level: OutputLevel::Brief,
            retries: 0,
            cached: false,
            facts: DataFacts::default(),
        }
    }
}

/// The layers before a call runs, in order: lookup, input size, schema (on the arguments the
/// tool has brought up to date), permissions.
fn admit<'r>(
    registry: &'r ToolRegistry,
    config: &ToolsConfig,
    call: &ToolCall,
    ctx: &InvocationContext,
    opts: CallOptions<'_>,
) -> Result<Admitted<'r>, ToolError> {
    let registered = lookup::lookup(registry, &call.name)?;
    size::check_input_size(&call.arguments, config.max_input_bytes)?;
    let tool = registered.tool();
    let args = tool.upgrade_arguments(validate::normalize_arguments(call.arguments.clone())?);
    validate::validate_arguments(registered, &args)?;
    let caps = tool.capabilities();
    permissions::check_permission(&call.name, caps, ctx.permission_level, opts.modifier)?;
    Ok(Admitted { tool, caps, args })
}

/// The idempotency key of a call, scoped to its conversation: the same arguments name another
/// conversation's files elsewhere (`upload_001`). A call with files but no conversation id to
/// scope them by is not cached.
fn scoped_cache_key(
    call: &ToolCall,
    ctx: &InvocationContext,
    opts: CallOptions<'_>,
    args: &Value,
    idempotent: bool,
) -> Option<String> {
    if ctx.conversation_id.is_none() && opts.files.is_some() {
        return None;
    }
    let conversation = ctx.conversation_id.as_deref().unwrap_or_default();
    cache_key(&call.name, args, opts.idempotency_key, idempotent)
        .map(|k| format!("{conversation}\u{0}{k}"))
}

/// The retry decision for a tool: the configured policy, without timeouts when the same
/// arguments would run out of time again.
fn retry_policy(config: &RetryConfig, caps: ToolCapabilities) -> RetryPolicy {
    let mut policy = config.policy();
    if caps.deterministic_timeouts {
        policy
            .retry_on
            .retain(|k| *k != ba_protocol::ToolErrorKind::Timeout);
    }
    policy
}

/// The result of a call from what its layers gave, and whether its data was spilled. A
/// failure still describes the data the tool did produce (a failed spill loses nothing the
/// model could otherwise have had).
fn into_result(
    call: &ToolCall,
    outcome: Result<Rendered, ToolError>,
    state: &mut CallState,
    duration_ms: u64,
) -> (ToolResult, bool) {
    let facts = std::mem::take(&mut state.facts);
    match outcome {
        Ok(r) => (
            ToolResult {
                tool_call_id: call.id.clone(),
                observation: r.observation,
                output_level: state.level,
                data_ref: r.data_ref,
                data_size_bytes: facts.size,
                data_hash: facts.hash,
                data_summary: facts.summary,
                success: true,
                error: None,
                retry_count: state.retries,
                duration_ms,
            },
            r.spilled,
        ),
        Err(e) => {
            if let Some(detail) = &e.detail {
                tracing::warn!(tool = %call.name, call_id = %call.id, %detail, "tool call failed");
            }
            let mut r = ToolResult::failure(&call.id, e.kind, e.code, &e.message);
            r.retry_count = state.retries;
            r.duration_ms = duration_ms;
            r.data_size_bytes = facts.size;
            r.data_hash = facts.hash;
            r.data_summary = facts.summary;
            (r, false)
        }
    }
}

/// The error of a spill that could not be saved: the preview is still shown.
fn spill_failed(size: u64, summary: &str, name: &str, preview: &str, e: &ToolsError) -> ToolError {
    ToolError::resource(format!(
        "the result ({size} bytes; {summary}) could not be saved as `{name}`: {e}. \
         Preview of the data:\n{preview}"
    ))
    .with_code(ToolErrorCode::SpillFailed)
    .with_detail(e.to_string())
}

/// The preview in a spill observation: the brief rendering for a brief call (the model asked
/// for little), otherwise a short standard rendering.
fn preview(data: &Value, level: OutputLevel, bounds: &FormatBounds) -> String {
    if level == OutputLevel::Brief {
        return crate::levels::format_brief(data, bounds);
    }
    let b = FormatBounds {
        standard_max_bytes: bounds.preview_max_bytes,
        standard_max_lines: 20,
        ..*bounds
    };
    format_standard(data, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn runtime_is_shareable_and_its_futures_can_be_spawned() {
        assert_send_sync::<ToolRuntime>();
        let Ok(runtime) = ToolRuntime::new(ToolRegistry::new(), ToolsConfig::default()) else {
            panic!("default config is valid");
        };
        let call = ToolCall::new("c", "t", Value::Null);
        let ctx = InvocationContext::default();
        let one = runtime.run(&call, &ctx);
        assert_send(&one);
        let calls = [call.clone()];
        let all = runtime.run_all(&calls, &ctx, CallOptions::default());
        assert_send(&all);
    }

    fn registry_with(tool: impl Tool + 'static) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register(tool).unwrap();
        registry
    }

    fn guarded(name: &str, level: ba_protocol::PermissionLevel) -> impl Tool + 'static {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"]
        });
        crate::typed::dynamic_tool(name, "test", schema, |_, _| async { Ok(Value::Null) })
            .with_capabilities(ToolCapabilities {
                required_permission: level,
                ..ToolCapabilities::default()
            })
    }

    #[test]
    fn admission_checks_lookup_size_schema_then_permissions_in_that_order() {
        use ba_protocol::PermissionLevel;
        let registry = registry_with(guarded("t", PermissionLevel::Admin));
        let config = ToolsConfig {
            max_input_bytes: 64,
            ..ToolsConfig::default()
        };
        let low = InvocationContext::default();
        let code = |call: ToolCall, ctx: &InvocationContext| {
            admit(&registry, &config, &call, ctx, CallOptions::default())
                .err()
                .map(|e| e.code)
        };
        let big = serde_json::json!({"pad": "x".repeat(100)});
        // An unknown tool is refused before its arguments are measured.
        let unknown = ToolCall::new("c", "nope", big.clone());
        assert_eq!(code(unknown, &low), Some(ToolErrorCode::UnknownTool));
        // Too large before the schema is read.
        assert_eq!(
            code(ToolCall::new("c", "t", big), &low),
            Some(ToolErrorCode::InputTooLarge)
        );
        // The schema before the permission.
        assert_eq!(
            code(ToolCall::new("c", "t", serde_json::json!({})), &low),
            Some(ToolErrorCode::SchemaViolation)
        );
        let call = ToolCall::new("c", "t", serde_json::json!({"n": 1}));
        assert_eq!(
            code(call.clone(), &low),
            Some(ToolErrorCode::PermissionLevel)
        );
        let high = InvocationContext {
            permission_level: PermissionLevel::Admin,
            ..InvocationContext::default()
        };
        let admitted = admit(&registry, &config, &call, &high, CallOptions::default()).unwrap();
        assert_eq!(admitted.args, serde_json::json!({"n": 1}));
        assert_eq!(admitted.caps.required_permission, PermissionLevel::Admin);
    }

    #[test]
    fn arguments_are_brought_up_to_date_before_the_schema_reads_them() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"file": {"type": "string"}},
            "required": ["file"],
            "additionalProperties": false
        });
        struct Renamed<T>(T);
        #[async_trait::async_trait]
        impl<T: Tool> Tool for Renamed<T> {
            fn name(&self) -> &str {
                self.0.name()
            }
            fn description(&self) -> &str {
                self.0.description()
            }
            fn input_schema(&self) -> Value {
                self.0.input_schema()
            }
            async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
                self.0.call(input, ctx).await
            }
            fn upgrade_arguments(&self, mut arguments: Value) -> Value {
                if let Some(map) = arguments.as_object_mut()
                    && let Some(old) = map.remove("path")
                {
                    map.insert("file".into(), old);
                }
                arguments
            }
        }
        let inner =
            crate::typed::dynamic_tool("r", "test", schema, |_, _| async { Ok(Value::Null) });
        let registry = registry_with(Renamed(inner));
        let config = ToolsConfig::default();
        let call = ToolCall::new("c", "r", serde_json::json!({"path": "upload_001"}));
        let ctx = InvocationContext::default();
        let admitted = admit(&registry, &config, &call, &ctx, CallOptions::default()).unwrap();
        assert_eq!(admitted.args, serde_json::json!({"file": "upload_001"}));
    }

    #[test]
    fn cache_keys_are_scoped_to_the_conversation() {
        let call = ToolCall::new("c", "t", Value::Null);
        let args = serde_json::json!({"file": "upload_001"});
        let in_conversation = |id: &str| InvocationContext {
            conversation_id: Some(id.to_owned()),
            ..InvocationContext::default()
        };
        let key = |ctx: &InvocationContext, opts| scoped_cache_key(&call, ctx, opts, &args, true);
        let none = CallOptions::default();
        let a = key(&in_conversation("a"), none).unwrap();
        let b = key(&in_conversation("b"), none).unwrap();
        assert_ne!(a, b, "the same arguments name other files elsewhere");
        assert_eq!(key(&in_conversation("a"), none), Some(a));
        assert!(scoped_cache_key(&call, &in_conversation("a"), none, &args, false).is_none());
        let files: Arc<dyn ConversationFiles> = Arc::new(crate::files::DirFiles::new("unused"));
        let with_files = CallOptions {
            files: Some(&files),
            ..CallOptions::default()
        };
        assert!(key(&InvocationContext::default(), with_files).is_none());
        assert!(key(&in_conversation("a"), with_files).is_some());
    }

    #[test]
    fn deterministic_timeouts_are_not_retried() {
        use ba_protocol::ToolErrorKind;
        let config = RetryConfig::default();
        let plain = retry_policy(&config, ToolCapabilities::default());
        assert!(plain.retry_on.contains(&ToolErrorKind::Timeout));
        let caps = ToolCapabilities {
            deterministic_timeouts: true,
            ..ToolCapabilities::default()
        };
        let policy = retry_policy(&config, caps);
        assert!(!policy.retry_on.contains(&ToolErrorKind::Timeout));
        assert!(policy.retry_on.contains(&ToolErrorKind::ResourceError));
        assert_eq!(policy.max_retries, plain.max_retries);
    }

    #[test]
    fn a_failure_keeps_what_is_known_of_the_data() {
        let call = ToolCall::new("call_1", "t", Value::Null);
        let mut state = CallState {
            level: OutputLevel::Standard,
            retries: 2,
            cached: false,
            facts: DataFacts {
                size: 10,
                hash: Some("ab".into()),
                summary: Some("2 rows".into()),
            },
        };
        let failed = ToolError::resource("disk full").with_code(ToolErrorCode::SpillFailed);
        let (r, spilled) = into_result(&call, Err(failed), &mut state, 7);
        assert!(!r.success && !spilled);
        let error = r.error.as_ref().unwrap();
        assert_eq!(error.code, "SPILL_FAILED");
        assert_eq!((r.retry_count, r.duration_ms), (2, 7));
        assert_eq!(
            (
                r.data_size_bytes,
                r.data_hash.as_deref(),
                r.data_summary.as_deref()
            ),
            (10, Some("ab"), Some("2 rows"))
        );
        assert!(
            r.observation.contains("Error Code: SPILL_FAILED"),
            "{}",
            r.observation
        );
        let rendered = Rendered {
            observation: "ok".into(),
            data_ref: Some("data_001".into()),
            spilled: true,
        };
        let (r, spilled) = into_result(&call, Ok(rendered), &mut state, 3);
        assert!(r.success && spilled);
        assert_eq!(r.output_level, OutputLevel::Standard);
        assert_eq!(r.data_ref.as_deref(), Some("data_001"));
    }
}

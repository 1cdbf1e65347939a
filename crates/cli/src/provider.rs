//! The model provider of the configuration: the client (`provider`, `base_url`, the key, the
//! HTTP bounds, `compat`, `context_editing`), its default model, and the context budget, which
//! hands the clearing of old tool results to the provider when `context_editing` asks it to.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use ba_context::ContextBudget;
use ba_model::{
    AnthropicClient, ApiKey, ContextEditing, HttpConfig, MIN_COMPACTION_TRIGGER, ModelClient,
    OpenAiClient, ReplayClient, ResponsesClient,
};

use crate::config::{Config, env};

/// The model providers a configuration names (`provider:`), by their names there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    Anthropic,
    OpenAi,
    OpenAiResponses,
    Replay,
}

impl Provider {
    /// Every provider, in the order messages list them.
    pub(crate) const ALL: [Self; 4] = [
        Self::Anthropic,
        Self::OpenAi,
        Self::OpenAiResponses,
        Self::Replay,
    ];

    /// The name the configuration and `BA_AGENT_PROVIDER` use.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::OpenAiResponses => "openai-responses",
            Self::Replay => "replay",
        }
    }

    /// The provider named `name`, or an error listing the names there are.
    pub(crate) fn parse(name: &str) -> anyhow::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| anyhow!("unknown provider `{name}`: expected {}", Self::names()))
    }

    /// `anthropic, openai, openai-responses or replay`.
    fn names() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|p| p.as_str()).collect();
        match names.split_last() {
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Config {
    /// Timeouts and size bounds of the HTTP providers: the configuration's, or the defaults.
    pub(crate) fn http(&self) -> HttpConfig {
        let mut http = HttpConfig::default();
        if let Some(s) = self.request_timeout_secs {
            http = http.with_request_timeout(Duration::from_secs(s));
        }
        if let Some(s) = self.stream_idle_timeout_secs {
            http = http.with_idle_timeout(Duration::from_secs(s));
        }
        if let Some(s) = self.call_timeout_secs {
            http = http.with_call_timeout(Duration::from_secs(s));
        }
        if let Some(b) = self.max_response_bytes {
            http = http.with_max_response_bytes(b);
        }
        http
    }

    /// The model client; a replay client starts after `played` turns.
    pub(crate) fn client(&self, played: usize) -> anyhow::Result<Arc<dyn ModelClient>> {
        let name = self.provider.as_deref().ok_or_else(|| {
            anyhow!(
                "no model provider: set BA_AGENT_PROVIDER ({}) or `provider` in the \
                 configuration, with the provider's API key in its environment variable; \
                 `ba-agent demo` runs without any",
                Provider::names()
            )
        })?;
        let provider = Provider::parse(name)?;
        let key = self.api_key.clone().map(ApiKey::new);
        let compat = self.compat == Some(true);
        if self.context_editing.is_some() && provider != Provider::Anthropic {
            bail!("context_editing: only the anthropic provider edits context, not `{provider}`");
        }
        if let Some(tokens) = self
            .context_editing
            .as_ref()
            .and_then(|e| e.compact.as_ref())
            .and_then(|c| c.trigger_tokens)
            .filter(|t| *t < MIN_COMPACTION_TRIGGER)
        {
            bail!(
                "context_editing.compact.trigger_tokens: the API compacts from {MIN_COMPACTION_TRIGGER} input tokens, not {tokens}"
            );
        }
        if compat && provider != Provider::OpenAi {
            bail!("compat: only the openai provider has a compat profile, not `{provider}`");
        }
        Ok(match provider {
            Provider::Anthropic => {
                let client = match key {
                    Some(k) => AnthropicClient::new(k)?,
                    None => AnthropicClient::from_env()?,
                }
                .with_http(self.http());
                let client = match self.context_editing() {
                    Some(editing) => client.with_context_editing(editing),
                    None => client,
                };
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            Provider::OpenAi => {
                let client = match key {
                    Some(k) => OpenAiClient::new(Some(k))?,
                    // A local server wants no key.
                    None if compat && env(OpenAiClient::KEY_VAR).is_none() => {
                        OpenAiClient::new(None)?
                    }
                    None => OpenAiClient::from_env()?,
                }
                .with_http(self.http())
                .with_compat(
                    compat
                        .then(ba_model::OpenAiCompat::server)
                        .unwrap_or_default(),
                )
                // An answer without usage is counted with the model's tokenizer.
                .with_token_counter(Arc::new(
                    ba_context::ModelTokenizer::for_model(&self.default_model()).unwrap_or_else(
                        || ba_context::ModelTokenizer::exact(ba_context::Encoding::Cl100kBase),
                    ),
                ));
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            Provider::OpenAiResponses => {
                let client = match key {
                    Some(k) => ResponsesClient::new(Some(k))?,
                    None => ResponsesClient::from_env()?,
                }
                .with_http(self.http());
                match &self.base_url {
                    Some(url) => Arc::new(client.with_base_url(url.clone())?),
                    None => Arc::new(client),
                }
            }
            Provider::Replay => {
                let path = self.replay.as_ref().ok_or_else(|| {
                    anyhow!("the replay provider needs `replay: FILE` in the configuration")
                })?;
                Arc::new(ReplayClient::from_file(path)?.with_played(played))
            }
        })
    }

    pub(crate) fn default_model(&self) -> String {
        let provider = self
            .provider
            .as_deref()
            .and_then(|p| Provider::parse(p).ok());
        match (&self.model, provider) {
            (Some(m), _) => m.clone(),
            (None, Some(Provider::OpenAi)) => "gpt-4o".to_owned(),
            (None, Some(Provider::OpenAiResponses)) => "gpt-5".to_owned(),
            (None, _) => "claude-sonnet-4-5".to_owned(),
        }
    }

    /// The context budget: `context_window` and `reserve` over `default`. With
    /// `context_editing` the provider clears old tool results at the budget's trigger, and the
    /// agent's own strategies run only when a request would not fit at all.
    pub(crate) fn budget(&self, default: ContextBudget) -> ContextBudget {
        let budget = self.window(default);
        match &self.context_editing {
            Some(_) => budget.with_thresholds(1.0, budget.target),
            None => budget,
        }
    }

    /// `context_window` and `reserve` over `default`, as the agent's own strategies see them;
    /// without `context_window`, the window the server said it serves.
    fn window(&self, default: ContextBudget) -> ContextBudget {
        match (self.context_window, self.served_window) {
            (Some(total), _) => ContextBudget::new(total, self.reserve.unwrap_or(total / 16)),
            // A local server's window is small: a sixteenth would cut every answer short, so
            // a quarter of it, up to 4096 tokens, is kept for the answer.
            (None, Some(total)) => ContextBudget::new(
                total,
                self.reserve
                    .unwrap_or_else(|| (total / 4).min(4096).max(total / 16)),
            ),
            (None, None) => default,
        }
    }

    /// Asks the model's server for its window when the configuration gives none (llama.cpp's
    /// `/props`, a model list's metadata) and keeps it in `served_window`; says on stderr
    /// which window the requests are sized to when it is neither given nor served.
    pub(crate) async fn learn_window(&mut self, client: &dyn ModelClient) {
        if self.context_window.is_some() || self.served_window.is_some() {
            return;
        }
        let model = self.default_model();
        match client.context_window(&model).await {
            Some(n) => {
                self.served_window = usize::try_from(n).ok();
                tracing::info!(window = n, model = %model, "context window served by the model's server");
            }
            // Only a server of one's own is expected to say; the public APIs' windows are
            // the defaults' business.
            None if self.base_url.is_some() => {
                let default = ba_agent::AgentSettings::default().budget.total;
                eprintln!(
                    "note: the server at {} did not say its context window; requests are sized \
                     to {default} tokens (set context_window in the configuration)",
                    self.base_url.as_deref().unwrap_or_default()
                );
            }
            None => {}
        }
    }

    /// `context_editing` as sent: its triggers, when not given, are where the agent's own
    /// strategies would have started (compaction's no lower than the API's least trigger).
    /// Compaction set alone clears no tool results, so it gets no clearing trigger.
    fn context_editing(&self) -> Option<ContextEditing> {
        let mut editing = self.context_editing.clone()?;
        let ours = self
            .window(ba_agent::AgentSettings::default().budget)
            .trigger_tokens() as u64;
        if let Some(compact) = editing.compact.take() {
            let compact = match compact.trigger_tokens {
                Some(_) => compact,
                None => compact.with_trigger_tokens(ours.max(MIN_COMPACTION_TRIGGER)),
            };
            editing = editing.with_compaction(compact);
        }
        if editing.trigger_tokens.is_some() || !editing.clears_tool_results() {
            return Some(editing);
        }
        Some(editing.with_trigger_tokens(ours))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        match serde_yaml_ng::from_str(yaml) {
            Ok(config) => config,
            Err(e) => panic!("{yaml}: {e}"),
        }
    }

    fn client_error(yaml: &str) -> String {
        match config(yaml).client(0) {
            Ok(client) => panic!("{yaml}: a {} client", client.provider()),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn context_editing_hands_the_trigger_to_the_provider() {
        let plain = config("provider: anthropic\ncontext_window: 100000\n");
        let ours = plain.budget(ContextBudget::new(1, 0));
        assert!((ours.trigger - 0.8).abs() < 1e-9);
        assert!(plain.context_editing().is_none());
        let edited = config(
            "provider: anthropic\ncontext_window: 100000\ncontext_editing: {keep_tool_uses: 3}\n",
        );
        // The provider clears where our strategies would have started; ours only keep the
        // request within the window.
        let editing = edited.context_editing().unwrap();
        assert_eq!(
            editing.trigger_tokens,
            Some(ours.trigger_tokens() as u64),
            "{editing:?}"
        );
        assert_eq!(editing.keep_tool_uses, Some(3));
        let budget = edited.budget(ContextBudget::new(1, 0));
        assert!((budget.trigger - 1.0).abs() < 1e-9);
        assert_eq!(budget.total, 100_000);
        // A trigger given is kept.
        let given = config("provider: anthropic\ncontext_editing: {trigger_tokens: 5000}\n");
        assert_eq!(given.context_editing().unwrap().trigger_tokens, Some(5000));
        // Compaction alone: no clearing trigger, its own where ours would start, and our
        // strategies only keep the request within the window.
        let compact = config(
            "provider: anthropic\ncontext_window: 200000\ncontext_editing:\n  compact: {instructions: Keep every figure.}\n",
        );
        let editing = compact.context_editing().unwrap();
        assert_eq!(editing.trigger_tokens, None);
        assert!(!editing.clears_tool_results());
        let ours = compact.window(ContextBudget::new(1, 0)).trigger_tokens() as u64;
        let server = editing.compact.clone().unwrap();
        assert_eq!(server.trigger_tokens, Some(ours));
        assert_eq!(server.instructions.as_deref(), Some("Keep every figure."));
        assert!((compact.budget(ContextBudget::new(1, 0)).trigger - 1.0).abs() < 1e-9);
        // A small window still compacts no earlier than the API allows.
        let small =
            config("provider: anthropic\ncontext_window: 32000\ncontext_editing: {compact: {}}\n");
        assert_eq!(
            small
                .context_editing()
                .unwrap()
                .compact
                .unwrap()
                .trigger_tokens,
            Some(MIN_COMPACTION_TRIGGER)
        );
        let e = client_error(
            "provider: anthropic\napi_key: k\ncontext_editing: {compact: {trigger_tokens: 30000}}\n",
        );
        assert!(
            e.contains("compact.trigger_tokens") && e.contains("50000"),
            "{e}"
        );
    }

    #[test]
    fn each_provider_option_is_refused_with_another_provider() {
        let e = client_error("provider: openai\napi_key: k\ncontext_editing: {}\n");
        assert!(
            e.contains("context_editing") && e.contains("`openai`"),
            "{e}"
        );
        let e = client_error("provider: openai-responses\napi_key: k\ncompat: true\n");
        assert!(
            e.contains("compat") && e.contains("`openai-responses`"),
            "{e}"
        );
        let e = client_error("provider: open-ai\napi_key: k\n");
        assert_eq!(
            e,
            "unknown provider `open-ai`: expected anthropic, openai, openai-responses or replay"
        );
    }

    /// The names are the configuration's contract (`provider:`, `BA_AGENT_PROVIDER`): each
    /// one the README documents reads as its provider, and nothing else is listed.
    #[test]
    fn every_provider_is_found_by_its_documented_name() {
        let documented = ["anthropic", "openai", "openai-responses", "replay"];
        let names: Vec<&str> = Provider::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(names, documented);
        for name in documented {
            assert_eq!(Provider::parse(name).map(Provider::as_str).ok(), Some(name));
        }
    }

    #[test]
    fn the_responses_provider_builds_with_its_default_model() {
        let c = config("provider: openai-responses\napi_key: k\nbase_url: http://127.0.0.1:9/v1\n");
        assert_eq!(
            c.client(0).map(|c| c.provider().to_owned()).ok().as_deref(),
            Some("openai-responses")
        );
        assert_eq!(c.default_model(), "gpt-5");
        let compat = config("provider: openai\ncompat: true\nbase_url: http://127.0.0.1:9/v1\n");
        assert_eq!(
            compat
                .client(0)
                .map(|c| c.provider().to_owned())
                .ok()
                .as_deref(),
            Some("openai")
        );
    }
}

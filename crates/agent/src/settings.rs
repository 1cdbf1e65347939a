//! The settings of an agent, every one with a sensible default.

use std::path::PathBuf;
use std::time::Duration;

use ba_context::{BuilderSettings, ContextBudget};
use ba_protocol::PermissionLevel;
use serde::{Deserialize, Serialize};

/// How the model is asked to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseMode {
    /// Native tool calling; the final answer is plain text (markdown or HTML).
    #[default]
    Native,
    /// The structured JSON reply format: every answer is one JSON object whose action is a
    /// tool call or the complete report. Native tool calls are accepted too.
    Structured,
}

/// The settings of an agent; every field has a sensible default.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    /// The model asked (a skill's `model` overrides it while the skill is active).
    pub model: String,
    /// Rounds (model calls) one run may make.
    pub max_rounds: u32,
    /// Output cap of a call.
    pub max_tokens: u32,
    /// Thinking budget; `None` leaves thinking off.
    pub thinking_budget: Option<u32>,
    /// Whether calls stream (deltas become events).
    pub stream: bool,
    /// Native or structured answers.
    pub response_mode: ResponseMode,
    /// The context budget.
    pub budget: ContextBudget,
    /// The compression strategy (see [`ba_context::STRATEGY_NAMES`]).
    pub strategy: String,
    /// The share of the window the `retrieval` strategy's recalled passages may take (0 to
    /// 0.5; 0.1 by default).
    pub retrieval_share: f64,
    /// The context builder's settings.
    pub builder: BuilderSettings,
    /// Tokens of one active skill's instructions put back after a compression, at most.
    pub skill_reinject_tokens: usize,
    /// Tokens of all re-injected instructions, at most.
    pub skill_reinject_total: usize,
    /// The permission level tools are called with.
    pub permission_level: PermissionLevel,
    /// Where spilled tool data goes when no data sink is configured.
    pub storage_dir: Option<PathBuf>,
    /// Times a malformed structured answer is sent back for a fix before it is taken as
    /// plain text.
    pub format_retries: u32,
    /// How often a run looks in the store for a cancel request from another process.
    pub cancel_poll: Duration,
    /// Who runs, as a lease names it to anyone refused (`ba-agent serve`); the process id and
    /// host are added.
    pub holder: String,
    /// Which tool calls wait for a person's approval.
    pub approvals: crate::ApprovalSettings,
    /// Prices per model, for the cost in the metrics report and under each answer (none by
    /// default: tokens are reported, money is not guessed).
    pub prices: crate::Prices,
    /// Spending caps of a conversation and of a person's month (none by default).
    pub budgets: crate::Budgets,
    /// Which tools a request sends and which it leaves for the tool search.
    pub tool_search: crate::ToolSearchSettings,
    /// Memory across conversations: `None` (the default) offers no `memory` tool and puts no
    /// index in the system prompt; otherwise whether the model's changes wait for a person.
    pub memory: Option<crate::MemoryMode>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            model: "claude-sonnet-4-5".to_owned(),
            max_rounds: 20,
            max_tokens: 4096,
            thinking_budget: None,
            stream: true,
            response_mode: ResponseMode::Native,
            budget: ContextBudget::new(200_000, 8_192),
            strategy: "key-messages".to_owned(),
            retrieval_share: 0.10,
            builder: BuilderSettings::default(),
            skill_reinject_tokens: 2_000,
            skill_reinject_total: 6_000,
            permission_level: PermissionLevel::Default,
            storage_dir: None,
            format_retries: 2,
            cancel_poll: Duration::from_secs(1),
            holder: "ba-agent".to_owned(),
            approvals: crate::ApprovalSettings::default(),
            prices: crate::Prices::default(),
            budgets: crate::Budgets::default(),
            tool_search: crate::ToolSearchSettings::default(),
            memory: None,
        }
    }
}

/// The environment variables every front end (the command line, the Python package) reads
/// over its configuration file, each winning over the file's key: `BA_AGENT_PROVIDER`,
/// `BA_AGENT_MODEL`, `BA_AGENT_BASE_URL`, `BA_AGENT_HOME` and `BA_AGENT_COMPAT` (`1`, `true`,
/// `0` or `false`). A variable that is unset or blank leaves the file's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvOverrides {
    /// `BA_AGENT_PROVIDER`.
    pub provider: Option<String>,
    /// `BA_AGENT_MODEL`.
    pub model: Option<String>,
    /// `BA_AGENT_BASE_URL`.
    pub base_url: Option<String>,
    /// `BA_AGENT_HOME`.
    pub home: Option<PathBuf>,
    /// `BA_AGENT_COMPAT`.
    pub compat: Option<bool>,
}

impl EnvOverrides {
    /// The overrides of this process's environment; an error names a variable whose value
    /// cannot be read.
    pub fn read() -> Result<Self, crate::AgentError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The overrides `lookup` gives (a variable's value by its name).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, crate::AgentError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let compat = match get("BA_AGENT_COMPAT") {
            None => None,
            Some(v) => Some(match v.trim().to_ascii_lowercase().as_str() {
                "1" | "true" => true,
                "0" | "false" => false,
                _ => {
                    return Err(crate::AgentError::Config {
                        message: format!(
                            "BA_AGENT_COMPAT: expected 1, true, 0 or false, found `{v}`"
                        ),
                    });
                }
            }),
        };
        Ok(Self {
            provider: get("BA_AGENT_PROVIDER"),
            model: get("BA_AGENT_MODEL"),
            base_url: get("BA_AGENT_BASE_URL"),
            home: get("BA_AGENT_HOME").map(PathBuf::from),
            compat,
        })
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Result<EnvOverrides, String> {
        EnvOverrides::from_lookup(|name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn set_variables_override_and_blank_ones_do_not() {
        let o = from(&[
            ("BA_AGENT_PROVIDER", "openai"),
            ("BA_AGENT_MODEL", "  "),
            ("BA_AGENT_HOME", "/srv/agent"),
            ("BA_AGENT_COMPAT", "TRUE"),
        ])
        .unwrap_or_default();
        assert_eq!(o.provider.as_deref(), Some("openai"));
        assert_eq!(o.model, None);
        assert_eq!(o.base_url, None);
        assert_eq!(o.home, Some(PathBuf::from("/srv/agent")));
        assert_eq!(o.compat, Some(true));
        assert_eq!(
            from(&[("BA_AGENT_COMPAT", "0")]).map(|o| o.compat),
            Ok(Some(false))
        );
    }

    #[test]
    fn a_compat_value_that_is_no_boolean_is_named() {
        let e = from(&[("BA_AGENT_COMPAT", "yes")])
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("BA_AGENT_COMPAT: expected 1, true, 0 or false, found `yes`"),
            "{e}"
        );
    }
}

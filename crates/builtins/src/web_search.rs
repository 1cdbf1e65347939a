//! `web_search`: searches the web through a pluggable backend (seed 003).
//!
//! There is no default backend: the tool is registered only when one is configured, so a
//! deployment without a search provider never shows the model a tool that cannot work.

use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::OutputLevel;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::BuiltinError;

/// The tool name.
pub const NAME: &str = "web_search";

/// The description shown to the model.
pub const DESCRIPTION: &str = "Search the web and return titles, URLs and snippets.";

fn default_num_results() -> usize {
    10
}

/// Arguments of `web_search` (seed 003).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// Search keywords.
    pub query: String,
    /// How many results to return (default 10).
    #[serde(default = "default_num_results")]
    pub num_results: usize,
    /// How detailed the answer should be: brief, standard or full.
    #[serde(default)]
    pub response_format: OutputLevel,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SearchHit {
    /// Page title.
    pub title: String,
    /// Page URL.
    pub url: String,
    /// A short extract.
    pub snippet: String,
}

/// Why a backend failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchFailure {
    /// What happened.
    pub message: String,
    /// Whether a retry may succeed (rate limits, outages).
    pub retryable: bool,
}

impl fmt::Display for SearchFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A search provider.
#[async_trait]
pub trait SearchBackend: Send + Sync + fmt::Debug {
    /// A short name for errors and metrics.
    fn name(&self) -> &str;

    /// Up to `num_results` results for `query`.
    async fn search(
        &self,
        query: &str,
        num_results: usize,
    ) -> Result<Vec<SearchHit>, SearchFailure>;
}

#[async_trait]
impl<T: SearchBackend + ?Sized> SearchBackend for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    async fn search(
        &self,
        query: &str,
        num_results: usize,
    ) -> Result<Vec<SearchHit>, SearchFailure> {
        (**self).search(query, num_results).await
    }
}

#[async_trait]
impl<T: SearchBackend + ?Sized> SearchBackend for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    async fn search(
        &self,
        query: &str,
        num_results: usize,
    ) -> Result<Vec<SearchHit>, SearchFailure> {
        (**self).search(query, num_results).await
    }
}

fn _object_safe(_: &dyn SearchBackend) {}

/// The `web_search` tool.
#[derive(Debug, Clone)]
pub struct WebSearch {
    backend: Arc<dyn SearchBackend>,
    max_results: usize,
}

impl WebSearch {
    /// A tool searching with `backend`, at most 50 results a call.
    pub fn new(backend: Arc<dyn SearchBackend>) -> Self {
        Self {
            backend,
            max_results: 50,
        }
    }

    /// Changes the ceiling on `num_results`.
    pub fn with_max_results(mut self, max_results: usize) -> Self {
        self.max_results = max_results;
        self
    }

    /// The JSON Schema of the arguments.
    pub fn schema() -> Value {
        super::args_schema::<WebSearchArgs>()
    }

    /// Parses `args` and runs.
    pub async fn call_json(&self, args: Value) -> Result<Value, BuiltinError> {
        self.run(super::parse_args(NAME, args)?).await
    }

    /// Searches and returns `query`, `results` and `result_count`.
    pub async fn run(&self, args: WebSearchArgs) -> Result<Value, BuiltinError> {
        let query = args.query.trim();
        if query.is_empty() {
            return Err(BuiltinError::InvalidArguments {
                tool: NAME,
                message: "query must not be empty".into(),
            });
        }
        let wanted = args.num_results.clamp(1, self.max_results.max(1));
        let mut hits = self
            .backend
            .search(query, wanted)
            .await
            .map_err(|failure| BuiltinError::Search {
                backend: self.backend.name().to_owned(),
                message: failure.message,
                retryable: failure.retryable,
            })?;
        // A backend that returns more than asked must not blow the model's context.
        hits.truncate(wanted);
        Ok(json!({
            "query": query,
            "backend": self.backend.name(),
            "result_count": hits.len(),
            "results": hits,
        }))
    }
}

#[async_trait::async_trait]
impl Tool for WebSearch {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        Self::schema()
    }

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        Ok(self.call_json(input).await?)
    }

    fn capabilities(&self) -> ToolCapabilities {
        // Results change over time and a search reaches outside: the defaults.
        ToolCapabilities::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug, Default)]
    struct Fixed {
        asked: Mutex<Vec<(String, usize)>>,
        fail: bool,
    }

    #[async_trait]
    impl SearchBackend for Fixed {
        fn name(&self) -> &str {
            "fixed"
        }

        async fn search(
            &self,
            query: &str,
            num_results: usize,
        ) -> Result<Vec<SearchHit>, SearchFailure> {
            self.asked
                .lock()
                .unwrap()
                .push((query.to_owned(), num_results));
            if self.fail {
                return Err(SearchFailure {
                    message: "rate limited".into(),
                    retryable: true,
                });
            }
            Ok((0..20)
                .map(|i| SearchHit {
                    title: format!("t{i}"),
                    url: format!("https://example.com/{i}"),
                    snippet: String::new(),
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn defaults_to_ten_results_and_caps_backend_output() {
        let backend = Arc::new(Fixed::default());
        let tool = WebSearch::new(backend.clone());
        let out = tool
            .call_json(json!({"query": " sales trends "}))
            .await
            .unwrap();
        assert_eq!(out["result_count"], 10);
        assert_eq!(out["results"][9]["url"], "https://example.com/9");
        let out = tool
            .call_json(json!({"query": "x", "num_results": 3}))
            .await
            .unwrap();
        assert_eq!(out["result_count"], 3);
        let asked = backend.asked.lock().unwrap().clone();
        assert_eq!(
            asked,
            [("sales trends".to_owned(), 10), ("x".to_owned(), 3)]
        );
    }

    #[tokio::test]
    async fn failures_keep_their_retryability() {
        let tool = WebSearch::new(Arc::new(Fixed {
            fail: true,
            ..Fixed::default()
        }));
        let err = tool.call_json(json!({"query": "x"})).await.unwrap_err();
        assert!(err.kind().is_retryable(), "{err}");
        assert!(err.to_string().contains("fixed"), "{err}");
        let err = tool.call_json(json!({"query": "  "})).await.unwrap_err();
        assert_eq!(err.kind(), ba_protocol::ToolErrorKind::InvalidParameters);
    }
}

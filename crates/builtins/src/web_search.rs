//! `web_search`: searches the web through a pluggable backend.
//!
//! There is no default backend: the tool is registered only when one is configured, so a
//! deployment without a search provider never shows the model a tool that cannot work. Two
//! backends come with it: [`SearxngBackend`] (a self-hosted SearXNG instance's JSON API, no
//! key) and [`BraveBackend`] (the Brave Search API, keyed).

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

/// Arguments of `web_search`.
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

/// How long one backend request may take.
const SEARCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

fn http_client() -> Result<reqwest::Client, BuiltinError> {
    reqwest::Client::builder()
        .timeout(SEARCH_TIMEOUT)
        .user_agent(concat!("ba-agent/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| BuiltinError::Environment {
            tool: NAME,
            message: format!("cannot build the HTTP client: {err}"),
        })
}

fn base_url(url: &str) -> Result<reqwest::Url, BuiltinError> {
    reqwest::Url::parse(url).map_err(|err| BuiltinError::InvalidArguments {
        tool: NAME,
        message: format!("search backend URL `{url}` is not valid: {err}"),
    })
}

/// Sends `request` and parses the JSON answer, classifying failures for the retry policy.
async fn fetch_json(request: reqwest::RequestBuilder) -> Result<Value, SearchFailure> {
    let response = request.send().await.map_err(|err| SearchFailure {
        message: format!("request failed: {err}"),
        retryable: err.is_connect() || err.is_timeout(),
    })?;
    let status = response.status();
    if !status.is_success() {
        let why = match status.as_u16() {
            401 | 403 => " (the API key was refused, or JSON output is disabled on the server)",
            429 => " (rate limited)",
            _ => "",
        };
        return Err(SearchFailure {
            message: format!("the server answered {status}{why}"),
            retryable: status.as_u16() == 429 || status.is_server_error(),
        });
    }
    response.json::<Value>().await.map_err(|err| SearchFailure {
        message: format!("the answer is not the expected JSON: {err}"),
        retryable: false,
    })
}

fn hits(items: Option<&Vec<Value>>, snippet_key: &str, limit: usize) -> Vec<SearchHit> {
    let text = |v: &Value, k: &str| {
        let raw = v.get(k).and_then(Value::as_str).unwrap_or_default();
        // Snippets carry highlighting markup (`<strong>`); the reader wants the words.
        crate::html::html_to_markdown(raw, None).1.replace("**", "")
    };
    items
        .map(|items| {
            items
                .iter()
                .filter(|v| v.get("url").and_then(Value::as_str).is_some())
                .take(limit)
                .map(|v| SearchHit {
                    title: text(v, "title"),
                    url: v["url"].as_str().unwrap_or_default().to_owned(),
                    snippet: text(v, snippet_key),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A self-hosted SearXNG instance, through its JSON API (`/search?q=…&format=json`; the
/// instance must list `json` among its `search.formats`). No key.
#[derive(Debug, Clone)]
pub struct SearxngBackend {
    client: reqwest::Client,
    endpoint: reqwest::Url,
}

impl SearxngBackend {
    /// The instance at `base` (e.g. `http://127.0.0.1:8888`).
    pub fn new(base: &str) -> Result<Self, BuiltinError> {
        let mut endpoint = base_url(base)?;
        let path = format!("{}/search", endpoint.path().trim_end_matches('/'));
        endpoint.set_path(&path);
        Ok(Self {
            client: http_client()?,
            endpoint,
        })
    }
}

#[async_trait]
impl SearchBackend for SearxngBackend {
    fn name(&self) -> &str {
        "searxng"
    }

    async fn search(
        &self,
        query: &str,
        num_results: usize,
    ) -> Result<Vec<SearchHit>, SearchFailure> {
        let request = self
            .client
            .get(self.endpoint.clone())
            .query(&[("q", query), ("format", "json")]);
        let body = fetch_json(request).await?;
        Ok(hits(
            body.get("results").and_then(Value::as_array),
            "content",
            num_results,
        ))
    }
}

/// The Brave Search API (`X-Subscription-Token`). The key is never shown in `Debug`.
#[derive(Clone)]
pub struct BraveBackend {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    key: String,
}

impl fmt::Debug for BraveBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BraveBackend")
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

impl BraveBackend {
    /// The public API endpoint.
    pub const ENDPOINT: &str = "https://api.search.brave.com/res/v1/web/search";

    /// Searches with `key` at `endpoint` (default [`Self::ENDPOINT`]).
    pub fn new(key: impl Into<String>, endpoint: Option<&str>) -> Result<Self, BuiltinError> {
        Ok(Self {
            client: http_client()?,
            endpoint: base_url(endpoint.unwrap_or(Self::ENDPOINT))?,
            key: key.into(),
        })
    }
}

#[async_trait]
impl SearchBackend for BraveBackend {
    fn name(&self) -> &str {
        "brave"
    }

    async fn search(
        &self,
        query: &str,
        num_results: usize,
    ) -> Result<Vec<SearchHit>, SearchFailure> {
        // The API returns at most 20 results a request.
        let count = num_results.clamp(1, 20).to_string();
        let request = self
            .client
            .get(self.endpoint.clone())
            .query(&[("q", query), ("count", count.as_str())])
            .header("Accept", "application/json")
            .header("X-Subscription-Token", &self.key);
        let body = fetch_json(request).await?;
        Ok(hits(
            body.pointer("/web/results").and_then(Value::as_array),
            "description",
            num_results,
        ))
    }
}

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
    async fn searxng_and_brave_speak_their_apis() {
        use ba_testkit::{MockServer, Reply};
        let searx = MockServer::start(vec![
            Reply::json(
                200,
                r#"{"results": [{"title": "Q3 <b>sales</b>", "url": "https://a.example/1",
                   "content": "West grew"}, {"title": "no url"},
                   {"title": "B", "url": "https://b.example/", "content": ""}]}"#,
            ),
            Reply::json(503, "{}"),
        ])
        .await;
        let tool = WebSearch::new(Arc::new(SearxngBackend::new(&searx.base_url).unwrap()));
        let out = tool
            .call_json(json!({"query": "west sales", "num_results": 5}))
            .await
            .unwrap();
        assert_eq!(out["backend"], "searxng");
        assert_eq!(out["result_count"], 2);
        assert_eq!(
            out["results"][0],
            json!({"title": "Q3 sales", "url": "https://a.example/1", "snippet": "West grew"})
        );
        let asked = &searx.received()[0];
        assert_eq!(asked.method, "GET");
        assert_eq!(asked.path, "/search?q=west+sales&format=json");
        let err = tool.call_json(json!({"query": "x"})).await.unwrap_err();
        assert!(err.kind().is_retryable(), "{err}");

        let brave = MockServer::start(vec![
            Reply::json(
                200,
                r#"{"web": {"results": [{"title": "T", "url": "https://c.example/",
                   "description": "a <strong>b</strong>"}]}}"#,
            ),
            Reply::json(401, r#"{"error": "bad key"}"#),
        ])
        .await;
        let backend = BraveBackend::new(
            "k-123",
            Some(&format!("{}/res/v1/web/search", brave.base_url)),
        )
        .unwrap();
        assert!(!format!("{backend:?}").contains("k-123"));
        let tool = WebSearch::new(Arc::new(backend));
        let out = tool
            .call_json(json!({"query": "q", "num_results": 50}))
            .await
            .unwrap();
        assert_eq!(out["results"][0]["snippet"], "a b");
        let asked = &brave.received()[0];
        assert_eq!(asked.path, "/res/v1/web/search?q=q&count=20");
        assert_eq!(asked.header("x-subscription-token"), Some("k-123"));
        let err = tool.call_json(json!({"query": "q"})).await.unwrap_err();
        assert!(!err.kind().is_retryable(), "{err}");
        assert!(err.to_string().contains("API key was refused"), "{err}");
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

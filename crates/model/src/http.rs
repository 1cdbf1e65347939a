//! HTTP plumbing shared by the provider clients: keys, timeouts, sending with retries, and
//! reading provider error bodies.

use std::fmt;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::error::{ModelError, TimeoutPhase};
use super::retry::{RetryPolicy, retry_after_of};

/// An API key. It is never shown: `Debug` prints `ApiKey(<redacted>)` and there is no
/// `Display`, so a key cannot reach a log line by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key given in the configuration.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key in the environment variable `var`, for `provider` (named in the error).
    pub fn from_env(var: &str, provider: &str) -> Result<Self, ModelError> {
        match std::env::var(var) {
            Ok(key) if !key.trim().is_empty() => Ok(Self(key.trim().to_owned())),
            _ => Err(ModelError::MissingApiKey {
                provider: provider.to_owned(),
                var: var.to_owned(),
            }),
        }
    }

    pub(crate) fn header_value(
        &self,
        prefix: &str,
        provider: &str,
    ) -> Result<reqwest::header::HeaderValue, ModelError> {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("{prefix}{}", self.0))
            .map_err(|_| ModelError::Config {
                provider: provider.to_owned(),
                message: "the API key holds characters that cannot go in an HTTP header".to_owned(),
            })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Timeouts, size bounds and retries of a provider client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpConfig {
    /// Limit on a whole non-streaming exchange, and on the wait for a stream's headers.
    pub request_timeout: Duration,
    /// Limit on the time between two pieces of a stream that carry progress: keep-alive
    /// pings and comments do not reset it.
    pub idle_timeout: Duration,
    /// Limit on a whole call: every attempt, the waits between them and the reading of the
    /// answer.
    pub call_timeout: Duration,
    /// The most bytes of an answer (a whole body, or a whole stream) read before the call
    /// fails; what came before is kept as its partial output.
    pub max_response_bytes: u64,
    /// When and how to retry.
    pub retry: RetryPolicy,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(90),
            call_timeout: Duration::from_secs(900),
            max_response_bytes: 32 * 1024 * 1024,
            retry: RetryPolicy::default(),
        }
    }
}

impl HttpConfig {
    /// Sets the request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the stream-idle timeout.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the limit on a whole call.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sets the most bytes of an answer read.
    pub fn with_max_response_bytes(mut self, bytes: u64) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

/// A reqwest client with the timeouts and retry policy of one provider.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    pub(crate) client: reqwest::Client,
    pub(crate) config: HttpConfig,
    pub(crate) provider: &'static str,
}

impl Transport {
    /// A transport for `base_url`, which must be an `http` or `https` URL. Loopback hosts are
    /// never sent through a proxy from the environment: a local server or mock is meant.
    pub(crate) fn new(
        provider: &'static str,
        config: HttpConfig,
        base_url: &str,
    ) -> Result<Self, ModelError> {
        let config_error = |message: String| ModelError::Config {
            provider: provider.to_owned(),
            message,
        };
        let url = reqwest::Url::parse(base_url)
            .map_err(|e| config_error(format!("base URL `{base_url}` is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(config_error(format!(
                "base URL `{base_url}` must start with http:// or https://"
            )));
        }
        let loopback = url.host_str().is_some_and(|host| {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        });
        let mut builder = reqwest::Client::builder();
        if loopback {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| config_error(e.to_string()))?;
        Ok(Self {
            client,
            config,
            provider,
        })
    }

    /// Sends a request built by `build` until it gets a success status, retrying transient
    /// failures. Returns the response (body unread), the retries made, the deadline of the
    /// successful attempt (which bounds the reading of a whole body too) and the deadline of the
    /// whole call (which bounds the reading of a stream).
    pub(crate) async fn send(
        &self,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(reqwest::Response, u32, Instant, Instant), ModelError> {
        let mut retry = 0u32;
        let call_deadline = Instant::now() + self.config.call_timeout;
        loop {
            let deadline = (Instant::now() + self.config.request_timeout).min(call_deadline);
            let outcome = tokio::time::timeout_at(deadline, build().send()).await;
            let mut provider_says_retry = None;
            let mut error = match outcome {
                Err(_) => ModelError::Timeout {
                    provider: self.provider.to_owned(),
                    phase: TimeoutPhase::Request,
                    after: self.config.request_timeout,
                    partial: None,
                },
                Ok(Err(e)) => ModelError::Network {
                    provider: self.provider.to_owned(),
                    message: describe(&e),
                },
                Ok(Ok(response)) if response.status().is_success() => {
                    return Ok((response, retry, deadline, call_deadline));
                }
                Ok(Ok(response)) => {
                    let (error, hint) = self.status_error(response, deadline).await;
                    provider_says_retry = hint;
                    error
                }
            };
            error.set_attempts(retry + 1);
            let wait = (provider_says_retry != Some(false))
                .then(|| self.config.retry.delay_for(&error, retry, rand::random()))
                .flatten();
            match wait.filter(|w| Instant::now() + *w < call_deadline) {
                Some(wait) => {
                    tracing::warn!(
                        provider = self.provider,
                        retry = retry + 1,
                        wait_ms = wait.as_millis() as u64,
                        error = %error,
                        "model call failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                    retry += 1;
                }
                None => return Err(error),
            }
        }
    }

    /// [`Transport::send`] of a JSON `body` posted to `url`, the key (if any: a local server
    /// may want none) as a bearer token — the OpenAI APIs' way.
    pub(crate) async fn send_bearer(
        &self,
        url: &str,
        key: Option<&ApiKey>,
        body: &serde_json::Value,
    ) -> Result<(reqwest::Response, u32, Instant, Instant), ModelError> {
        let key = match key {
            Some(key) => Some(key.header_value("Bearer ", self.provider)?),
            None => None,
        };
        self.send(|| {
            let builder = self.client.post(url).json(body);
            match &key {
                Some(key) => builder.header(reqwest::header::AUTHORIZATION, key.clone()),
                None => builder,
            }
        })
        .await
    }

    /// Whether an answer to a streamed request is a stream: anything but a JSON body is read
    /// as one (a server may leave the content type out), while a server that ignores `stream`
    /// and answers with one JSON body is read whole.
    pub(crate) fn streams(response: &reqwest::Response) -> bool {
        !response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            })
    }

    /// Reads a whole body before the attempt's deadline, at most `max_response_bytes` of it.
    pub(crate) async fn body_text(
        &self,
        response: reqwest::Response,
        deadline: Instant,
    ) -> Result<String, ModelError> {
        let limit = self.config.max_response_bytes;
        let read = async {
            let mut body = response;
            let mut bytes: Vec<u8> = Vec::new();
            while let Some(chunk) = body.chunk().await.map_err(|e| ModelError::Network {
                provider: self.provider.to_owned(),
                message: describe(&e),
            })? {
                if bytes.len() as u64 + chunk.len() as u64 > limit {
                    return Err(ModelError::TooLarge {
                        provider: self.provider.to_owned(),
                        limit,
                        partial: Box::default(),
                    });
                }
                bytes.extend_from_slice(&chunk);
            }
            String::from_utf8(bytes).map_err(|_| ModelError::InvalidResponse {
                provider: self.provider.to_owned(),
                message: "the response body is not valid UTF-8".to_owned(),
                partial: None,
            })
        };
        match tokio::time::timeout_at(deadline, read).await {
            Err(_) => Err(ModelError::Timeout {
                provider: self.provider.to_owned(),
                phase: TimeoutPhase::Request,
                after: self.config.request_timeout,
                partial: None,
            }),
            Ok(result) => result,
        }
    }

    /// The whole body read within the deadline and parsed as JSON; `what` names the expected
    /// document in the error (`a Messages response`).
    pub(crate) async fn body_json<T: serde::de::DeserializeOwned>(
        &self,
        response: reqwest::Response,
        deadline: Instant,
        what: &str,
    ) -> Result<T, ModelError> {
        let text = self.body_text(response, deadline).await?;
        serde_json::from_str(&text).map_err(|e| ModelError::InvalidResponse {
            provider: self.provider.to_owned(),
            message: format!("the response body is not {what}: {e}"),
            partial: None,
        })
    }

    /// The error of a failure status, and the provider's `x-should-retry` hint.
    async fn status_error(
        &self,
        response: reqwest::Response,
        deadline: Instant,
    ) -> (ModelError, Option<bool>) {
        let status = response.status().as_u16();
        let retry_after = retry_after_of(response.headers());
        let should_retry = response
            .headers()
            .get("x-should-retry")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.eq_ignore_ascii_case("true"));
        let body = tokio::time::timeout_at(deadline, response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let (error_type, message) = provider_error(&body);
        let provider = self.provider.to_owned();
        if let Some(overflow) = super::overflow::read(status, &body) {
            let error = ModelError::ContextOverflow {
                provider,
                limit: overflow.limit,
                requested: overflow.requested,
                message,
            };
            return (error, Some(false));
        }
        let error = match status {
            429 => ModelError::RateLimited {
                provider,
                message,
                retry_after,
                attempts: 1,
            },
            500..=599 => ModelError::Server {
                provider,
                status,
                message,
                attempts: 1,
                partial: None,
            },
            _ => ModelError::Rejected {
                provider,
                status,
                error_type,
                message,
            },
        };
        (error, should_retry)
    }
}

/// The most bytes of a server's description (`/props`, the model list) read.
const MAX_DESCRIPTION_BYTES: u64 = 1024 * 1024;

impl Transport {
    /// A JSON document from `url` by GET, read within a short bound and without retries: a
    /// server that has no such document, or says nothing readable, gives `None`.
    async fn description(&self, url: &str, key: Option<&ApiKey>) -> Option<Value> {
        let bound = self.config.request_timeout.min(Duration::from_secs(10));
        let deadline = Instant::now() + bound;
        let mut builder = self.client.get(url);
        if let Some(key) = key {
            builder = builder.header(
                reqwest::header::AUTHORIZATION,
                key.header_value("Bearer ", self.provider).ok()?,
            );
        }
        let response = tokio::time::timeout_at(deadline, builder.send())
            .await
            .ok()?
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let limited = Self {
            config: self.config.with_max_response_bytes(MAX_DESCRIPTION_BYTES),
            ..self.clone()
        };
        let text = limited.body_text(response, deadline).await.ok()?;
        serde_json::from_str(&text).ok()
    }

    /// The context window an OpenAI-compatible server at `base_url` gives `model`: llama.cpp's
    /// `/props` (the window it was started with), else the model list's metadata (vLLM's
    /// `max_model_len`, the `context_length` or `context_window` other servers give).
    pub(crate) async fn served_window(
        &self,
        base_url: &str,
        key: Option<&ApiKey>,
        model: &str,
    ) -> Option<u64> {
        // `/props` sits at the server's root, beside `/v1`.
        let root = base_url.strip_suffix("/v1").unwrap_or(base_url);
        if let Some(props) = self.description(&format!("{root}/props"), key).await
            && let Some(n) = props_window(&props)
        {
            return Some(n);
        }
        let models = self.description(&format!("{base_url}/models"), key).await?;
        models_window(&models, model)
    }
}

/// The window in llama.cpp's `/props`: the slots' `n_ctx`.
fn props_window(props: &Value) -> Option<u64> {
    props
        .get("default_generation_settings")
        .and_then(|s| s.get("n_ctx"))
        .or_else(|| props.get("n_ctx"))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
}

/// The window a model list gives `model` (or its only model).
fn models_window(models: &Value, model: &str) -> Option<u64> {
    let list = models
        .get("data")
        .or_else(|| models.get("models"))
        .and_then(Value::as_array)?;
    let entry = list
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (list.len() == 1).then(|| &list[0]))?;
    [
        "max_model_len",
        "context_length",
        "context_window",
        "max_context_length",
    ]
    .iter()
    .find_map(|k| entry.get(*k).and_then(Value::as_u64))
    .or_else(|| {
        entry
            .get("meta")
            .and_then(|m| m.get("n_ctx"))
            .and_then(Value::as_u64)
    })
    .filter(|n| *n > 0)
}

/// The error type and message of a provider error body (`{"error": {"type", "message"}}` for
/// Anthropic, `{"error": {"type"|"code", "message"}}` for OpenAI); the raw body otherwise.
pub(crate) fn provider_error(body: &str) -> (String, String) {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let kind = error
        .and_then(|e| e.get("type").or_else(|| e.get("code")))
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    let message = message.unwrap_or_else(|| {
        let body = body.trim();
        if body.is_empty() {
            "(empty body)".to_owned()
        } else {
            body.chars().take(500).collect()
        }
    });
    (kind, message)
}

/// A reqwest error in words, with its causes (reqwest's own text is often just "error sending
/// request").
pub(crate) fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_never_shows_in_debug() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        let header = key.header_value("Bearer ", "openai").unwrap();
        assert!(header.is_sensitive());
        assert!(!format!("{header:?}").contains("secret"));
    }

    #[test]
    fn base_urls_are_checked() {
        assert!(Transport::new("p", HttpConfig::default(), "http://127.0.0.1:9").is_ok());
        assert!(Transport::new("p", HttpConfig::default(), "https://api.example.com/v1").is_ok());
        let err = Transport::new("p", HttpConfig::default(), "api.example.com").unwrap_err();
        assert!(err.to_string().contains("`api.example.com`"), "{err}");
        let err = Transport::new("p", HttpConfig::default(), "ftp://example.com").unwrap_err();
        assert!(err.to_string().contains("http://"), "{err}");
    }

    #[test]
    fn missing_key_names_the_variable() {
        let err = ApiKey::from_env("BA_AGENT_TEST_SURELY_UNSET_KEY", "anthropic").unwrap_err();
        assert!(err.to_string().contains("BA_AGENT_TEST_SURELY_UNSET_KEY"));
    }

    #[test]
    fn windows_are_read_from_props_and_model_lists() {
        let props = serde_json::json!({"default_generation_settings": {"n_ctx": 4096},
                                       "total_slots": 4});
        assert_eq!(props_window(&props), Some(4096));
        assert_eq!(props_window(&serde_json::json!({"n_ctx": 0})), None);
        let vllm = serde_json::json!({"object": "list", "data": [
            {"id": "a", "max_model_len": 32768}, {"id": "b", "max_model_len": 8192}]});
        assert_eq!(models_window(&vllm, "b"), Some(8192));
        assert_eq!(models_window(&vllm, "c"), None);
        // llama.cpp's list gives the training window only, which is not the server's.
        let llama = serde_json::json!({"data": [{"id": "m", "meta": {"n_ctx_train": 8192}}]});
        assert_eq!(models_window(&llama, "other-name"), None);
        let one = serde_json::json!({"data": [{"id": "m", "context_length": 131072}]});
        assert_eq!(models_window(&one, "other-name"), Some(131_072));
    }

    #[test]
    fn provider_error_bodies_are_read() {
        let (kind, message) = provider_error(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            (kind.as_str(), message.as_str()),
            ("overloaded_error", "Overloaded")
        );
        let (kind, message) = provider_error("<html>bad gateway</html>");
        assert_eq!(
            (kind.as_str(), message.as_str()),
            ("unknown", "<html>bad gateway</html>")
        );
    }
}

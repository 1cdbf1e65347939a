//! The one module that speaks rmcp: connecting, listing tools, calling one, the notifications
//! a client handles. Everything else in the crate sees JSON values and its own types, so an
//! rmcp upgrade touches this file only.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, Implementation, ListToolsRequest,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId,
    ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestHandle, RoleClient, RunningService,
    ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{Notify, mpsc};

use crate::framing::{LimitedLines, OversizeLog};
use crate::result::McpProgress;

/// Called with each progress notification of a call.
pub type ProgressFn = Arc<dyn Fn(&McpProgress) + Send + Sync>;

/// Progress notifications whose call has not registered yet (it registers right after sending).
const ORPHANS_KEPT: usize = 64;
/// Progress notifications queued for one call.
const PROGRESS_QUEUE: usize = 256;

/// What the server told the client outside of answers.
#[derive(Debug, Default)]
struct Shared {
    progress: Mutex<HashMap<ProgressToken, mpsc::Sender<McpProgress>>>,
    orphans: Mutex<VecDeque<(ProgressToken, McpProgress)>>,
    tools_changed: Arc<Notify>,
}

#[derive(Debug, Clone)]
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The last version with the `initialize` handshake: its servers send list-changed
        // notifications unasked, which newer versions send only on a listen stream.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("ba-agent", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let progress = McpProgress {
            progress: params.progress,
            total: params.total,
            message: params.message.map(|m| crate::result::bounded(&m, 1024)),
        };
        let sender = lock(&self.shared.progress)
            .get(&params.progress_token)
            .cloned();
        match sender {
            Some(sender) => {
                // A server flooding notifications loses the excess, not memory.
                let _ = sender.try_send(progress);
            }
            None => {
                let mut orphans = lock(&self.shared.orphans);
                if orphans.len() == ORPHANS_KEPT {
                    orphans.pop_front();
                }
                orphans.push_back((params.progress_token, progress));
            }
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.shared.tools_changed.notify_one();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a request failed, in the crate's terms.
#[derive(Debug)]
pub(crate) enum RequestFailure {
    /// No answer within the timeout; the request was cancelled.
    Timeout {
        after: Duration,
        last: Option<McpProgress>,
        count: u64,
    },
    /// The connection closed before the answer.
    Closed,
    /// The server answered with a JSON-RPC error.
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// The HTTP endpoint asked for authorization.
    NeedsAuth,
    /// The request could not be sent (a closed pipe, a refused connection).
    Transport(String),
    /// Anything else, as a sentence.
    Other(String),
}

fn from_service_error(e: ServiceError) -> RequestFailure {
    if e.is_authorization_required() {
        return RequestFailure::NeedsAuth;
    }
    match e {
        ServiceError::McpError(data) => RequestFailure::Rpc {
            code: i64::from(data.code.0),
            message: crate::result::bounded(&data.message, 4096),
            data: data.data,
        },
        ServiceError::TransportClosed => RequestFailure::Closed,
        ServiceError::TransportSend(e) => RequestFailure::Transport(format!(
            "cannot send the request: {}",
            error_chain(e.error.as_ref())
        )),
        ServiceError::UnexpectedResponse => {
            RequestFailure::Other("the server's answer has an unexpected shape".to_owned())
        }
        other => RequestFailure::Other(other.to_string()),
    }
}

/// Why a connection could not be made.
#[derive(Debug)]
pub(crate) enum ConnectFailure {
    /// The server closed the connection during the handshake (for stdio: it exited).
    Closed(String),
    /// The HTTP endpoint answered 401/403: OAuth, which is not supported.
    NeedsAuth,
    /// Anything else, as a sentence.
    Other(String),
}

/// A live connection to one server.
pub(crate) struct Connection {
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: Peer<RoleClient>,
    shared: Arc<Shared>,
    /// `name version` of the server, as it introduced itself.
    pub(crate) server_info: Option<String>,
    /// The protocol version agreed.
    pub(crate) protocol_version: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server_info", &self.server_info)
            .field("protocol_version", &self.protocol_version)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The MCP handshake over a child's stdio; messages over `max_message` bytes are cut.
    pub(crate) async fn stdio(
        stdout: ChildStdout,
        stdin: ChildStdin,
        max_message: usize,
        oversize: Arc<OversizeLog>,
    ) -> Result<Self, ConnectFailure> {
        let reader = LimitedLines::new(stdout, max_message, oversize);
        // rmcp's own cap stays above ours (newline and carriage return), so ours decides.
        let transport = AsyncRwTransport::new_client(reader, stdin)
            .with_max_line_length(max_message.saturating_add(2));
        Self::serve(transport).await
    }

    /// The MCP handshake with a streamable-HTTP endpoint.
    pub(crate) async fn http(
        url: &str,
        headers: &[(String, String)],
        max_message: usize,
    ) -> Result<Self, ConnectFailure> {
        let mut custom = HashMap::new();
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ConnectFailure::Other(format!("`{name}` is not a valid header name"))
            })?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                ConnectFailure::Other(format!("the value of the header `{name}` is not valid"))
            })?;
            custom.insert(name, value);
        }
        // No redirects (they would carry the headers elsewhere) and no idle pool, which on Linux
        // makes a reused connection wait out delayed ACKs.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| ConnectFailure::Other(format!("cannot build the HTTP client: {e}")))?;
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .custom_headers(custom)
            .max_json_response_size(max_message)
            .max_sse_event_size(max_message);
        let transport = StreamableHttpClientTransport::with_client(client, config);
        Self::serve(transport).await
    }

    async fn serve<T, E, A>(transport: T) -> Result<Self, ConnectFailure>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let shared = Arc::new(Shared::default());
        let handler = Handler {
            shared: shared.clone(),
        };
        let running = handler.serve(transport).await.map_err(|e| {
            use rmcp::service::ClientInitializeError as E;
            if e.is_authorization_required() {
                return ConnectFailure::NeedsAuth;
            }
            match e {
                E::ConnectionClosed(_) => ConnectFailure::Closed(
                    "it closed the connection before the MCP handshake ended".to_owned(),
                ),
                E::TransportError { error, context } => ConnectFailure::Closed(format!(
                    "the MCP handshake failed ({context}): {}",
                    error_chain(error.error.as_ref())
                )),
                E::JsonRpcError(data) => ConnectFailure::Other(format!(
                    "it refused the MCP handshake: {} (code {})",
                    data.message, data.code.0
                )),
                E::NoCompatibleProtocolVersion {
                    client_supported,
                    server_supported,
                } => ConnectFailure::Other(format!(
                    "no protocol version in common (ours: {}; its: {})",
                    join(&client_supported),
                    join(&server_supported)
                )),
                other => ConnectFailure::Other(format!("the MCP handshake failed: {other}")),
            }
        })?;
        let peer = running.peer().clone();
        let info = peer.peer_info();
        let server_info = info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .map(|i| crate::result::bounded(&format!("{} {}", i.name, i.version), 256));
        let protocol_version = info
            .as_ref()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        Ok(Self {
            service: tokio::sync::Mutex::new(Some(running)),
            peer,
            shared,
            server_info,
            protocol_version,
        })
    }

    /// Notified (coalesced) when the server says its tool list changed.
    pub(crate) fn tools_changed(&self) -> Arc<Notify> {
        self.shared.tools_changed.clone()
    }

    /// One page of `tools/list` as JSON: the tools and the next cursor. The answer is read as
    /// JSON so that one malformed tool does not lose the page.
    pub(crate) async fn list_tools_page(
        &self,
        cursor: Option<String>,
    ) -> Result<(Vec<Value>, Option<String>), RequestFailure> {
        let params = cursor.map(|c| {
            let mut p = PaginatedRequestParams::default();
            p.cursor = Some(c);
            p
        });
        let request = ClientRequest::ListToolsRequest(ListToolsRequest {
            method: Default::default(),
            params,
            extensions: Default::default(),
        });
        let answer = self
            .peer
            .send_request(request)
            .await
            .map_err(from_service_error)?;
        let page = result_json(answer);
        let tools = match page.get("tools") {
            Some(Value::Array(tools)) => tools.clone(),
            _ => {
                return Err(RequestFailure::Other(
                    "its tools/list answer has no `tools` list".to_owned(),
                ));
            }
        };
        let next = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_owned);
        Ok((tools, next))
    }

    /// `tools/call`, answered as the JSON of the `CallToolResult`.
    ///
    /// `idle` runs from the request and restarts with each progress notification; `max_total`,
    /// when set, caps the whole call. When either runs out, and when the returned future is
    /// dropped before the answer, the server is sent `notifications/cancelled`.
    pub(crate) async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        idle: Duration,
        max_total: Option<Duration>,
        on_progress: Option<&ProgressFn>,
    ) -> Result<Value, RequestFailure> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(from_service_error)?;
        let RequestHandle {
            mut rx,
            id,
            progress_token,
            ..
        } = handle;
        let (progress_tx, mut progress_rx) = mpsc::channel(PROGRESS_QUEUE);
        lock(&self.shared.progress).insert(progress_token.clone(), progress_tx.clone());
        {
            let mut orphans = lock(&self.shared.orphans);
            orphans.retain(|(token, p)| {
                if *token == progress_token {
                    let _ = progress_tx.try_send(p.clone());
                    false
                } else {
                    true
                }
            });
        }
        drop(progress_tx);
        let mut guard = InFlight {
            peer: self.peer.clone(),
            shared: self.shared.clone(),
            token: progress_token,
            id: Some(id),
        };

        let idle_sleep = tokio::time::sleep(idle);
        tokio::pin!(idle_sleep);
        // Without a cap the branch below is disabled; the sleep only needs a valid deadline.
        let total_sleep = tokio::time::sleep(max_total.unwrap_or(idle));
        tokio::pin!(total_sleep);
        let mut last: Option<McpProgress> = None;
        let mut count = 0u64;
        loop {
            tokio::select! {
                biased;
                answer = &mut rx => {
                    guard.id = None;
                    // rmcp hands notifications to the handler on tasks of their own, so progress
                    // sent just before the answer may still be on its way: pass on what is here.
                    tokio::task::yield_now().await;
                    while let Ok(progress) = progress_rx.try_recv() {
                        if let Some(callback) = on_progress {
                            callback(&progress);
                        }
                    }
                    return match answer {
                        Ok(Ok(result)) => Ok(result_json(result)),
                        Ok(Err(e)) => Err(from_service_error(e)),
                        Err(_) => Err(RequestFailure::Closed),
                    };
                }
                Some(progress) = progress_rx.recv() => {
                    count += 1;
                    if let Some(callback) = on_progress {
                        callback(&progress);
                    }
                    // Notifications may arrive out of order (see above); progress only grows.
                    if last.as_ref().is_none_or(|l| progress.progress >= l.progress) {
                        last = Some(progress);
                    }
                    idle_sleep.as_mut().reset(tokio::time::Instant::now() + idle);
                }
                () = &mut idle_sleep => {
                    guard.cancel("timeout").await;
                    return Err(RequestFailure::Timeout { after: idle, last, count });
                }
                () = &mut total_sleep, if max_total.is_some() => {
                    guard.cancel("maximum total time exceeded").await;
                    let after = max_total.unwrap_or(idle);
                    return Err(RequestFailure::Timeout { after, last, count });
                }
            }
        }
    }

    /// Ends the session: for stdio this closes the server's stdin. Bounded by `within`.
    pub(crate) async fn close(&self, within: Duration) {
        let running = self.service.lock().await.take();
        if let Some(mut running) = running {
            let _ = running.close_with_timeout(within).await;
        }
    }
}

/// A request in flight: unregisters its progress channel, and cancels the request on the
/// server when dropped before its answer.
struct InFlight {
    peer: Peer<RoleClient>,
    shared: Arc<Shared>,
    token: ProgressToken,
    id: Option<RequestId>,
}

impl InFlight {
    fn notification(id: RequestId, reason: &str) -> CancelledNotification {
        CancelledNotification::new(CancelledNotificationParam::new(
            Some(id),
            Some(reason.to_owned()),
        ))
    }

    async fn cancel(&mut self, reason: &str) {
        if let Some(id) = self.id.take() {
            let _ = self
                .peer
                .send_notification(Self::notification(id, reason).into())
                .await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.shared.progress).remove(&self.token);
        if let Some(id) = self.id.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let peer = self.peer.clone();
            let notification = Self::notification(id, "request abandoned by the caller");
            runtime.spawn(async move {
                let _ = peer.send_notification(notification.into()).await;
            });
        }
    }
}

/// A server result as its JSON wire shape, whatever variant rmcp matched it to.
fn result_json(result: ServerResult) -> Value {
    match result {
        ServerResult::CustomResult(custom) => custom.0,
        other => serde_json::to_value(other).unwrap_or(Value::Null),
    }
}

/// An error and its sources, as one sentence.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

fn join(versions: &[ProtocolVersion]) -> String {
    versions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_page_with_a_malformed_tool_is_still_read_as_json() {
        // What the untagged union makes of a `tools/list` answer whose second tool is broken:
        // whichever variant it picks, its JSON still holds every tool.
        let page = json!({"tools": [
            {"name": "good", "inputSchema": {"type": "object"}},
            {"name": "bad", "inputSchema": true},
            {"inputSchema": {}}
        ], "nextCursor": "2"});
        let parsed: ServerResult = serde_json::from_value(page.clone()).unwrap();
        let back = result_json(parsed);
        assert_eq!(back["tools"].as_array().map(Vec::len), Some(3), "{back}");
        assert_eq!(back["nextCursor"], json!("2"));
    }
}

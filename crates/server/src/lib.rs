//! # ba-server
//!
//! The HTTP API of the BA-Agent pipeline (the flow from the model's answer to a page):
//! conversations, runs, one resumable SSE event stream per conversation, uploads, saved code and
//! cancel, on axum. It is a front end of the loop (`ba-agent`): it holds an [`ba_agent::Agent`]
//! and keeps no state the store does not, besides the runs in flight and a bounded ring of their
//! recent events.
//!
//! - [`router`] builds the application: `GET /health` (open) and `/api/v1/…` behind a sign-in
//!   ([`Auth`]: one bearer [`Token`] compared in constant time, the store's users' tokens, an
//!   identity provider's JWT, or a trusted proxy's user header), every route behind a
//!   `Host`/`Origin` check and a body limit; errors are JSON (`{"error": {"code", "message"}}`).
//! - Every conversation has an owner. Its routes answer its owner and admins; a user it is
//!   shared with may read it; anyone else gets 404, as if it did not exist.
//! - Runs (`POST …/runs`) are idempotent on the client's `request_id`, one at a time per
//!   conversation (409 with the active run id), owned by the server — a client going away never
//!   cancels one; `POST …/runs/{run}/cancel` is cooperative (the partial answer is kept).
//! - `GET …/events` frames carry `id:` cursors built from the log's sequence numbers; with
//!   `Last-Event-ID` a stream resumes exactly, from memory or from the durable log.
//! - [`serve`] runs the application on a listener until a shutdown signal, then ends the event
//!   streams and drains the runs within a bound.
//!
//! ```no_run
//! # async fn demo(agent: ba_agent::Agent) -> std::io::Result<()> {
//! use ba_server::{AppState, Auth, ServerConfig, Token, serve};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8765").await?;
//! let state = AppState::new(agent, ServerConfig::new());
//! let token = Token::random();
//! println!("http://{}/ (sign in with {})", listener.local_addr()?, token.expose());
//! serve(listener, state, Auth::Token(token), std::future::pending()).await
//! # }
//! ```
#![deny(missing_docs)]

mod access;
mod api;
mod approvals;
mod auth;
mod caller;
mod conversations;
mod error;
mod events;
mod files;
mod hub;
mod memory;
mod oidc;
mod page;
mod people;
mod proxy;
mod render;
mod runs;
mod scheduler;
mod schedules;
mod settings;
mod state;
mod webhook;
mod wire;

use std::future::Future;

pub use access::Access;
pub use api::router;
pub use approvals::PendingApprovals;
pub use auth::{Auth, HostCheck, KeyFetcher, Oidc, Proxy, Token};
pub use caller::Caller;
pub use conversations::{
    Branch, Branches, ConversationStatus, ConversationView, ForkView, Forked, Rewound,
};
pub use error::{ApiError, ApiResult, ERROR_CODES};
pub use page::{ECHARTS_FILE, ECHARTS_PATH};
pub use scheduler::{Fired, RESUME_AFTER_MS, Scheduler};
pub use settings::{
    AuthMode, AuthSettings, AuthSettingsError, OidcSettings, ProxySettings, UnknownUsers,
};
pub use state::{AppState, ServerConfig};
pub use webhook::{
    Payload, Posted, SIGNATURE_HEADER, Sender as WebhookSender, WebhookTransport, report_path,
    signature,
};
pub use wire::{
    EntryFrame, ErrorBody, ErrorDetail, OpenCall, ResetFrame, RunAccepted, SyncFrame, UploadMeta,
};

/// Serves the API on `listener` until `shutdown` resolves; then the event streams end, new
/// runs are refused, and runs in flight get the configured drain time before they are
/// cancelled (their partial answers land in the log; Resume goes on after a restart).
///
/// # Errors
/// The listener's address or the server's I/O failed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    auth: Auth,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let app = router(state.clone(), auth, addr);
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
    let signal_state = state.clone();
    let graceful = async move {
        shutdown.await;
        // Event streams end first, or the server would wait for them forever.
        signal_state.begin_shutdown();
        let _ = stopped_tx.send(());
    };
    // The peer's address is what `--auth proxy` trusts or not.
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(graceful)
    .await;
    let _ = stopped_rx.await;
    state.shutdown().await;
    served
}

//! Webhooks: when a scheduled run ends, its result is posted as JSON to the schedule's
//! address, signed with HMAC-SHA256 over the body (`X-BA-Signature: sha256=<hex>`), on a task
//! of its own so a slow or failing receiver never holds up a run; a failed post is tried
//! again after a growing wait.

use std::time::Duration;

use ba_storage::{Schedule, ScheduledRun, Webhook};
use hmac::{KeyInit as _, Mac as _};
use serde::Serialize;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "X-BA-Signature";

/// What a webhook receives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Payload {
    /// The schedule.
    pub schedule_id: String,
    /// Its name.
    pub schedule: String,
    /// The occurrence, RFC 3339.
    pub occurrence: String,
    /// The conversation the run went on in.
    pub conversation_id: String,
    /// How it ended (`answered`, `budget_reached`, `failed`, …).
    pub status: String,
    /// The error, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run's report (the export of the last answer), a path on this server.
    pub report: String,
}

/// The payload of `run` of `schedule`.
pub fn payload(schedule: &Schedule, run: &ScheduledRun) -> Payload {
    Payload {
        schedule_id: schedule.id.clone(),
        schedule: schedule.spec.name.clone(),
        occurrence: ba_storage::rfc3339(run.occurrence_ms),
        conversation_id: run.conversation_id.clone(),
        status: run.status.clone().unwrap_or_default(),
        error: run.error.clone(),
        report: report_path(&run.conversation_id),
    }
}

/// Where the report of a scheduled run's conversation is read.
pub fn report_path(conversation_id: &str) -> String {
    format!("/api/v1/conversations/{conversation_id}/report/last?format=html")
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = match hmac::Hmac::<sha2_hmac::Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes a key of any length; this arm is never taken.
        Err(_) => return String::new(),
    };
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let mut hex = String::with_capacity(7 + tag.len() * 2);
    hex.push_str("sha256=");
    for b in tag {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// What a post's future gives: the receiver's HTTP status, or why nothing was received.
pub type Posted = std::pin::Pin<Box<dyn std::future::Future<Output = Result<u16, String>> + Send>>;

/// How a webhook is carried: the program's HTTP client (the server chooses none itself).
pub trait WebhookTransport: Send + Sync + std::fmt::Debug {
    /// POSTs `body` as JSON to `url` with the `X-BA-Signature` header `signature`.
    fn post(&self, url: &str, signature: &str, body: Vec<u8>) -> Posted;
}

/// Posts webhooks in the background: signs each body, tries it again after a growing wait.
/// Cheap to clone. Without a transport, nothing is posted (and the log says so).
#[derive(Debug, Clone)]
pub struct Sender {
    transport: Option<std::sync::Arc<dyn WebhookTransport>>,
    attempts: u32,
    first_wait: Duration,
}

impl Default for Sender {
    fn default() -> Self {
        Self {
            transport: None,
            attempts: 5,
            first_wait: Duration::from_secs(2),
        }
    }
}

impl Sender {
    /// Posts through `transport`, each post up to `attempts` times, waiting `first_wait`, then
    /// twice as long each time, between them.
    pub fn new(
        transport: std::sync::Arc<dyn WebhookTransport>,
        attempts: u32,
        first_wait: Duration,
    ) -> Self {
        Self {
            transport: Some(transport),
            attempts: attempts.max(1),
            first_wait,
        }
    }

    /// Posts `payload` to `hook` on a task of its own; gives whether a receiver took it (2xx)
    /// within the attempts.
    pub fn post(&self, hook: Webhook, payload: Payload) -> tokio::task::JoinHandle<bool> {
        let this = self.clone();
        tokio::spawn(async move {
            let Some(transport) = this.transport else {
                tracing::warn!(
                    "webhook of schedule {} not posted: this server has no HTTP client for it",
                    payload.schedule_id
                );
                return false;
            };
            let body = match serde_json::to_vec(&payload) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!("webhook of schedule {}: {e}", payload.schedule_id);
                    return false;
                }
            };
            let sig = signature(&hook.secret, &body);
            let mut wait = this.first_wait;
            for attempt in 1..=this.attempts {
                match transport.post(&hook.url, &sig, body.clone()).await {
                    Ok(status) if (200..300).contains(&status) => return true,
                    Ok(status) => tracing::warn!(
                        "webhook of schedule {} answered {status} (attempt {attempt})",
                        payload.schedule_id
                    ),
                    Err(e) => tracing::warn!(
                        "webhook of schedule {} failed (attempt {attempt}): {e}",
                        payload.schedule_id
                    ),
                }
                if attempt < this.attempts {
                    tokio::time::sleep(wait).await;
                    wait = wait.saturating_mul(2);
                }
            }
            false
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_signature_is_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            super::signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}

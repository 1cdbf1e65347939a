//! Layer 7: the timeout and panic capture around one attempt.
//!
//! A call past its timeout is cancelled (its future is dropped, so it stops at its next await
//! point) and becomes a `timeout` error carrying whatever partial output the tool had reported
//! through its [`PartialOutput`] handle. A tool that panics becomes an
//! `execution_error`; the runtime keeps serving.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use ba_protocol::ToolErrorCode;
use futures::FutureExt;
use serde_json::Value;

use crate::error::ToolError;
use crate::tool::PartialOutput;

/// How much reported partial output a timeout message carries, in bytes.
pub const MAX_PARTIAL_BYTES: usize = 2048;

/// Runs one attempt with a timeout, turning a panic into an `execution_error`.
pub async fn run_attempt<Fut>(
    tool: &str,
    attempt: Fut,
    timeout: Duration,
    partial: &PartialOutput,
) -> Result<Value, ToolError>
where
    Fut: Future<Output = Result<Value, ToolError>>,
{
    let guarded = AssertUnwindSafe(attempt).catch_unwind();
    match tokio::time::timeout(timeout, guarded).await {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => Err(ToolError::execution(format!(
            "tool `{tool}` crashed: {}",
            panic_message(panic.as_ref())
        ))
        .with_code(ToolErrorCode::ToolPanicked)),
        Err(_elapsed) => Err(timeout_error(tool, timeout, &partial.snapshot())),
    }
}

fn timeout_error(tool: &str, timeout: Duration, partial: &str) -> ToolError {
    let mut message = format!("tool `{tool}` timed out after {} ms", timeout.as_millis());
    if partial.is_empty() {
        message.push_str("; it reported no partial output");
    } else {
        message.push_str("; partial output before the timeout:\n");
        message.push_str(&crate::levels::truncate_middle(
            partial,
            MAX_PARTIAL_BYTES,
            40,
        ));
    }
    ToolError::timeout(message)
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::ToolErrorKind;
    use serde_json::json;

    #[tokio::test(start_paused = true)]
    async fn times_out_exactly_with_partial_output() {
        let partial = PartialOutput::default();
        let p = partial.clone();
        let start = tokio::time::Instant::now();
        let err = run_attempt(
            "slow",
            async move {
                p.report("row 1\n");
                tokio::time::sleep(Duration::from_secs(10)).await;
                p.report("row 2\n");
                Ok(json!(1))
            },
            Duration::from_millis(1500),
            &partial,
        )
        .await
        .unwrap_err();
        assert_eq!(start.elapsed(), Duration::from_millis(1500));
        assert_eq!(err.kind, ToolErrorKind::Timeout);
        assert!(
            err.message
                .starts_with("tool `slow` timed out after 1500 ms")
        );
        assert!(err.message.ends_with("row 1\n"), "{}", err.message);
    }

    #[tokio::test]
    async fn panics_become_execution_errors() {
        let err = run_attempt(
            "boom",
            async { panic!("index out of range") },
            Duration::from_secs(1),
            &PartialOutput::default(),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::ExecutionError);
        assert_eq!(err.code, "TOOL_PANICKED");
        assert!(err.message.contains("index out of range"));
    }
}

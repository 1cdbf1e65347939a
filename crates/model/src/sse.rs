//! Reading a provider's SSE body under the stream-idle timeout, feeding a provider state.

use futures::StreamExt;
use tokio::time::Instant;

use ba_protocol::stream::sse::{SseEvent, SseParser};

use super::error::{ModelError, PartialOutput, TimeoutPhase};
use super::http::{Transport, describe};
use super::{DeltaSink, ModelResponse};

/// A provider's view of one stream: it turns events into deltas and, at the end, into the
/// answer or into what was received so far.
pub(crate) trait StreamState {
    /// Handles one event. An error returned here gets the partial output attached by the
    /// reader.
    fn push(&mut self, event: &SseEvent, on_delta: &mut DeltaSink<'_>) -> Result<(), ModelError>;
    /// What was received so far, for an error.
    fn into_partial(self) -> PartialOutput;
    /// The answer, once the body has ended.
    fn finish(self, retries: u32) -> Result<ModelResponse, ModelError>;
}

/// Reads `response` as SSE into `state`: the idle timeout runs from the last piece that carried
/// progress (an event other than a keep-alive `ping`), the call's `deadline` bounds the whole
/// reading, and at most `max_response_bytes` are read. Every failure keeps what was received.
pub(crate) async fn read_stream<S: StreamState>(
    transport: &Transport,
    response: reqwest::Response,
    mut state: S,
    on_delta: &mut DeltaSink<'_>,
    retries: u32,
    deadline: Instant,
) -> Result<ModelResponse, ModelError> {
    let provider = transport.provider;
    let idle = transport.config.idle_timeout;
    let limit = transport.config.max_response_bytes;
    let mut body = response.bytes_stream();
    let mut parser = SseParser::new();
    // Bytes of a UTF-8 character split across two pieces wait here for the rest.
    let mut pending: Vec<u8> = Vec::new();
    let mut received: u64 = 0;
    let mut progress = Instant::now();
    loop {
        let wait_until = (progress + idle).min(deadline);
        let piece = match tokio::time::timeout_at(wait_until, body.next()).await {
            Err(_) => {
                let (phase, after) = if wait_until == deadline {
                    (TimeoutPhase::Total, transport.config.call_timeout)
                } else {
                    (TimeoutPhase::StreamIdle, idle)
                };
                return Err(ModelError::Timeout {
                    provider: provider.to_owned(),
                    phase,
                    after,
                    partial: Some(Box::new(state.into_partial())),
                });
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(ModelError::StreamCut {
                    provider: provider.to_owned(),
                    message: describe(&e),
                    partial: Box::new(state.into_partial()),
                });
            }
            Ok(Some(Ok(piece))) => piece,
        };
        received += piece.len() as u64;
        if received > limit {
            return Err(ModelError::TooLarge {
                provider: provider.to_owned(),
                limit,
                partial: Box::new(state.into_partial()),
            });
        }
        pending.extend_from_slice(&piece);
        let text = match take_utf8(&mut pending) {
            Some(text) => text,
            None => {
                return Err(ModelError::InvalidResponse {
                    provider: provider.to_owned(),
                    message: "the stream is not valid UTF-8".to_owned(),
                    partial: Some(Box::new(state.into_partial())),
                });
            }
        };
        for event in parser.push(&text) {
            if event.event.as_deref() != Some("ping") {
                progress = Instant::now();
            }
            if let Err(error) = state.push(&event, on_delta) {
                return Err(error.with_partial(state.into_partial()));
            }
        }
    }
    if !pending.is_empty() {
        return Err(ModelError::StreamCut {
            provider: provider.to_owned(),
            message: "the stream ended inside a UTF-8 character".to_owned(),
            partial: Box::new(state.into_partial()),
        });
    }
    for event in parser.finish() {
        if let Err(error) = state.push(&event, on_delta) {
            return Err(error.with_partial(state.into_partial()));
        }
    }
    state.finish(retries)
}

/// Takes the longest valid UTF-8 prefix out of `pending`; `None` when the bytes are invalid
/// (not merely incomplete).
fn take_utf8(pending: &mut Vec<u8>) -> Option<String> {
    let valid = match std::str::from_utf8(pending) {
        Ok(_) => pending.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => return None,
    };
    let rest = pending.split_off(valid);
    let text = String::from_utf8(std::mem::replace(pending, rest)).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_characters_wait_for_their_rest() {
        let bytes = "é°".as_bytes();
        let mut pending = bytes[..1].to_vec();
        assert_eq!(take_utf8(&mut pending).as_deref(), Some(""));
        pending.extend_from_slice(&bytes[1..3]);
        assert_eq!(take_utf8(&mut pending).as_deref(), Some("é"));
        pending.extend_from_slice(&bytes[3..]);
        assert_eq!(take_utf8(&mut pending).as_deref(), Some("°"));
        assert!(pending.is_empty());
        let mut bad = vec![0xff, b'a'];
        assert_eq!(take_utf8(&mut bad), None);
    }
}

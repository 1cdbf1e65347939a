//! Layer 2: the input size check, on the serialized size of the arguments.

use std::io;

use serde_json::Value;

use ba_protocol::ToolErrorCode;

use crate::error::ToolError;

/// The serialized size of `value` in bytes, or `None` once it passes `limit` (counting stops
/// there, so an enormous input costs no more than the limit to reject).
pub fn serialized_size_within(value: &Value, limit: u64) -> Option<u64> {
    let mut counter = Counter { count: 0, limit };
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => Some(counter.count),
        Err(_) => None,
    }
}

/// The serialized size of `value` in bytes.
#[cfg(test)]
pub fn serialized_size(value: &Value) -> u64 {
    serialized_size_within(value, u64::MAX).unwrap_or(u64::MAX)
}

/// Rejects arguments whose serialized size is over `limit` bytes with an
/// `invalid_parameters` error (code `INPUT_TOO_LARGE`).
pub fn check_input_size(arguments: &Value, limit: u64) -> Result<u64, ToolError> {
    serialized_size_within(arguments, limit).ok_or_else(|| {
        ToolError::invalid_parameters(format!(
            "the arguments are larger than the limit of {limit} bytes; pass a file path or a \
             smaller selection instead"
        ))
        .with_code(ToolErrorCode::InputTooLarge)
    })
}

struct Counter {
    count: u64,
    limit: u64,
}

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.count = self.count.saturating_add(buf.len() as u64);
        if self.count > self.limit {
            return Err(io::Error::other("over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_serialized_bytes_exactly() {
        let v = json!({"q": "é", "n": [1, 2]});
        assert_eq!(
            serialized_size(&v),
            serde_json::to_vec(&v).unwrap().len() as u64
        );
        assert_eq!(check_input_size(&v, 100).unwrap(), serialized_size(&v));
    }

    #[test]
    fn over_the_limit_is_invalid_parameters() {
        let v = json!({"blob": "x".repeat(2000)});
        let err = check_input_size(&v, 1000).unwrap_err();
        assert_eq!(err.code, "INPUT_TOO_LARGE");
        assert_eq!(err.kind, ba_protocol::ToolErrorKind::InvalidParameters);
        assert!(err.message.contains("1000 bytes"));
        let exact = serialized_size(&v);
        assert!(check_input_size(&v, exact).is_ok());
        assert!(check_input_size(&v, exact - 1).is_err());
    }
}

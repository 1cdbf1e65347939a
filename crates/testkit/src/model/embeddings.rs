//! The scripted model's `POST /v1/embeddings`: deterministic vectors (a hashed bag of words, so
//! texts that share words are close), or one of the faults a client must name.

use serde_json::{Value, json};

use super::Response;

/// The length of the scripted vectors.
pub const EMBEDDING_DIM: usize = 256;

/// The scripted vector of `text`: each word (lower-cased letters and digits; a number keeps its
/// dots and commas) adds ±1 at a place its hash picks; the sum is scaled to length 1. Texts
/// that share words have a positive cosine, texts that share none about zero.
pub fn hashed_embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0.0_f32; EMBEDDING_DIM];
    let lower = text.to_lowercase();
    let words = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '.' || c == ','))
        .map(|w| w.trim_matches(|c| c == '.' || c == ','))
        .filter(|w| !w.is_empty());
    for word in words {
        // FNV-1a: the same vector on every run and platform.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let at = (h % EMBEDDING_DIM as u64) as usize;
        v[at] += if (h >> 32) & 1 == 0 { 1.0 } else { -1.0 };
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

/// One embeddings request as the scripted endpoint received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingRequest {
    /// The `model` asked for (empty when none).
    pub model: String,
    /// The texts (`input`).
    pub input: Vec<String>,
    /// The request's headers, names in lower case.
    pub headers: Vec<(String, String)>,
}

impl EmbeddingRequest {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// How the scripted endpoint answers (hashed vectors unless a fault is set).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EmbeddingsReply {
    /// One hashed vector per input, in reverse order of `index` (a client must sort by it).
    #[default]
    Hashed,
    /// An error status with an OpenAI-shaped error body carrying this message (and
    /// `x-should-retry: false`).
    Status(u16, String),
    /// One vector fewer than the inputs.
    WrongCount,
    /// The last vector one number short.
    WrongDimension,
    /// A number too large for a 32-bit float in the first vector.
    NonFinite,
    /// A well-formed answer padded (in an ignored field) to at least this many bytes.
    Oversize(usize),
}

/// The inputs of an embeddings request: `input` as a list of strings or one string.
pub(super) fn inputs(body: &Value) -> Vec<String> {
    match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => Vec::new(),
    }
}

/// The reply to an embeddings request for `texts`.
pub(super) fn reply(how: &EmbeddingsReply, model: &str, texts: &[String]) -> Response {
    let items = |texts: &[String]| -> Vec<Value> {
        texts
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": hashed_embedding(t)}))
            .collect()
    };
    let answer = |data: Vec<Value>| {
        json!({"object": "list", "model": model, "data": data,
            "usage": {"prompt_tokens": texts.len(), "total_tokens": texts.len()}})
    };
    let body = match how {
        EmbeddingsReply::Hashed => answer(items(texts)),
        EmbeddingsReply::Status(status, message) => {
            let kind = if (400..500).contains(status) {
                "invalid_request_error"
            } else {
                "server_error"
            };
            let mut response = Response::json(
                *status,
                json!({"error": {"message": message, "type": kind, "code": status}}),
            );
            response
                .headers
                .push(("x-should-retry", "false".to_owned()));
            return response;
        }
        EmbeddingsReply::WrongCount => {
            let mut data = items(texts);
            data.pop();
            answer(data)
        }
        EmbeddingsReply::WrongDimension => {
            let mut data = items(texts);
            if let Some(Value::Array(v)) = data.first_mut().and_then(|d| d.get_mut("embedding")) {
                v.pop();
            }
            answer(data)
        }
        EmbeddingsReply::NonFinite => {
            let mut data = items(texts);
            if let Some(last) = data.last_mut() {
                last["embedding"][0] = json!(1e39);
            }
            answer(data)
        }
        EmbeddingsReply::Oversize(bytes) => {
            let mut body = answer(items(texts));
            body["padding"] = json!("x".repeat(*bytes));
            body
        }
    };
    Response::json(200, body)
}

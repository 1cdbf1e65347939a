//! Tool results, bounded: text and `structuredContent` kept side by side, binary content decoded
//! into separate items for the caller to store as data files.

use std::fmt;

use base64::Engine as _;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// How much of a result is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResultLimits {
    /// Bytes of text kept (default 1 MiB); the head is kept.
    pub max_text_bytes: usize,
    /// Bytes of `structuredContent` (as compact JSON) kept whole (default 1 MiB); larger
    /// structured content is dropped, and shown as a text head when there is no other text.
    pub max_structured_bytes: usize,
    /// Decoded bytes of images, audio and blobs kept, all items together (default 16 MiB).
    pub max_binary_bytes: usize,
}

impl Default for ResultLimits {
    fn default() -> Self {
        Self {
            max_text_bytes: 1024 * 1024,
            max_structured_bytes: 1024 * 1024,
            max_binary_bytes: 16 * 1024 * 1024,
        }
    }
}

impl ResultLimits {
    /// Sets the text limit.
    pub fn with_max_text_bytes(mut self, bytes: usize) -> Self {
        self.max_text_bytes = bytes;
        self
    }

    /// Sets the structured-content limit.
    pub fn with_max_structured_bytes(mut self, bytes: usize) -> Self {
        self.max_structured_bytes = bytes;
        self
    }

    /// Sets the binary limit.
    pub fn with_max_binary_bytes(mut self, bytes: usize) -> Self {
        self.max_binary_bytes = bytes;
        self
    }
}

/// A progress notification of a running call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct McpProgress {
    /// Progress so far.
    pub progress: f64,
    /// The total, when the server knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// What the server is doing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl fmt::Display for McpProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.progress)?;
        if let Some(total) = self.total {
            write!(f, "/{total}")?;
        }
        if let Some(message) = &self.message {
            write!(f, " {message}")?;
        }
        Ok(())
    }
}

/// What a binary item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum BinaryKind {
    /// An `image` content block.
    Image,
    /// An `audio` content block.
    Audio,
    /// A `resource` content block holding a blob.
    Blob,
}

/// Decoded binary content, for the caller to store as a data file.
#[derive(Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BinaryItem {
    /// What it is.
    pub kind: BinaryKind,
    /// Its MIME type as the server gave it (`application/octet-stream` when it gave none).
    pub mime_type: String,
    /// The resource's URI, for blobs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Its size in bytes.
    pub bytes: usize,
    /// The decoded bytes; never serialized.
    #[serde(skip)]
    pub data: Vec<u8>,
}

impl fmt::Debug for BinaryItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BinaryItem")
            .field("kind", &self.kind)
            .field("mime_type", &self.mime_type)
            .field("uri", &self.uri)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// A `resource_link` the server returned (the resource itself is not fetched).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ResourceLink {
    /// Its URI.
    pub uri: String,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its MIME type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A part of a result that was cut to fit the limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Cut {
    /// `text`, `structuredContent` or `binary`.
    pub part: &'static str,
    /// Bytes kept.
    pub kept_bytes: u64,
    /// Bytes the server sent (decoded, for binary content).
    pub original_bytes: u64,
}

impl fmt::Display for Cut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: kept {} of {} bytes ({} cut)",
            self.part,
            self.kept_bytes,
            self.original_bytes,
            self.original_bytes.saturating_sub(self.kept_bytes)
        )
    }
}

/// A successful tool result, bounded by [`ResultLimits`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct McpCallResult {
    /// The text blocks (and embedded text resources), in order, joined by newlines.
    pub text: String,
    /// `structuredContent` as sent, when it fit.
    #[serde(rename = "structuredContent", skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Images, audio and blobs, decoded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub binaries: Vec<BinaryItem>,
    /// Links to resources.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_links: Vec<ResourceLink>,
    /// What was cut to fit the limits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cuts: Vec<Cut>,
    /// Oddities met while reading the result (unknown block types, bad base64).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl McpCallResult {
    /// The result as JSON data for an observation: the structured content alone when the text
    /// only repeats it (servers are asked to send both), the text alone (parsed when it is a
    /// JSON object or array) when there is no structured content, otherwise both. Binary items
    /// appear as `{type, mime_type, bytes}` — their bytes never do — and cuts as sentences.
    pub fn observation_data(&self) -> Value {
        let text_json = parse_json_container(&self.text);
        let mut data = match (&self.structured_content, self.text.is_empty()) {
            (Some(s), true) => s.clone(),
            (Some(s), false) if text_json.as_ref() == Some(s) => s.clone(),
            (Some(s), false) => json!({"text": self.text, "structuredContent": s}),
            (None, _) => text_json.unwrap_or_else(|| Value::String(self.text.clone())),
        };
        let mut extra = Map::new();
        if !self.binaries.is_empty() {
            let files = self
                .binaries
                .iter()
                .map(|b| json!({"type": b.kind, "mime_type": b.mime_type, "bytes": b.bytes}))
                .collect();
            extra.insert("binaries".to_owned(), Value::Array(files));
        }
        if !self.resource_links.is_empty() {
            extra.insert("resource_links".to_owned(), json!(self.resource_links));
        }
        if !self.cuts.is_empty() {
            let cuts = self
                .cuts
                .iter()
                .map(|c| Value::String(c.to_string()))
                .collect();
            extra.insert("cut".to_owned(), Value::Array(cuts));
        }
        if !extra.is_empty() {
            data = match data {
                Value::Object(mut m) if !m.contains_key("binaries") && !m.contains_key("cut") => {
                    m.extend(extra);
                    Value::Object(m)
                }
                other => {
                    let mut m = Map::new();
                    m.insert("result".to_owned(), other);
                    m.extend(extra);
                    Value::Object(m)
                }
            };
        }
        data
    }
}

fn parse_json_container(text: &str) -> Option<Value> {
    let t = text.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    serde_json::from_str(text).ok()
}

/// A tool result read off the wire: the result, or the text of an `isError` result.
#[derive(Debug)]
pub(crate) enum WireOutcome {
    Ok(McpCallResult),
    ToolError(String),
    /// Not a tool result at all: why.
    Malformed(String),
}

/// Reads a `CallToolResult` in its JSON wire shape.
pub(crate) fn read_call_result(wire: &Value, limits: &ResultLimits) -> WireOutcome {
    let Value::Object(fields) = wire else {
        return WireOutcome::Malformed(format!("the result is {wire:.64}, not an object"));
    };
    if !["content", "structuredContent", "isError"]
        .iter()
        .any(|k| fields.contains_key(*k))
    {
        let keys: Vec<&str> = fields.keys().take(8).map(String::as_str).collect();
        return WireOutcome::Malformed(format!(
            "the result has none of `content`, `structuredContent`, `isError` (its keys: {})",
            keys.join(", ")
        ));
    }
    let mut out = McpCallResult::default();
    let mut texts: Vec<&str> = Vec::new();
    let mut binary_budget = limits.max_binary_bytes;
    let empty = Vec::new();
    let blocks = match wire.get("content") {
        Some(Value::Array(blocks)) => blocks,
        None | Some(Value::Null) => &empty,
        Some(_) => {
            out.notes
                .push("`content` is not a list; ignored".to_owned());
            &empty
        }
    };
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "text" => match block.get("text").and_then(Value::as_str) {
                Some(t) => texts.push(t),
                None => out
                    .notes
                    .push("a text block has no text; ignored".to_owned()),
            },
            "image" | "audio" => {
                let kind = if kind == "image" {
                    BinaryKind::Image
                } else {
                    BinaryKind::Audio
                };
                let mime = block.get("mimeType").and_then(Value::as_str);
                match block.get("data").and_then(Value::as_str) {
                    Some(data) => push_binary(&mut out, &mut binary_budget, kind, mime, None, data),
                    None => out
                        .notes
                        .push(format!("an {kind:?} block has no data; ignored")),
                }
            }
            "resource" => {
                let resource = block.get("resource").unwrap_or(&Value::Null);
                let uri = resource.get("uri").and_then(Value::as_str);
                let mime = resource.get("mimeType").and_then(Value::as_str);
                if let Some(t) = resource.get("text").and_then(Value::as_str) {
                    texts.push(t);
                } else if let Some(blob) = resource.get("blob").and_then(Value::as_str) {
                    push_binary(
                        &mut out,
                        &mut binary_budget,
                        BinaryKind::Blob,
                        mime,
                        uri,
                        blob,
                    );
                } else {
                    out.notes
                        .push("a resource block has neither text nor blob; ignored".to_owned());
                }
            }
            "resource_link" => match block.get("uri").and_then(Value::as_str) {
                Some(uri) => {
                    let field = |k: &str| block.get(k).and_then(Value::as_str).map(str::to_owned);
                    out.resource_links.push(ResourceLink {
                        uri: uri.to_owned(),
                        name: field("name"),
                        mime_type: field("mimeType"),
                        description: field("description"),
                    });
                }
                None => out
                    .notes
                    .push("a resource link has no uri; ignored".to_owned()),
            },
            other => out.notes.push(format!(
                "ignored a content block of type `{}`",
                bounded(other, 64)
            )),
        }
    }
    let total_text: usize =
        texts.iter().map(|t| t.len()).sum::<usize>() + texts.len().saturating_sub(1);
    out.text = texts.join("\n");
    if total_text > limits.max_text_bytes {
        out.text
            .truncate(floor_char_boundary(&out.text, limits.max_text_bytes));
        out.cuts.push(Cut {
            part: "text",
            kept_bytes: out.text.len() as u64,
            original_bytes: total_text as u64,
        });
    }
    if let Some(structured) = wire.get("structuredContent") {
        let serialized = serde_json::to_string(structured).unwrap_or_default();
        if serialized.len() <= limits.max_structured_bytes {
            out.structured_content = Some(structured.clone());
        } else {
            let mut kept = 0;
            if out.text.is_empty() {
                out.text = serialized[..floor_char_boundary(&serialized, limits.max_text_bytes)]
                    .to_owned();
                kept = out.text.len();
            }
            out.cuts.push(Cut {
                part: "structuredContent",
                kept_bytes: kept as u64,
                original_bytes: serialized.len() as u64,
            });
        }
    }
    if wire.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = if out.text.is_empty() {
            out.structured_content
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_else(|| "the tool reported an error without a message".to_owned())
        } else {
            out.text
        };
        return WireOutcome::ToolError(text);
    }
    WireOutcome::Ok(out)
}

fn push_binary(
    out: &mut McpCallResult,
    budget: &mut usize,
    kind: BinaryKind,
    mime: Option<&str>,
    uri: Option<&str>,
    data: &str,
) {
    let estimate = data.len() / 4 * 3;
    if estimate > *budget + 3 {
        out.cuts.push(Cut {
            part: "binary",
            kept_bytes: 0,
            original_bytes: estimate as u64,
        });
        return;
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let decoded = engine.decode(data).or_else(|_| {
        let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        base64::engine::general_purpose::STANDARD_NO_PAD.decode(compact.trim_end_matches('='))
    });
    match decoded {
        Ok(bytes) if bytes.len() <= *budget => {
            *budget -= bytes.len();
            out.binaries.push(BinaryItem {
                kind,
                mime_type: mime
                    .map(|m| bounded(m, 128))
                    .unwrap_or_else(|| "application/octet-stream".to_owned()),
                uri: uri.map(|u| bounded(u, 2048)),
                bytes: bytes.len(),
                data: bytes,
            });
        }
        Ok(bytes) => out.cuts.push(Cut {
            part: "binary",
            kept_bytes: 0,
            original_bytes: bytes.len() as u64,
        }),
        Err(e) => out.notes.push(format!(
            "a {kind:?} block is not valid base64 ({e}); dropped"
        )),
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(crate) fn bounded(s: &str, max: usize) -> String {
    s[..floor_char_boundary(s, max)].to_owned()
}

pub(crate) fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    let mut i = max;
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: Value) -> McpCallResult {
        match read_call_result(&v, &ResultLimits::default()) {
            WireOutcome::Ok(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn text_and_structured_are_both_kept() {
        let r = read(json!({"content": [{"type": "text", "text": "{\"n\":1}"}],
                            "structuredContent": {"n": 1}}));
        assert_eq!(r.text, "{\"n\":1}");
        assert_eq!(r.structured_content, Some(json!({"n": 1})));
        assert_eq!(r.observation_data(), json!({"n": 1}));
        let r = read(json!({"content": [{"type": "text", "text": "two rows"}],
                            "structuredContent": {"rows": 2}}));
        assert_eq!(
            r.observation_data(),
            json!({"text": "two rows", "structuredContent": {"rows": 2}})
        );
        let r = read(
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        );
        assert_eq!(r.observation_data(), json!("a\nb"));
        // 3.11 servers may leave `content` out.
        let r = read(json!({"structuredContent": [1, 2]}));
        assert_eq!(r.observation_data(), json!([1, 2]));
    }

    #[test]
    fn binaries_are_decoded_never_inlined() {
        let png = base64::engine::general_purpose::STANDARD.encode([137u8, 80, 78, 71]);
        let r = read(json!({"content": [
            {"type": "image", "data": png, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "AAEC"}},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
            {"type": "video", "data": "x"}
        ]}));
        assert_eq!(r.binaries.len(), 2);
        assert_eq!(r.binaries[0].data, [137, 80, 78, 71]);
        assert_eq!(r.binaries[1].mime_type, "application/octet-stream");
        assert_eq!(r.binaries[1].uri.as_deref(), Some("file:///a.bin"));
        assert_eq!(r.text, "hello");
        assert_eq!(r.resource_links[0].uri, "file:///b");
        assert_eq!(r.notes, ["ignored a content block of type `video`"]);
        let obs = r.observation_data().to_string();
        assert!(!obs.contains(&png) && !obs.contains("AAEC"), "{obs}");
        assert!(obs.contains("\"bytes\":4"), "{obs}");
    }

    #[test]
    fn limits_cut_and_say_so() {
        let limits = ResultLimits::default()
            .with_max_text_bytes(10)
            .with_max_structured_bytes(8)
            .with_max_binary_bytes(3);
        let v = json!({"content": [{"type": "text", "text": "ééééééééé"},
                                   {"type": "image", "data": "AAECAw==", "mimeType": "image/png"}],
                       "structuredContent": {"long": "value"}});
        let WireOutcome::Ok(r) = read_call_result(&v, &limits) else {
            panic!()
        };
        assert_eq!(r.text, "ééééé");
        assert!(r.binaries.is_empty());
        assert_eq!(r.structured_content, None);
        let cuts: Vec<String> = r.cuts.iter().map(ToString::to_string).collect();
        assert_eq!(
            cuts,
            [
                "binary: kept 0 of 4 bytes (4 cut)",
                "text: kept 10 of 18 bytes (8 cut)",
                "structuredContent: kept 0 of 16 bytes (16 cut)"
            ]
        );
        // Structured content too large and no text: its head becomes the text.
        let v = json!({"structuredContent": {"long": "value"}});
        let WireOutcome::Ok(r) = read_call_result(&v, &limits) else {
            panic!()
        };
        assert_eq!(r.text, "{\"long\":\"v");
        assert!(
            r.observation_data()["cut"][0]
                .as_str()
                .unwrap()
                .starts_with("structuredContent")
        );
    }

    #[test]
    fn is_error_carries_the_text() {
        let v = json!({"content": [{"type": "text", "text": "table missing"}], "isError": true});
        match read_call_result(&v, &ResultLimits::default()) {
            WireOutcome::ToolError(t) => assert_eq!(t, "table missing"),
            other => panic!("error expected, got {other:?}"),
        }
        match read_call_result(&json!({"isError": true}), &ResultLimits::default()) {
            WireOutcome::ToolError(t) => assert!(t.contains("without a message")),
            other => panic!("error expected, got {other:?}"),
        }
    }

    #[test]
    fn a_result_that_is_not_one_is_malformed() {
        for v in [json!({"rows": 2}), json!([1]), json!("text")] {
            match read_call_result(&v, &ResultLimits::default()) {
                WireOutcome::Malformed(why) => assert!(!why.is_empty()),
                other => panic!("malformed expected for {v}, got {other:?}"),
            }
        }
        // `_meta` alone is no result either; an empty `content` list is one.
        assert!(matches!(
            read_call_result(&json!({"_meta": {}}), &ResultLimits::default()),
            WireOutcome::Malformed(_)
        ));
        assert!(matches!(
            read_call_result(&json!({"content": []}), &ResultLimits::default()),
            WireOutcome::Ok(_)
        ));
    }
}

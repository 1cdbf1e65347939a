//! Content blocks: the pieces a message is made of.
//!
//! Blocks follow the Anthropic Messages shape because it is the richest of the wire formats
//! (thinking with signatures, tool use and results as blocks). Every block keeps the fields it
//! does not know in an `extra` map, and a block whose `type` is unknown survives whole as
//! [`ContentBlock::Unknown`], so nothing read from a provider or a newer log is dropped silently.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::fields::Fields;

/// A JSON object: the type of every `extra` map.
pub type JsonMap = Map<String, Value>;

/// Prompt-caching marker of the Anthropic API (`{"type":"ephemeral"}`), kept as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheControl {
    /// The cache kind, `ephemeral` today.
    #[serde(rename = "type")]
    pub kind: String,
    /// Other fields (`ttl`, …), kept as written.
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl CacheControl {
    /// The `{"type":"ephemeral"}` marker.
    pub fn ephemeral() -> Self {
        Self {
            kind: "ephemeral".to_owned(),
            extra: JsonMap::new(),
        }
    }
}

/// Plain text.
#[derive(Debug, Clone, PartialEq, Default, JsonSchema)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Prompt-caching marker.
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model (`citations`, …).
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// Extended thinking, with the signature the provider needs to accept it back.
#[derive(Debug, Clone, PartialEq, Default, JsonSchema)]
pub struct ThinkingBlock {
    /// The reasoning text.
    pub thinking: String,
    /// Opaque signature; required by Anthropic when the block is sent back.
    pub signature: Option<String>,
    /// Fields this crate does not model.
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// Thinking the provider returned encrypted.
#[derive(Debug, Clone, PartialEq, Default, JsonSchema)]
pub struct RedactedThinkingBlock {
    /// Opaque payload.
    pub data: String,
    /// Fields this crate does not model.
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// A tool call made by the assistant.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct ToolUseBlock {
    /// Call id; the matching result names it in `tool_use_id`.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments, a JSON object.
    pub input: Value,
    /// Prompt-caching marker.
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model (`caller`, …).
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// The content of a tool result: a string, or a list of blocks (text, images).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// Plain text.
    Text(String),
    /// Blocks, as the API allows.
    Blocks(Vec<ContentBlock>),
}

impl ToolResultContent {
    /// The text of the result: the string, or its text blocks joined by newlines.
    pub fn to_text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(text) => Cow::Borrowed(text),
            Self::Blocks(blocks) => Cow::Owned(join_text(blocks)),
        }
    }
}

/// The result of a tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct ToolResultBlock {
    /// The id of the `tool_use` this answers.
    pub tool_use_id: String,
    /// The observation; may be absent on the wire.
    pub content: Option<ToolResultContent>,
    /// Whether the call failed; kept absent when the input left it absent.
    pub is_error: Option<bool>,
    /// Prompt-caching marker.
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model.
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// Where an image's bytes are.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageSource {
    /// Inline base64 data.
    Base64 {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// Base64 payload.
        data: String,
    },
    /// A URL the provider fetches.
    Url {
        /// The address.
        url: String,
    },
    /// Another source kind, kept as written.
    Other(JsonMap),
}

/// An image.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct ImageBlock {
    /// Where the bytes are.
    pub source: ImageSource,
    /// Prompt-caching marker.
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model (OpenAI's `detail`, …).
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `text`
    Text(TextBlock),
    /// `thinking`
    Thinking(ThinkingBlock),
    /// `redacted_thinking`
    RedactedThinking(RedactedThinkingBlock),
    /// `tool_use`
    ToolUse(ToolUseBlock),
    /// `tool_result`
    ToolResult(ToolResultBlock),
    /// `image`
    Image(ImageBlock),
    /// Any other block type, kept as the raw JSON object (including its `type`).
    Unknown(JsonMap),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextBlock {
            text: text.into(),
            ..TextBlock::default()
        })
    }

    /// A thinking block.
    pub fn thinking(thinking: impl Into<String>, signature: Option<String>) -> Self {
        Self::Thinking(ThinkingBlock {
            thinking: thinking.into(),
            signature,
            extra: JsonMap::new(),
        })
    }

    /// A tool call.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::ToolUse(ToolUseBlock {
            id: id.into(),
            name: name.into(),
            input,
            cache_control: None,
            extra: JsonMap::new(),
        })
    }

    /// A tool result holding text.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        text: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::ToolResult(ToolResultBlock {
            tool_use_id: tool_use_id.into(),
            content: Some(ToolResultContent::Text(text.into())),
            is_error: is_error.then_some(true),
            cache_control: None,
            extra: JsonMap::new(),
        })
    }

    /// The wire name of the block's type.
    pub fn type_name(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Thinking(_) => "thinking",
            Self::RedactedThinking(_) => "redacted_thinking",
            Self::ToolUse(_) => "tool_use",
            Self::ToolResult(_) => "tool_result",
            Self::Image(_) => "image",
            Self::Unknown(map) => map.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(block) => Some(&block.text),
            _ => None,
        }
    }
}

/// The text blocks of `blocks`, joined by newlines.
pub fn join_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for text in blocks.iter().filter_map(ContentBlock::as_text) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(text);
    }
    out
}

/// Message content as the wire carries it: a plain string, or a list of blocks.
///
/// The two forms are kept apart so that a conversion writes back the form it read.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Content {
    /// A plain string.
    Text(String),
    /// A list of blocks.
    Blocks(Vec<ContentBlock>),
}

impl Content {
    /// The content as blocks; a string becomes one text block.
    pub fn into_blocks(self) -> Vec<ContentBlock> {
        match self {
            Self::Text(text) => vec![ContentBlock::text(text)],
            Self::Blocks(blocks) => blocks,
        }
    }

    /// The text of the content: the string, or the text blocks joined by newlines.
    pub fn to_text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(text) => Cow::Borrowed(text),
            Self::Blocks(blocks) => Cow::Owned(join_text(blocks)),
        }
    }

    /// True when there is no text and no block.
    pub fn is_empty(&self) -> bool {
        match self {
            Self::Text(text) => text.is_empty(),
            Self::Blocks(blocks) => blocks.is_empty(),
        }
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

// ---------------------------------------------------------------------------------------------
// Serde: one pass over the object, known fields taken out, the rest kept in `extra`.

fn take_cache_control<E: serde::de::Error>(f: &mut Fields) -> Result<Option<CacheControl>, E> {
    f.opt("cache_control")
}

/// A short name of a JSON value's kind with its article (`a string`, `an object`), for error
/// messages that say what was found.
pub fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl ContentBlock {
    /// Builds a block from a JSON object, naming the field when a known block is malformed.
    pub fn from_map<E: serde::de::Error>(map: JsonMap) -> Result<Self, E> {
        let kind = match map.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(other) => {
                return Err(E::custom(format_args!(
                    "content block: field `type` must be a string, found {}",
                    kind_of(other)
                )));
            }
            None => return Err(E::custom("content block: missing field `type`")),
        };
        let what = match kind {
            "text" => "`text` block",
            "thinking" => "`thinking` block",
            "redacted_thinking" => "`redacted_thinking` block",
            "tool_use" => "`tool_use` block",
            "tool_result" => "`tool_result` block",
            "image" => "`image` block",
            _ => return Ok(Self::Unknown(map)),
        };
        let mut f = Fields::new(map, what);
        let block = match f.req_string::<E>("type")?.as_str() {
            "text" => {
                let text = f.req_string("text")?;
                let cache_control = take_cache_control(&mut f)?;
                Self::Text(TextBlock {
                    text,
                    cache_control,
                    extra: f.rest(),
                })
            }
            "thinking" => {
                let thinking = f.req_string("thinking")?;
                let signature = f.opt_string("signature")?;
                Self::Thinking(ThinkingBlock {
                    thinking,
                    signature,
                    extra: f.rest(),
                })
            }
            "redacted_thinking" => {
                let data = f.req_string("data")?;
                Self::RedactedThinking(RedactedThinkingBlock {
                    data,
                    extra: f.rest(),
                })
            }
            "tool_use" => {
                let id = f.req_string("id")?;
                let name = f.req_string("name")?;
                let input = f
                    .remove("input")
                    .unwrap_or_else(|| Value::Object(JsonMap::new()));
                let cache_control = take_cache_control(&mut f)?;
                Self::ToolUse(ToolUseBlock {
                    id,
                    name,
                    input,
                    cache_control,
                    extra: f.rest(),
                })
            }
            "tool_result" => {
                let tool_use_id = f.req_string("tool_use_id")?;
                let content = match f.remove("content") {
                    None | Some(Value::Null) => None,
                    Some(value) => Some(Content::from_value::<E>(value).map_err(|e| {
                        E::custom(format_args!("`tool_result` block: field `content`: {e}"))
                    })?),
                }
                .map(ToolResultContent::from);
                let is_error = f.opt_bool("is_error")?;
                let cache_control = take_cache_control(&mut f)?;
                Self::ToolResult(ToolResultBlock {
                    tool_use_id,
                    content,
                    is_error,
                    cache_control,
                    extra: f.rest(),
                })
            }
            _ => {
                let source = match f.remove("source") {
                    Some(Value::Object(source)) => image_source_from_map(source),
                    Some(other) => {
                        return Err(E::custom(format_args!(
                            "`image` block: field `source` must be an object, found {}",
                            kind_of(&other)
                        )));
                    }
                    None => return Err(f.missing("source")),
                };
                let cache_control = take_cache_control(&mut f)?;
                Self::Image(ImageBlock {
                    source,
                    cache_control,
                    extra: f.rest(),
                })
            }
        };
        Ok(block)
    }

    /// The block as a JSON object, exactly as it serialises.
    pub fn to_map(&self) -> JsonMap {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            // Serialising a block always yields an object; keep the type if it ever did not.
            _ => JsonMap::from_iter([("type".to_owned(), Value::from(self.type_name()))]),
        }
    }
}

impl Content {
    /// Reads content from JSON: a string, or an array of blocks (the error names the index).
    pub fn from_value<E: serde::de::Error>(value: Value) -> Result<Self, E> {
        match value {
            Value::String(text) => Ok(Self::Text(text)),
            Value::Array(items) => {
                let mut blocks = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    let block = match item {
                        Value::Object(map) => ContentBlock::from_map::<E>(map),
                        other => Err(E::custom(format_args!(
                            "a content block must be an object, found {}",
                            kind_of(&other)
                        ))),
                    };
                    blocks.push(block.map_err(|e| E::custom(format_args!("[{i}]: {e}")))?);
                }
                Ok(Self::Blocks(blocks))
            }
            other => Err(E::custom(format_args!(
                "content must be a string or an array of blocks, found {}",
                kind_of(&other)
            ))),
        }
    }
}

impl From<Content> for ToolResultContent {
    fn from(content: Content) -> Self {
        match content {
            Content::Text(text) => Self::Text(text),
            Content::Blocks(blocks) => Self::Blocks(blocks),
        }
    }
}

impl From<ToolResultContent> for Content {
    fn from(content: ToolResultContent) -> Self {
        match content {
            ToolResultContent::Text(text) => Self::Text(text),
            ToolResultContent::Blocks(blocks) => Self::Blocks(blocks),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::from_value(Value::deserialize(deserializer)?)
    }
}

impl<'de> Deserialize<'de> for ToolResultContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Content::from_value(Value::deserialize(deserializer)?).map(Self::from)
    }
}

fn image_source_from_map(mut source: JsonMap) -> ImageSource {
    let only = |source: &JsonMap, keys: &[&str]| source.keys().all(|k| keys.contains(&k.as_str()));
    match source.get("type").and_then(Value::as_str) {
        Some("base64") if only(&source, &["type", "media_type", "data"]) => {
            match (source.remove("media_type"), source.remove("data")) {
                (Some(Value::String(media_type)), Some(Value::String(data))) => {
                    ImageSource::Base64 { media_type, data }
                }
                (media_type, data) => {
                    if let Some(m) = media_type {
                        source.insert("media_type".to_owned(), m);
                    }
                    if let Some(d) = data {
                        source.insert("data".to_owned(), d);
                    }
                    ImageSource::Other(source)
                }
            }
        }
        Some("url") if only(&source, &["type", "url"]) => match source.remove("url") {
            Some(Value::String(url)) => ImageSource::Url { url },
            other => {
                if let Some(u) = other {
                    source.insert("url".to_owned(), u);
                }
                ImageSource::Other(source)
            }
        },
        _ => ImageSource::Other(source),
    }
}

impl JsonSchema for ImageSource {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("ImageSource")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "description": "Where an image's bytes are: `{type: base64, media_type, data}`, `{type: url, url}`, or another source kind.",
            "type": "object",
            "required": ["type"],
            "properties": {
                "type": { "type": "string" },
                "media_type": { "type": "string" },
                "data": { "type": "string" },
                "url": { "type": "string" }
            }
        })
    }
}

impl Serialize for ImageSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Base64 { media_type, data } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("type", "base64")?;
                map.serialize_entry("media_type", media_type)?;
                map.serialize_entry("data", data)?;
                map.end()
            }
            Self::Url { url } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "url")?;
                map.serialize_entry("url", url)?;
                map.end()
            }
            Self::Other(source) => source.serialize(serializer),
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        fn entries<M: SerializeMap>(map: &mut M, extra: &JsonMap) -> Result<(), M::Error> {
            for (key, value) in extra {
                map.serialize_entry(key, value)?;
            }
            Ok(())
        }
        fn cache<M: SerializeMap>(map: &mut M, cc: &Option<CacheControl>) -> Result<(), M::Error> {
            if let Some(cc) = cc {
                map.serialize_entry("cache_control", cc)?;
            }
            Ok(())
        }
        match self {
            Self::Text(b) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", &b.text)?;
                cache(&mut map, &b.cache_control)?;
                entries(&mut map, &b.extra)?;
                map.end()
            }
            Self::Thinking(b) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "thinking")?;
                map.serialize_entry("thinking", &b.thinking)?;
                if let Some(signature) = &b.signature {
                    map.serialize_entry("signature", signature)?;
                }
                entries(&mut map, &b.extra)?;
                map.end()
            }
            Self::RedactedThinking(b) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "redacted_thinking")?;
                map.serialize_entry("data", &b.data)?;
                entries(&mut map, &b.extra)?;
                map.end()
            }
            Self::ToolUse(b) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "tool_use")?;
                map.serialize_entry("id", &b.id)?;
                map.serialize_entry("name", &b.name)?;
                map.serialize_entry("input", &b.input)?;
                cache(&mut map, &b.cache_control)?;
                entries(&mut map, &b.extra)?;
                map.end()
            }
            Self::ToolResult(b) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "tool_result")?;
                map.serialize_entry("tool_use_id", &b.tool_use_id)?;
                if let Some(content) = &b.content {
                    map.serialize_entry("content", content)?;
                }
                if let Some(is_error) = b.is_error {
                    map.serialize_entry("is_error", &is_error)?;
                }
                cache(&mut map, &b.cache_control)?;
                entries(&mut map, &b.extra)?;
                map.end()
            }
            Self::Image(b) => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "image")?;
                map.serialize_entry("source", &b.source)?;
                cache(&mut map, &b.cache_control)?;
                entries(&mut map, &b.extra)?;
                map.end()
            }
            Self::Unknown(map) => map.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Object(map) => Self::from_map(map),
            other => Err(D::Error::custom(format_args!(
                "a content block must be an object, found {}",
                kind_of(&other)
            ))),
        }
    }
}

impl JsonSchema for ContentBlock {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("ContentBlock")
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let typed = |name: &str, body: Schema| -> Value {
            let mut value = body.to_value();
            if let Some(obj) = value.as_object_mut() {
                let props = obj
                    .entry("properties")
                    .or_insert_with(|| Value::Object(JsonMap::new()));
                if let Some(props) = props.as_object_mut() {
                    props.insert("type".to_owned(), serde_json::json!({ "const": name }));
                }
                let required = obj
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()));
                if let Some(required) = required.as_array_mut() {
                    required.insert(0, Value::from("type"));
                }
            }
            value
        };
        let variants = vec![
            typed("text", TextBlock::json_schema(generator)),
            typed("thinking", ThinkingBlock::json_schema(generator)),
            typed(
                "redacted_thinking",
                RedactedThinkingBlock::json_schema(generator),
            ),
            typed("tool_use", ToolUseBlock::json_schema(generator)),
            typed("tool_result", ToolResultBlock::json_schema(generator)),
            typed("image", ImageBlock::json_schema(generator)),
            serde_json::json!({
                "description": "Any other block type, kept as written.",
                "type": "object",
                "required": ["type"],
                "properties": { "type": { "type": "string" } }
            }),
        ];
        let mut schema = Schema::default();
        schema.insert(
            "description".to_owned(),
            Value::from("One block of a message's content."),
        );
        schema.insert("anyOf".to_owned(), Value::Array(variants));
        schema
    }
}

//! Message counts: the OpenAI cookbook overhead and a per-entry cache keyed by id and
//! content hash, so a counter kept between turns only encodes the entries it has not seen.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use ba_protocol::ToolResultContent;
use ba_protocol::{Content, ContentBlock, LogEntry, TokenCounter};

use crate::tokens::{Encoding, ModelTokenizer};

/// Tokens an image block is charged. Providers bill images by pixel size, which the log does
/// not carry, so a generous fixed figure keeps budgets on the safe side.
pub const IMAGE_TOKENS: usize = 1_600;

/// Framing tokens around messages, after the OpenAI cookbook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageOverhead {
    /// Added once per message (`<|start|>role<|message|>…<|end|>`).
    pub per_message: i64,
    /// Added when a message has a `name` (negative for gpt-3.5-turbo-0301).
    pub per_name: i64,
    /// Added once per request for the assistant's reply priming.
    pub reply_priming: i64,
    /// Added once per tool call besides its name and arguments.
    pub per_tool_call: i64,
}

impl Default for MessageOverhead {
    fn default() -> Self {
        Self {
            per_message: 3,
            per_name: 1,
            reply_priming: 3,
            per_tool_call: 1,
        }
    }
}

impl MessageOverhead {
    /// The overhead of `model`: the cookbook's (4, −1) for gpt-3.5-turbo-0301, (3, 1) otherwise.
    pub fn for_model(model: &str) -> Self {
        if model == "gpt-3.5-turbo-0301" {
            Self {
                per_message: 4,
                per_name: -1,
                ..Self::default()
            }
        } else {
            Self::default()
        }
    }

    /// The tokens of one message given its parts: framing, role, content, name and calls
    /// (name + arguments JSON each). `content` is counted as the concatenation of its pieces.
    pub fn message(
        &self,
        counter: &dyn TokenCounter,
        role: &str,
        content: &[&str],
        name: Option<&str>,
        calls: &[(&str, &str)],
    ) -> usize {
        let mut n = self.per_message + counter.count(role) as i64;
        for piece in content {
            n += counter.count(piece) as i64;
        }
        if let Some(name) = name {
            n += counter.count(name) as i64 + self.per_name;
        }
        for (name, args) in calls {
            n += counter.count(name) as i64 + counter.count(args) as i64 + self.per_tool_call;
        }
        n.max(0) as usize
    }
}

/// A fast 64-bit hasher (multiply-rotate over 8-byte words) for cache keys.
///
/// The count cache hashes every entry of a conversation on each build, so SipHash's
/// resistance to chosen collisions costs more than it buys here: the key is also the entry
/// id, and the inputs are the application's own log.
#[derive(Debug, Clone, Copy, Default)]
pub struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        // A final avalanche so that nearby inputs spread over the whole range.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
        self.add(bytes.len() as u64);
    }
}

/// A stable fingerprint of what an entry sends to the model; any edit changes it.
pub fn entry_hash(entry: &LogEntry) -> u64 {
    let mut h = FastHasher::default();
    entry.id.hash(&mut h);
    entry.role.as_str().hash(&mut h);
    match &entry.content {
        None => 0u8.hash(&mut h),
        Some(Content::Text(t)) => {
            1u8.hash(&mut h);
            t.hash(&mut h);
        }
        Some(Content::Blocks(blocks)) => {
            2u8.hash(&mut h);
            for block in blocks {
                hash_block(block, &mut h);
            }
        }
    }
    for call in entry.calls() {
        call.id.hash(&mut h);
        call.function.name.hash(&mut h);
        call.function.arguments.hash(&mut h);
    }
    entry.tool_call_id.hash(&mut h);
    entry.name.hash(&mut h);
    entry.is_error.hash(&mut h);
    if let Some(e) = &entry.llm_error {
        e.message.hash(&mut h);
        e.partial_output.hash(&mut h);
    }
    h.finish()
}

fn hash_block(block: &ContentBlock, h: &mut FastHasher) {
    block.type_name().hash(h);
    match block {
        ContentBlock::Text(b) => b.text.hash(h),
        ContentBlock::Thinking(b) => b.thinking.hash(h),
        ContentBlock::RedactedThinking(b) => b.data.hash(h),
        ContentBlock::ToolUse(b) => {
            b.id.hash(h);
            b.name.hash(h);
            b.input.to_string().hash(h);
        }
        ContentBlock::ToolResult(b) => {
            b.tool_use_id.hash(h);
            if let Some(c) = &b.content {
                c.to_text().hash(h);
            }
        }
        ContentBlock::Image(_) => {}
        ContentBlock::Unknown(map) => serde_json::Value::Object(map.clone()).to_string().hash(h),
    }
}

/// The pieces of text an entry sends to the model (content, thinking, tool results, a recorded
/// failure; not the role, name or calls), and how many images it carries.
pub fn entry_texts(entry: &LogEntry) -> (Vec<std::borrow::Cow<'_, str>>, usize) {
    use std::borrow::Cow;
    let mut pieces: Vec<Cow<'_, str>> = Vec::new();
    let mut images = 0;
    match &entry.content {
        None => {}
        Some(Content::Text(t)) => pieces.push(Cow::Borrowed(t)),
        Some(Content::Blocks(blocks)) => {
            for block in blocks {
                match block {
                    ContentBlock::Text(b) => pieces.push(Cow::Borrowed(&b.text)),
                    ContentBlock::Thinking(b) => pieces.push(Cow::Borrowed(&b.thinking)),
                    ContentBlock::RedactedThinking(b) => pieces.push(Cow::Borrowed(&b.data)),
                    ContentBlock::ToolUse(b) => {
                        pieces.push(Cow::Borrowed(&b.name));
                        pieces.push(Cow::Owned(b.input.to_string()));
                    }
                    ContentBlock::ToolResult(b) => match &b.content {
                        Some(ToolResultContent::Text(t)) => pieces.push(Cow::Borrowed(t)),
                        Some(ToolResultContent::Blocks(inner)) => {
                            for b in inner {
                                match b {
                                    ContentBlock::Image(_) => images += 1,
                                    other => {
                                        if let Some(t) = other.as_text() {
                                            pieces.push(Cow::Borrowed(t));
                                        }
                                    }
                                }
                            }
                        }
                        None => {}
                    },
                    ContentBlock::Image(_) => images += 1,
                    ContentBlock::Unknown(map) => {
                        pieces.push(Cow::Owned(
                            serde_json::Value::Object(map.clone()).to_string(),
                        ));
                    }
                }
            }
        }
    }
    if let Some(e) = &entry.llm_error {
        pieces.push(Cow::Owned(e.render()));
    }
    (pieces, images)
}

/// Counts log entries with a tokenizer and the message overhead, caching each entry's count by
/// id and content hash.
#[derive(Debug)]
pub struct MessageCounter {
    tokenizer: ModelTokenizer,
    overhead: MessageOverhead,
    cache: Mutex<HashMap<String, (u64, usize)>>,
}

impl MessageCounter {
    /// A counter for `tokenizer` with the default overhead.
    pub fn new(tokenizer: ModelTokenizer) -> Self {
        Self {
            tokenizer,
            overhead: MessageOverhead::default(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// An exact counter for `encoding`.
    pub fn exact(encoding: Encoding) -> Self {
        Self::new(ModelTokenizer::exact(encoding))
    }

    /// The same counter with another overhead.
    pub fn with_overhead(mut self, overhead: MessageOverhead) -> Self {
        self.overhead = overhead;
        self
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> ModelTokenizer {
        self.tokenizer
    }

    /// The overhead.
    pub fn overhead(&self) -> MessageOverhead {
        self.overhead
    }

    /// Tokens of a bare text (margin applied).
    pub fn text(&self, text: &str) -> usize {
        self.tokenizer.count(text)
    }

    /// Tokens of a system message carrying `text`; 0 for an empty text (no message is sent).
    pub fn system(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.tokenizer.scale(self.overhead.message(
            &self.tokenizer.encoding,
            "system",
            &[text],
            None,
            &[],
        ))
    }

    /// Tokens of one entry without the cache.
    pub fn entry_uncached(&self, entry: &LogEntry) -> usize {
        let (pieces, images) = entry_texts(entry);
        let refs: Vec<&str> = pieces.iter().map(AsRef::as_ref).collect();
        let calls: Vec<(&str, &str)> = entry
            .calls()
            .iter()
            .map(|c| (c.function.name.as_str(), c.function.arguments.as_str()))
            .collect();
        let exact = self.overhead.message(
            &self.tokenizer.encoding,
            entry.role.as_str(),
            &refs,
            entry.name.as_deref(),
            &calls,
        );
        self.tokenizer.scale(exact) + images * IMAGE_TOKENS
    }

    /// Tokens of one entry; a cached count is reused while the entry's content hash is the same.
    pub fn entry(&self, entry: &LogEntry) -> usize {
        let hash = entry_hash(entry);
        if let Some(&(h, n)) = self.lock().get(&entry.id)
            && h == hash
        {
            return n;
        }
        let n = self.entry_uncached(entry);
        self.lock().insert(entry.id.clone(), (hash, n));
        n
    }

    /// Tokens of a request made of `entries`: every entry plus the reply priming.
    pub fn entries(&self, entries: &[LogEntry]) -> usize {
        entries.iter().map(|e| self.entry(e)).sum::<usize>() + self.reply_priming()
    }

    /// The reply priming of one request.
    pub fn reply_priming(&self) -> usize {
        self.overhead.reply_priming.max(0) as usize
    }

    /// How many entry counts are cached.
    pub fn cached(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, usize)>> {
        // A panic elsewhere cannot leave a half-written count: inserts are single calls.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::{LogRole, LogToolCall};

    fn user(id: &str, text: &str) -> LogEntry {
        LogEntry::new(id, LogRole::User, "t").with_text(text)
    }

    #[test]
    fn overhead_of_a_plain_message() {
        let c = MessageCounter::exact(Encoding::Cl100kBase);
        // 3 framing + "user" (1) + "hello world" (2)
        assert_eq!(c.entry(&user("a", "hello world")), 6);
        assert_eq!(c.entries(&[user("a", "hello world")]), 9);
    }

    #[test]
    fn tool_calls_count_name_and_arguments() {
        let c = MessageCounter::exact(Encoding::Cl100kBase);
        let mut e = LogEntry::new("a", LogRole::Assistant, "t");
        let bare = c.entry_uncached(&e);
        e.tool_calls = Some(vec![LogToolCall::new(
            "c1",
            "get_weather",
            &serde_json::json!({"city": "Paris"}),
        )]);
        let with_call = c.entry_uncached(&e);
        let args = Encoding::Cl100kBase.count(r#"{"city":"Paris"}"#);
        let name = Encoding::Cl100kBase.count("get_weather");
        assert_eq!(with_call, bare + args + name + 1);
    }

    #[test]
    fn hash_sees_small_edits() {
        let a = entry_hash(&user("a", "the quarterly revenue grew by 12%"));
        assert_ne!(
            a,
            entry_hash(&user("a", "the quarterly revenue grew by 13%"))
        );
        assert_ne!(
            a,
            entry_hash(&user("b", "the quarterly revenue grew by 12%"))
        );
        assert_ne!(entry_hash(&user("a", "ab")), entry_hash(&user("a", "ab\0")));
        assert_eq!(
            a,
            entry_hash(&user("a", "the quarterly revenue grew by 12%"))
        );
    }

    #[test]
    fn edits_invalidate_the_cache() {
        let c = MessageCounter::exact(Encoding::Cl100kBase);
        let a = user("a", "hello");
        let n1 = c.entry(&a);
        let b = user("a", "hello there, a much longer message than before");
        let n2 = c.entry(&b);
        assert!(n2 > n1);
        assert_eq!(c.cached(), 1);
    }

    #[test]
    fn margin_applies_to_messages() {
        let exact = MessageCounter::exact(Encoding::Cl100kBase);
        let claude =
            MessageCounter::new(ModelTokenizer::exact(Encoding::Cl100kBase).with_margin(0.15));
        let e = user("a", &"word ".repeat(200));
        assert!(claude.entry(&e) as f64 >= exact.entry(&e) as f64 * 1.15);
    }
}

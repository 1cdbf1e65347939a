//! Exact tiktoken encodings and the model → encoding map.
//!
//! Counting is the hot path, so [`Encoding::count`] has its own exact counter (the private
//! `count` module): hand-written pre-tokenisers for the two split patterns, a bounded per-thread
//! cache of piece counts, tiktoken's merge rule over an index of `bpe-openai`'s dictionary, and
//! texts of 2 MB or more cut where no piece can span and counted on all cores. Ids and decoding
//! ([`Encoding::encode`], [`Encoding::decode`]) use `bpe-openai`'s tables, with the encodings'
//! special tokens handled here. The tests check ids and counts against the shared tiktoken
//! vectors and against tiktoken-rs (a dev-dependency: the reference, not a runtime dependency)
//! on every transcript message, the corpus and random text.

use std::fmt;
use std::str::FromStr;

use ba_protocol::TokenCounter;

use crate::error::ContextError;

/// A tiktoken encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4 and GPT-3.5; also the stand-in for Claude.
    Cl100kBase,
    /// GPT-4o, GPT-4.1, GPT-5 and the o-series.
    O200kBase,
}

impl Encoding {
    /// The tiktoken name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cl100kBase => "cl100k_base",
            Self::O200kBase => "o200k_base",
        }
    }

    /// The number of tokens of `text`, special-token text counted as ordinary text: the length
    /// of tiktoken's `encode_ordinary(text)`.
    ///
    /// Each thread that counts keeps a cache of at most 256 KiB per encoding; the first count
    /// in an encoding also builds its vocabulary index (2.25 MiB for cl100k_base, 4.25 MiB for
    /// o200k_base, once per process). A text of 2 MB or more is counted on up to as many
    /// threads as the process may use.
    pub fn count(self, text: &str) -> usize {
        crate::count::count(self, text)
    }

    /// The token ids of `text`, special-token text encoded as ordinary text.
    pub fn encode(self, text: &str) -> Vec<u32> {
        self.tables().encode(text)
    }

    /// The token ids of `text` with every special token of the encoding recognised.
    pub fn encode_with_special_tokens(self, text: &str) -> Vec<u32> {
        let specials = self.special_tokens();
        let mut ids = Vec::new();
        let mut rest = text;
        // The leftmost special token first; at one place, the longest.
        while let Some((at, text, id)) = specials
            .iter()
            .filter_map(|&(t, id)| rest.find(t).map(|at| (at, t, id)))
            .min_by_key(|&(at, t, _)| (at, std::cmp::Reverse(t.len())))
        {
            ids.extend(self.encode(&rest[..at]));
            ids.push(id);
            rest = &rest[at + text.len()..];
        }
        ids.extend(self.encode(rest));
        ids
    }

    /// The text of `ids`, or `None` when they are not valid UTF-8 together or name no token.
    pub fn decode(self, ids: &[u32]) -> Option<String> {
        let bpe = &self.tables().bpe;
        let specials = self.special_tokens();
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            match specials.iter().find(|&&(_, special)| special == id) {
                Some((text, _)) => bytes.extend_from_slice(text.as_bytes()),
                None if (id as usize) < bpe.num_tokens() => {
                    bytes.extend_from_slice(bpe.token_bytes(id));
                }
                None => return None,
            }
        }
        String::from_utf8(bytes).ok()
    }

    /// The special tokens of the encoding and their ids (tiktoken's tables).
    pub fn special_tokens(self) -> &'static [(&'static str, u32)] {
        match self {
            Self::Cl100kBase => &[
                ("<|endoftext|>", 100_257),
                ("<|fim_prefix|>", 100_258),
                ("<|fim_middle|>", 100_259),
                ("<|fim_suffix|>", 100_260),
                ("<|endofprompt|>", 100_276),
            ],
            Self::O200kBase => &[("<|endoftext|>", 199_999), ("<|endofprompt|>", 200_018)],
        }
    }

    fn tables(self) -> &'static bpe_openai::Tokenizer {
        match self {
            Self::Cl100kBase => bpe_openai::cl100k_base(),
            Self::O200kBase => bpe_openai::o200k_base(),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Encoding {
    type Err = ContextError;
    fn from_str(name: &str) -> Result<Self, ContextError> {
        match name {
            "cl100k_base" => Ok(Self::Cl100kBase),
            "o200k_base" => Ok(Self::O200kBase),
            _ => Err(ContextError::UnknownEncoding {
                name: name.to_owned(),
            }),
        }
    }
}

impl TokenCounter for Encoding {
    fn count(&self, text: &str) -> usize {
        Encoding::count(*self, text)
    }
    fn name(&self) -> &str {
        self.as_str()
    }
}

/// The default safety margin for models whose tokenizer is not public (Claude): +15 %.
pub const DEFAULT_CLAUDE_MARGIN: f64 = 0.15;

/// An encoding with a safety margin: counts are scaled up by `1 + margin` and rounded up, so a
/// budget computed with a stand-in tokenizer errs on the safe side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelTokenizer {
    /// The encoding counted with.
    pub encoding: Encoding,
    /// Extra fraction added to every count (0.15 = +15 %); 0 for exact encodings.
    pub margin: f64,
}

impl ModelTokenizer {
    /// The encoding without a margin.
    pub fn exact(encoding: Encoding) -> Self {
        Self {
            encoding,
            margin: 0.0,
        }
    }

    /// The same encoding with another margin (negative values count as 0).
    pub fn with_margin(self, margin: f64) -> Self {
        Self {
            margin: margin.max(0.0),
            ..self
        }
    }

    /// The tokenizer of `model`: o200k for gpt-4o/4.1/5 and the o-series, cl100k for gpt-4 and
    /// gpt-3.5, cl100k with [`DEFAULT_CLAUDE_MARGIN`] for `claude-*`; `None` when unknown.
    pub fn for_model(model: &str) -> Option<Self> {
        let m = model.trim().to_ascii_lowercase();
        let m = m.rsplit('/').next().unwrap_or(&m).to_owned();
        if m.starts_with("claude") {
            return Some(Self::exact(Encoding::Cl100kBase).with_margin(DEFAULT_CLAUDE_MARGIN));
        }
        let o200k = [
            "gpt-4o",
            "gpt-4.1",
            "gpt-4.5",
            "gpt-5",
            "o1",
            "o3",
            "o4",
            "chatgpt-4o",
        ];
        if o200k.iter().any(|p| m.starts_with(p)) {
            return Some(Self::exact(Encoding::O200kBase));
        }
        let cl100k = [
            "gpt-4",
            "gpt-3.5",
            "gpt-35",
            "text-embedding-3",
            "text-embedding-ada-002",
        ];
        if cl100k.iter().any(|p| m.starts_with(p)) {
            return Some(Self::exact(Encoding::Cl100kBase));
        }
        None
    }

    /// Scales an exact count by the margin, rounding up.
    pub fn scale(&self, exact: usize) -> usize {
        if self.margin <= 0.0 {
            exact
        } else {
            // Counts stay far below 2^52, so the float round trip is exact.
            (exact as f64 * (1.0 + self.margin)).ceil() as usize
        }
    }
}

impl TokenCounter for ModelTokenizer {
    fn count(&self, text: &str) -> usize {
        self.scale(self.encoding.count(text))
    }
    fn name(&self) -> &str {
        self.encoding.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_map() {
        let enc = |m: &str| ModelTokenizer::for_model(m).map(|t| (t.encoding, t.margin));
        assert_eq!(enc("gpt-4o-mini"), Some((Encoding::O200kBase, 0.0)));
        assert_eq!(enc("gpt-4.1"), Some((Encoding::O200kBase, 0.0)));
        assert_eq!(enc("gpt-5"), Some((Encoding::O200kBase, 0.0)));
        assert_eq!(enc("gpt-4-0613"), Some((Encoding::Cl100kBase, 0.0)));
        assert_eq!(enc("gpt-3.5-turbo"), Some((Encoding::Cl100kBase, 0.0)));
        assert_eq!(
            enc("claude-sonnet-4-5"),
            Some((Encoding::Cl100kBase, DEFAULT_CLAUDE_MARGIN))
        );
        assert_eq!(enc("llama-3"), None);
    }

    #[test]
    fn margin_rounds_up() {
        let t = ModelTokenizer::exact(Encoding::Cl100kBase).with_margin(0.15);
        assert_eq!(t.scale(100), 115);
        assert_eq!(t.scale(1), 2);
        assert_eq!(t.scale(0), 0);
        assert_eq!(ModelTokenizer::exact(Encoding::O200kBase).scale(7), 7);
    }

    #[test]
    fn unknown_encoding_is_an_error() {
        let err = "p50k_base".parse::<Encoding>().unwrap_err();
        assert!(err.to_string().contains("p50k_base"));
    }
}

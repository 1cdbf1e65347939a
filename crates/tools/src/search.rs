//! Finding tools by what they do: an index over the tools' names, descriptions and parameters
//! that a model searches when the definitions are too many to send with every request.
//!
//! [`ToolIndex::bm25`] ranks by Okapi BM25 over terms read from each tool: its name split into
//! words (`list_open_issues`, `getFileContents`), its description, and its parameters' names
//! and descriptions. Words are lowercased and reduced by a light suffix rule (`issues`, `issue`;
//! `running`, `run`), and text in scripts written without spaces (Chinese, Japanese) is read as
//! overlapping pairs of characters. [`ToolIndex::regex`] matches a pattern against the same
//! text, for a model that knows part of a name.

use std::collections::HashMap;

use ba_protocol::ToolSpec;
use serde_json::Value;

/// Okapi BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// Okapi BM25's length normalisation.
const B: f64 = 0.75;
/// A name's words count this many times (a tool is first what it is called).
const NAME_WEIGHT: usize = 3;
/// Longest pattern a regex search accepts, in bytes.
pub const MAX_PATTERN_BYTES: usize = 200;

/// One tool found, with its score (higher is better; a regex match scores 1).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolHit {
    /// The tool's name.
    pub name: String,
    /// How well it matched.
    pub score: f64,
}

/// A pattern [`ToolIndex::regex`] cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the pattern {pattern:?} cannot be used: {reason}")]
pub struct PatternError {
    /// The pattern, cut to 80 characters.
    pub pattern: String,
    /// Why.
    pub reason: String,
}

#[derive(Debug, Clone)]
struct Doc {
    name: String,
    /// The text a regex reads: name, description and parameters, one a line.
    text: String,
    terms: HashMap<String, usize>,
    len: usize,
}

/// The index of a set of tools.
#[derive(Debug, Clone, Default)]
pub struct ToolIndex {
    docs: Vec<Doc>,
    /// Documents holding each term.
    df: HashMap<String, usize>,
    avg_len: f64,
}

impl ToolIndex {
    /// The index of `specs`.
    pub fn new(specs: &[ToolSpec]) -> Self {
        let docs: Vec<Doc> = specs.iter().map(doc_of).collect();
        let mut df: HashMap<String, usize> = HashMap::new();
        for d in &docs {
            for term in d.terms.keys() {
                *df.entry(term.clone()).or_default() += 1;
            }
        }
        let total: usize = docs.iter().map(|d| d.len).sum();
        let avg_len = if docs.is_empty() {
            0.0
        } else {
            total as f64 / docs.len() as f64
        };
        Self { docs, df, avg_len }
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The tools that best match `query`, best first, at most `limit`; none for a query with
    /// no known word.
    pub fn bm25(&self, query: &str, limit: usize) -> Vec<ToolHit> {
        let query_terms = terms(query);
        let n = self.docs.len() as f64;
        let mut hits: Vec<ToolHit> = self
            .docs
            .iter()
            .filter_map(|d| {
                let mut score = 0.0;
                for term in &query_terms {
                    let Some(&tf) = d.terms.get(term) else {
                        continue;
                    };
                    let df = self.df.get(term).copied().unwrap_or(0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    let tf = tf as f64;
                    let norm = K1 * (1.0 - B + B * d.len as f64 / self.avg_len.max(1.0));
                    score += idf * tf * (K1 + 1.0) / (tf + norm);
                }
                (score > 0.0).then(|| ToolHit {
                    name: d.name.clone(),
                    score,
                })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.name.cmp(&b.name)));
        hits.truncate(limit);
        hits
    }

    /// The tools whose name, description or parameters match `pattern` (case-insensitive), in
    /// index order, at most `limit`.
    ///
    /// # Errors
    /// [`PatternError`] for a pattern that is too long or not a regular expression.
    pub fn regex(&self, pattern: &str, limit: usize) -> Result<Vec<ToolHit>, PatternError> {
        let refuse = |reason: String| PatternError {
            pattern: pattern.chars().take(80).collect(),
            reason,
        };
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(refuse(format!(
                "it is longer than {MAX_PATTERN_BYTES} bytes"
            )));
        }
        let re = regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| refuse(e.to_string()))?;
        Ok(self
            .docs
            .iter()
            .filter(|d| re.is_match(&d.text))
            .take(limit)
            .map(|d| ToolHit {
                name: d.name.clone(),
                score: 1.0,
            })
            .collect())
    }
}

fn doc_of(spec: &ToolSpec) -> Doc {
    let mut text = format!("{}\n{}", spec.name, spec.description);
    let mut params = String::new();
    parameter_text(&spec.input_schema, &mut params, 0);
    text.push('\n');
    text.push_str(&params);
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut len = 0;
    let name_terms = terms(&spec.name);
    for _ in 0..NAME_WEIGHT {
        for t in &name_terms {
            *counts.entry(t.clone()).or_default() += 1;
            len += 1;
        }
    }
    for t in terms(&spec.description).into_iter().chain(terms(&params)) {
        *counts.entry(t).or_default() += 1;
        len += 1;
    }
    Doc {
        name: spec.name.clone(),
        text,
        terms: counts,
        len,
    }
}

/// The names and descriptions of a schema's properties, nested ones included (to a depth).
fn parameter_text(schema: &Value, out: &mut String, depth: usize) {
    if depth > 4 {
        return;
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, prop) in props {
        out.push_str(name);
        out.push(' ');
        if let Some(d) = prop.get("description").and_then(Value::as_str) {
            out.push_str(d);
            out.push(' ');
        }
        for e in prop
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(s) = e.as_str() {
                out.push_str(s);
                out.push(' ');
            }
        }
        parameter_text(prop, out, depth + 1);
        if let Some(items) = prop.get("items") {
            parameter_text(items, out, depth + 1);
        }
    }
}

/// Whether `c` belongs to a script written without spaces between words.
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // kana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xF900..=0xFAFF) // CJK compatibility ideographs
}

/// The search terms of `text`: words split at non-alphanumerics, underscores and lower-upper
/// case changes, lowercased and reduced; pairs of characters in unspaced scripts.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut run: Vec<char> = Vec::new();
    let mut prev_lower = false;
    let flush_word = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let w = reduce(&word.to_lowercase());
            if !w.is_empty() && !is_stop_word(&w) {
                out.push(w);
            }
            word.clear();
        }
    };
    let flush_run = |run: &mut Vec<char>, out: &mut Vec<String>| {
        match run.len() {
            0 => {}
            1 => out.push(run[0].to_string()),
            _ => {
                for pair in run.windows(2) {
                    out.push(pair.iter().collect());
                }
            }
        }
        run.clear();
    };
    for c in text.chars() {
        if unspaced(c) {
            flush_word(&mut word, &mut out);
            run.push(c);
            prev_lower = false;
            continue;
        }
        flush_run(&mut run, &mut out);
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                flush_word(&mut word, &mut out);
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            word.push(c);
        } else {
            flush_word(&mut word, &mut out);
            prev_lower = false;
        }
    }
    flush_word(&mut word, &mut out);
    flush_run(&mut run, &mut out);
    out
}

/// English function words, which say nothing of what a tool does.
fn is_stop_word(w: &str) -> bool {
    matches!(
        w,
        "a" | "an"
            | "the"
            | "and"
            | "or"
            | "of"
            | "to"
            | "in"
            | "on"
            | "for"
            | "by"
            | "with"
            | "is"
            | "are"
            | "be"
            | "it"
            | "this"
            | "that"
            | "from"
            | "as"
            | "at"
            | "if"
            | "i"
            | "me"
            | "my"
            | "we"
            | "our"
            | "you"
            | "your"
    )
}

/// A light English suffix rule: plurals and the common verb endings, so `issues` meets
/// `issue` and `created` meets `create`. Short words are kept whole.
fn reduce(w: &str) -> String {
    if w.len() <= 3 || !w.is_ascii() {
        return w.to_owned();
    }
    for (suffix, keep) in [
        ("ies", "y"),
        ("sses", "ss"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ] {
        if let Some(stem) = w.strip_suffix(suffix)
            && stem.len() >= 3
            && !(suffix == "s" && stem.ends_with('s'))
        {
            let mut out = stem.to_owned();
            out.push_str(keep);
            // `created` → `creat`, `create` → `creat`: both sides lose a final `e`.
            return out.trim_end_matches('e').to_owned();
        }
    }
    w.trim_end_matches('e').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, description: &str, props: Value) -> ToolSpec {
        ToolSpec::new(
            name,
            description,
            json!({"type": "object", "properties": props}),
        )
    }

    #[test]
    fn names_split_into_words_and_words_are_reduced() {
        assert_eq!(terms("list_open_issues"), ["list", "open", "issu"]);
        assert_eq!(terms("getFileContents"), ["get", "fil", "content"]);
        assert_eq!(terms("created"), terms("create"));
        assert_eq!(terms("queries"), terms("query"));
        assert_eq!(terms("销售额"), ["销售", "售额"]);
    }

    #[test]
    fn the_tool_that_says_it_ranks_first() {
        let index = ToolIndex::new(&[
            spec(
                "create_issue",
                "Open a new issue in a repository.",
                json!({"title": {"type": "string"}}),
            ),
            spec(
                "send_message",
                "Post a message to a chat channel.",
                json!({"channel": {"type": "string", "description": "Channel id"}}),
            ),
            spec(
                "run_query",
                "Run a read-only SQL query against the warehouse.",
                json!({"sql": {"type": "string"}}),
            ),
        ]);
        assert_eq!(index.bm25("post to the channel", 3)[0].name, "send_message");
        assert_eq!(index.bm25("SQL warehouse", 3)[0].name, "run_query");
        assert_eq!(index.bm25("opening issues", 3)[0].name, "create_issue");
        assert!(index.bm25("zebra", 3).is_empty());
        let found = index.regex("^run_", 5).unwrap();
        assert_eq!(found.len(), 1);
        assert!(index.regex("(unclosed", 5).is_err());
        assert!(index.regex(&"a".repeat(300), 5).is_err());
    }
}

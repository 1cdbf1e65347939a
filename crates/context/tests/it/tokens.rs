//! Token counts against the shared vectors, and against tiktoken-rs on real transcripts and on
//! the project's corpus.

// Helpers outside #[test] fns fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use ba_context::entry_texts;
use ba_context::{Encoding, MessageOverhead};
use serde_json::Value;

/// The shared token vectors: `None` (a skip, or a failure under CI) when the file is absent;
/// a file that is there but cannot be read or parsed fails the test.
fn vectors() -> Option<Value> {
    let path = ba_testkit::fixture("tokens/vectors.json")?;
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
    let value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    Some(value)
}

fn ids(v: &Value) -> Vec<u32> {
    v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn every_vector_matches_exactly() {
    let Some(all) = vectors() else { return };
    let list = all["vectors"].as_array().unwrap();
    assert!(list.len() >= 100);
    for v in list {
        let enc: Encoding = v["encoding"].as_str().unwrap().parse().unwrap();
        let text = v["text"].as_str().unwrap();
        let want = ids(v);
        let name = v["id"].as_str().unwrap();
        match v["allowed_special"].as_str().unwrap() {
            "none" => {
                assert_eq!(enc.encode(text), want, "{name}: ids");
                assert_eq!(enc.count(text), want.len(), "{name}: count");
            }
            "all" => {
                assert_eq!(enc.encode_with_special_tokens(text), want, "{name}: ids");
                // Counting treats special-token text as plain text; it equals ordinary encoding.
                assert_eq!(enc.count(text), enc.encode(text).len(), "{name}: count");
            }
            other => panic!("{name}: unknown allowed_special {other}"),
        }
        assert_eq!(v["count"].as_u64().unwrap() as usize, want.len(), "{name}");
        assert_eq!(enc.decode(&want).as_deref(), Some(text), "{name}: decode");
    }
}

#[test]
fn message_count_vectors_match_the_cookbook_scheme() {
    let Some(all) = vectors() else { return };
    for v in all["message_count_vectors"].as_array().unwrap() {
        let enc: Encoding = v["encoding"].as_str().unwrap().parse().unwrap();
        let model = v["model"].as_str().unwrap();
        let overhead = MessageOverhead::for_model(model);
        if let Some(n) = v["tokens_per_message"].as_i64() {
            assert_eq!(overhead.per_message, n, "{model}");
            assert_eq!(
                overhead.per_name,
                v["tokens_per_name"].as_i64().unwrap(),
                "{model}"
            );
            assert_eq!(
                overhead.reply_priming,
                v["reply_priming"].as_i64().unwrap(),
                "{model}"
            );
        }
        let mut total = overhead.reply_priming as usize;
        for m in v["messages"].as_array().unwrap() {
            let content = m["content"].as_str().unwrap_or("");
            let call = m.get("function_call").map(|f| {
                (
                    f["name"].as_str().unwrap(),
                    f["arguments"].as_str().unwrap(),
                )
            });
            let calls: Vec<(&str, &str)> = call.into_iter().collect();
            total += overhead.message(
                &enc,
                m["role"].as_str().unwrap(),
                &[content],
                m["name"].as_str(),
                &calls,
            );
        }
        assert_eq!(total, v["count"].as_u64().unwrap() as usize, "{}", v["id"]);
    }
}

/// The reference implementation the counts are checked against.
fn tiktoken(enc: Encoding) -> &'static tiktoken_rs::CoreBPE {
    match enc {
        Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
    }
}

/// Every `.jsonl` transcript of the shared fixtures (a skip, or a failure under CI, when the
/// folder is absent; an unreadable folder or an empty one fails).
fn transcripts() -> Option<Vec<PathBuf>> {
    let dir = ba_testkit::fixture("transcripts")?;
    let mut out = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        let read = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for e in read {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(
        !out.is_empty(),
        "no .jsonl transcript under {}",
        dir.display()
    );
    Some(out)
}

#[test]
fn transcript_counts_equal_tiktoken_rs() {
    let Some(files) = transcripts() else { return };
    let mut pieces = 0usize;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let log = ba_protocol::claude_code::session_to_log(&text).value;
        for entry in &log {
            let (texts, _) = entry_texts(entry);
            let args = entry.calls().iter().map(|c| c.function.arguments.as_str());
            for t in texts.iter().map(|t| t.as_ref()).chain(args) {
                for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
                    assert_eq!(
                        enc.count(t),
                        tiktoken(enc).encode_ordinary(t).len(),
                        "{} entry {} ({enc})",
                        path.display(),
                        entry.id
                    );
                }
                pieces += 1;
            }
        }
    }
    assert!(pieces > 1_000, "only {pieces} texts compared");
}

#[test]
fn corpus_counts_equal_tiktoken_rs() {
    let parts = crate::corpus::generate();
    let whole: String = parts.iter().map(|p| p.text.as_str()).collect();
    for enc in [Encoding::Cl100kBase, Encoding::O200kBase] {
        for part in &parts {
            let want = tiktoken(enc).encode_ordinary(&part.text).len();
            assert_eq!(enc.count(&part.text), want, "{} ({enc})", part.name);
        }
        // Over two megabytes: counted in chunks on all cores.
        let want = tiktoken(enc).encode_ordinary(&whole).len();
        assert_eq!(enc.count(&whole), want, "the whole corpus ({enc})");
    }
}

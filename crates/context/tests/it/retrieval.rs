//! The retrieval measure: each conversation of the three planted sets again, with a final
//! question that names one of its planted items; is the named item in the window, by
//! key-messages alone, with retrieval (BM25) around it, and with retrieval ranking by BM25 and
//! embeddings?
//!
//! Every set names its items as a user would: the first set's figures by their label and the
//! round the assistant's note named, its constraints by what they are about (English); the
//! second set's figures by region and round, its constraints in the conversation's language;
//! the third set's figures by their measure and slice, its constraints by what they are about.
//! Each conversation is built to 4 % of its size (at 10 % key-messages alone keeps nearly every
//! item) — other sizes with `BA_AGENT_RETRIEVAL_SHARES=0.04,0.10`.
//!
//! The salt is 11 (`BA_AGENT_FIDELITY_SALTS=11,29,47` for the three of the fidelity test), the
//! set the third (`BA_AGENT_RETRIEVAL_SETS=1,2,3` for all three), every conversation of a salt
//! (`BA_AGENT_RETRIEVAL_CONVERSATIONS=N` for the first N) and every item a conversation names
//! (`BA_AGENT_RETRIEVAL_ITEMS=0,5` for its first figure and its first constraint). The vectors are the test kit's hashed
//! bag of words unless `BA_AGENT_RETRIEVAL_EMBEDDINGS=URL` names an OpenAI-compatible endpoint
//! by the base its `/embeddings` hangs from (`http://127.0.0.1:PORT/v1` for the llama.cpp
//! server `.ci/llama.sh` starts for embeddings: its `/embeddings` without `/v1` answers in
//! another shape, and the run fails naming it). With
//! `BA_AGENT_RETRIEVAL_TABLE=FILE` the table goes to FILE for `docs/BENCHMARKS.md`.

use std::sync::{Arc, Mutex};

use ba_context::{Encoding, MessageCounter, Pipeline};
use ba_protocol::{LogEntry, LogRole};

use crate::planted::{Asked, build};

/// Vectors for the measure: the test kit's hashed bag of words, or an endpoint's, each text
/// embedded once.
#[derive(Debug)]
struct MeasureEmbedder {
    endpoint: Option<(tokio::runtime::Runtime, ba_model::OpenAiEmbeddings, String)>,
    seen: Mutex<std::collections::HashMap<String, Vec<f32>>>,
    /// The endpoint's failures, each leaving one compaction to BM25 alone.
    failed: Mutex<Vec<String>>,
}

impl MeasureEmbedder {
    fn from_env() -> Self {
        let endpoint = std::env::var("BA_AGENT_RETRIEVAL_EMBEDDINGS")
            .ok()
            .map(|url| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                // A small model on a shared machine embeds a text a second or slower: a batch
                // must not time out (its compaction would rank by BM25 alone, unseen).
                let client = ba_model::OpenAiEmbeddings::new(&url, "embeddings", None)
                    .unwrap()
                    .with_batch_size(16)
                    .with_timeout(std::time::Duration::from_secs(900));
                (rt, client, url)
            });
        Self {
            endpoint,
            seen: Mutex::default(),
            failed: Mutex::default(),
        }
    }

    fn name(&self) -> String {
        match &self.endpoint {
            Some((_, _, url)) => format!("the endpoint at {url}"),
            None => "the test kit's hashed bag of words".to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl ba_context::Embedder for MeasureEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ba_context::EmbedError> {
        let missing: Vec<String> = {
            let seen = self.seen.lock().unwrap();
            let mut m: Vec<String> = texts
                .iter()
                .filter(|t| !seen.contains_key(*t))
                .cloned()
                .collect();
            m.sort();
            m.dedup();
            m
        };
        let vectors: Vec<Vec<f32>> = match &self.endpoint {
            // Called inside the context crate's executor, not a runtime: the endpoint's own
            // runtime drives the request.
            Some((rt, client, _)) => {
                use ba_model::Embeddings as _;
                rt.block_on(client.embed(&missing)).inspect_err(|e| {
                    self.failed.lock().unwrap().push(e.to_string());
                })?
            }
            None => missing
                .iter()
                .map(|t| ba_testkit::model::hashed_embedding(t))
                .collect(),
        };
        let mut seen = self.seen.lock().unwrap();
        seen.extend(missing.into_iter().zip(vectors));
        Ok(texts.iter().map(|t| seen[t].clone()).collect())
    }
}

/// The first set, the second, the third.
const SETS: [&str; 3] = ["first", "second", "third"];

fn asked(set: usize, salt: u64) -> Vec<Asked> {
    match set {
        0 => crate::fidelity::asked(salt),
        1 => crate::fidelity_shapes::asked(salt),
        _ => crate::fidelity_bank::asked(salt),
    }
}

fn env_list<T: std::str::FromStr>(name: &str) -> Option<Vec<T>> {
    std::env::var(name)
        .ok()
        .map(|s| s.split(',').filter_map(|p| p.trim().parse().ok()).collect())
        .filter(|v: &Vec<T>| !v.is_empty())
}

/// Named items in the window: by retrieval with embeddings, by retrieval (BM25), by
/// key-messages alone, of how many.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Found {
    embeddings: usize,
    bm25: usize,
    alone: usize,
    total: usize,
}

impl Found {
    fn add(&mut self, kept: [bool; 3]) {
        self.embeddings += usize::from(kept[0]);
        self.bm25 += usize::from(kept[1]);
        self.alone += usize::from(kept[2]);
        self.total += 1;
    }
}

/// The counts of one size: (set, row) → found, rows named `all facts`, `all figures`,
/// `fact: …` and `figure: …` (a figure's row is its shape).
#[derive(Debug, Default)]
struct Measure {
    rows: Vec<((usize, String), Found)>,
}

impl Measure {
    fn add(&mut self, set: usize, row: &str, kept: [bool; 3]) {
        let key = (set, row.to_owned());
        match self.rows.iter_mut().find(|r| r.0 == key) {
            Some(r) => r.1.add(kept),
            None => {
                let mut f = Found::default();
                f.add(kept);
                self.rows.push((key, f));
            }
        }
    }

    fn get(&self, set: usize, row: &str) -> Found {
        self.rows
            .iter()
            .find(|r| r.0.0 == set && r.0.1 == row)
            .map(|r| r.1)
            .unwrap_or_default()
    }

    /// The figure row of `set` with the smallest share by `pick` (the first by name of those
    /// tied), and that share.
    fn worst(&self, set: usize, pick: impl Fn(Found) -> usize) -> Option<(String, f64)> {
        let mut rows: Vec<(String, f64)> = self
            .rows
            .iter()
            .filter(|r| r.0.0 == set && r.0.1.starts_with("figure:"))
            .map(|r| (r.0.1.clone(), pick(r.1) as f64 / r.1.total.max(1) as f64))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows.into_iter().min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

fn pct(a: usize, t: usize) -> String {
    format!("{:.1} % ({a}/{t})", a as f64 * 100.0 / t.max(1) as f64)
}

fn cells(f: Found) -> String {
    format!(
        "{} | {} | {}",
        pct(f.embeddings, f.total),
        pct(f.bm25, f.total),
        pct(f.alone, f.total)
    )
}

/// The tables of one size: every set's facts and figures, then each set by shape, its worst
/// shape named for each pipeline.
fn table(m: &Measure, share: f64, sets: &[usize]) -> String {
    let head = "with embeddings | BM25 alone | key-messages alone";
    let mut out = format!(
        "**At {:.0} % of each conversation.**\n\n| set | named items | {head} |\n|---|---|---|---|---|\n",
        share * 100.0
    );
    for &set in sets {
        for row in ["all facts", "all figures"] {
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                SETS[set],
                row.trim_start_matches("all "),
                cells(m.get(set, row))
            ));
        }
    }
    for &set in sets {
        out.push_str(&format!(
            "\n{} set by shape:\n\n| named item | {head} |\n|---|---|---|---|\n",
            capitalised(SETS[set])
        ));
        let mut rows: Vec<&String> = m
            .rows
            .iter()
            .filter(|r| r.0.0 == set && !r.0.1.starts_with("all "))
            .map(|r| &r.0.1)
            .collect();
        rows.sort();
        for row in rows {
            out.push_str(&format!("| {row} | {} |\n", cells(m.get(set, row))));
        }
        let worst = |pick: fn(Found) -> usize| {
            m.worst(set, pick)
                .map(|(row, s)| {
                    format!(
                        "{} ({:.1} %)",
                        row.trim_start_matches("figure: "),
                        s * 100.0
                    )
                })
                .unwrap_or_default()
        };
        out.push_str(&format!(
            "\nWorst shape: with embeddings {}; BM25 alone {}; key-messages alone {}.\n",
            worst(|f| f.embeddings),
            worst(|f| f.bm25),
            worst(|f| f.alone)
        ));
    }
    out
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[test]
fn retrieval_brings_the_named_item_back() {
    let counter = MessageCounter::exact(Encoding::Cl100kBase);
    // One salt unless told: three take long in a debug build.
    let salts = match std::env::var("BA_AGENT_FIDELITY_SALTS") {
        Ok(_) => crate::fidelity_bank::salts(),
        Err(_) => vec![11],
    };
    let shares: Vec<f64> = env_list("BA_AGENT_RETRIEVAL_SHARES").unwrap_or_else(|| vec![0.04]);
    let sets: Vec<usize> = env_list::<usize>("BA_AGENT_RETRIEVAL_SETS")
        .map(|v| {
            v.into_iter()
                .filter(|s| (1..=3).contains(s))
                .map(|s| s - 1)
                .collect()
        })
        // The third set unless told: the three at one salt take over ten minutes of a core in
        // a debug build.
        .unwrap_or_else(|| vec![2]);
    let per_salt: Option<usize> = std::env::var("BA_AGENT_RETRIEVAL_CONVERSATIONS")
        .ok()
        .and_then(|n| n.parse().ok());
    let which: Option<Vec<usize>> = env_list("BA_AGENT_RETRIEVAL_ITEMS");
    let embedder = Arc::new(MeasureEmbedder::from_env());
    let vectors = embedder.name();
    let pipelines = [
        Pipeline::named_with("retrieval", None, Some(Arc::clone(&embedder) as _)).unwrap(),
        Pipeline::named("retrieval", None).unwrap(),
        Pipeline::named("key-messages", None).unwrap(),
    ];
    let mut measures: Vec<Measure> = shares.iter().map(|_| Measure::default()).collect();
    let mut broken = 0;
    let mut conversations = 0;
    let started = std::time::Instant::now();
    for &set in &sets {
        for &salt in &salts {
            let mut all = asked(set, salt);
            all.truncate(per_salt.unwrap_or(usize::MAX));
            for c in all {
                conversations += 1;
                // Every conversation plants what its questions name.
                let text: String = c.log.iter().map(|e| e.text().into_owned()).collect();
                assert!(c.items.iter().all(|i| text.contains(&i.proof)));
                let items = c
                    .items
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| which.as_ref().is_none_or(|w| w.contains(k)));
                for (_, item) in items {
                    let mut log = c.log.clone();
                    log.push(
                        LogEntry::new("final", LogRole::User, "2026-01-01T00:00:00Z")
                            .with_text(item.question.clone()),
                    );
                    for (share, m) in shares.iter().zip(&mut measures) {
                        let mut kept = [false; 3];
                        for (k, p) in pipelines.iter().enumerate() {
                            let built = build(&log, p, *share, &counter);
                            broken += built.broken_pairs + usize::from(built.over_budget);
                            kept[k] = built.text.contains(&item.proof);
                        }
                        m.add(set, &item.row, kept);
                        m.add(
                            set,
                            if item.fact {
                                "all facts"
                            } else {
                                "all figures"
                            },
                            kept,
                        );
                    }
                }
            }
        }
    }
    let mut out = String::new();
    for (share, m) in shares.iter().zip(&measures) {
        out.push_str(&table(m, *share, &sets));
        out.push('\n');
    }
    out.push_str(&format!(
        "Salts {salts:?}; {conversations} conversations; the first set's eight conversations a salt with eight named items each, the second's 36 with five, the third's ten with eight; retrieval's share of the window: 10 %; vectors: {vectors}; {:.0} s. Broken pairs or builds over budget: {broken}.\n",
        started.elapsed().as_secs_f64()
    ));
    eprintln!("{out}");
    if let Ok(path) = std::env::var("BA_AGENT_RETRIEVAL_TABLE") {
        std::fs::write(&path, &out).unwrap();
    }
    assert_eq!(broken, 0);
    let failed = embedder.failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "the endpoint failed: {failed:?}");
    // Named items of every set, at each size: as many in the window with retrieval as
    // without, with embeddings or not.
    for (share, m) in shares.iter().zip(&measures) {
        for &set in &sets {
            let all = |pick: fn(Found) -> usize| {
                pick(m.get(set, "all facts")) + pick(m.get(set, "all figures"))
            };
            let (e, b, a) = (all(|f| f.embeddings), all(|f| f.bm25), all(|f| f.alone));
            assert!(
                b >= a && e >= a,
                "{} set at {share}: {e} with embeddings, {b} with BM25 alone, {a} without",
                SETS[set]
            );
        }
    }
}

//! The third planted-facts set: conversations whose constraints come from a bank of phrasings
//! (asides, corrections, sentences inside long paragraphs, afterthoughts; English and Chinese;
//! no marker word) and whose figures come in the shapes real tools print (`planted::shapes`:
//! psql and pandas tables, pivots, ROLLUP rows, nested documents, logs, tracebacks, prose).
//! Neither list is read by the strategies.
//!
//! Every salt gives other conversations of the same kinds: three salts run here (or the ones in
//! `BA_AGENT_FIDELITY_SALTS`, comma-separated). Each build is scored by figure shape (is the
//! figure in the window, and on a line with its label?) and by phrasing (is the constraint's
//! value in the window?). The goals, at 10 % of a conversation's size: the worst shape keeps
//! ≥ 70 % of its figures, every phrasing ≥ 95 % of its facts, and every shape and phrasing
//! ≥ 3× what keep-most-recent keeps. With `BA_AGENT_FIDELITY_BANK_TABLE=FILE` the table goes
//! to FILE for `docs/BENCHMARKS.md`.

use ba_context::{Encoding, MessageCounter, Pipeline};
use ba_protocol::{LogEntry, LogRole, LogToolCall};

use crate::planted::bank::{self, Kind, Lang, Style};
use crate::planted::shapes::{self, Output, Shape};
use crate::planted::{Asked, Built, Named, Rng, build};

/// A constraint as planted: its kind, how it was said, in which language, and its proof.
#[derive(Debug, Clone)]
pub struct Fact {
    pub kind: Kind,
    pub style: Style,
    pub lang: Lang,
    pub proof: String,
}

/// One generated conversation with what it planted.
pub struct Conversation {
    pub log: Vec<LogEntry>,
    pub lang: Lang,
    pub facts: Vec<Fact>,
    pub figures: Vec<(Shape, Output)>,
}

fn entry(id: &mut usize, role: LogRole) -> LogEntry {
    *id += 1;
    LogEntry::new(format!("m{id}"), role, "2026-01-01T00:00:00Z")
}

/// The conversation of `seed`: 30–50 rounds in `lang`, ten constraints stated in the first two
/// thirds (styles from `first_style` on, a correction restating an earlier value), one or two
/// tool outputs a round, their shapes in turn from `first_shape` on.
pub fn conversation(seed: u64, lang: Lang, first_style: usize, first_shape: usize) -> Conversation {
    let mut rng = Rng(seed);
    let rounds = 30 + rng.below(21) as usize;
    let mut kinds: Vec<Kind> = Kind::ALL.to_vec();
    // (round, kind, style, value, the value a correction corrects)
    let mut plan: Vec<(usize, Kind, Style, bank::Value, Option<bank::Value>)> = Vec::new();
    let mut facts = Vec::new();
    for k in 0..Kind::ALL.len() {
        let kind = kinds.remove(rng.below(kinds.len() as u64) as usize);
        let style = Style::ALL[(first_style + k) % Style::ALL.len()];
        let value = kind.value(lang, &mut rng);
        let latest = rounds * 2 / 3;
        if style == Style::Correction {
            // The wrong value first, plainly; the correction some rounds later.
            let wrong = kind.value(lang, &mut rng);
            let at = rng.below((latest - 4) as u64) as usize;
            plan.push((at, kind, Style::Plain, wrong.clone(), None));
            let later = at + 2 + rng.below((latest - at - 1) as u64) as usize;
            plan.push((later, kind, style, value.clone(), Some(wrong)));
        } else {
            plan.push((
                rng.below(latest as u64) as usize,
                kind,
                style,
                value.clone(),
                None,
            ));
        }
        facts.push(Fact {
            kind,
            style,
            lang,
            proof: value.proof,
        });
    }
    let mut id = 0;
    let mut log = Vec::new();
    let mut figures = Vec::new();
    let mut shape_at = first_shape;
    for round in 0..rounds {
        let stated: Vec<(Kind, Style, bank::Value, Option<bank::Value>)> = plan
            .iter()
            .filter(|p| p.0 == round)
            .map(|p| (p.1, p.2, p.3.clone(), p.4.clone()))
            .collect();
        let long = rng.chance(50);
        log.push(
            entry(&mut id, LogRole::User).with_text(bank::turn(lang, long, &stated, &mut rng)),
        );
        let calls = 1 + usize::from(rng.chance(35));
        let mut ask = entry(&mut id, LogRole::Assistant).with_text(match lang {
            Lang::En => "Let me look at the data.",
            Lang::Zh => "我先查一下数据。",
        });
        let mut group = Vec::new();
        let mut results = Vec::new();
        for c in 0..calls {
            let shape = Shape::ALL[shape_at % Shape::ALL.len()];
            shape_at += 1;
            let out = shapes::output(shape, &mut rng);
            let call_id = format!("call_{round}_{c}");
            let args = serde_json::from_str::<serde_json::Value>(&out.call)
                .unwrap_or_else(|_| serde_json::json!({ "query": out.call }));
            group.push(LogToolCall::new(call_id.clone(), out.tool, &args));
            let mut result = entry(&mut id, LogRole::Tool).with_text(out.text.clone());
            result.tool_call_id = Some(call_id);
            result.tool_name = Some(out.tool.to_owned());
            if shape == Shape::Traceback {
                result.is_error = Some(true);
            }
            results.push(result);
            figures.push((shape, out));
        }
        ask.tool_calls = Some(group);
        log.push(ask);
        log.extend(results);
        log.push(entry(&mut id, LogRole::Assistant).with_text(match lang {
            Lang::En => {
                format!("Round {round}: the pattern holds; I will look at the details next.")
            }
            Lang::Zh => format!("第 {round} 轮：规律没有变化，接下来看细节。"),
        }));
    }
    Conversation {
        log,
        lang,
        facts,
        figures,
    }
}

/// The conversations of one salt: ten, half in English, half in Chinese.
pub fn conversations(salt: u64) -> Vec<Conversation> {
    (0..10u64)
        .map(|n| {
            let lang = if n % 2 == 0 { Lang::En } else { Lang::Zh };
            conversation(
                salt.wrapping_mul(1_000_003).wrapping_add(n * 7_919),
                lang,
                n as usize,
                (n as usize * 5 + salt as usize) % Shape::ALL.len(),
            )
        })
        .collect()
}

/// The salts the goal test runs.
pub fn salts() -> Vec<u64> {
    std::env::var("BA_AGENT_FIDELITY_SALTS")
        .ok()
        .map(|s| s.split(',').filter_map(|p| p.trim().parse().ok()).collect())
        .filter(|v: &Vec<u64>| !v.is_empty())
        .unwrap_or_else(|| vec![11, 29, 47])
}

/// Kept of total.
#[derive(Debug, Default, Clone, Copy)]
pub struct Count {
    pub kept: usize,
    pub labelled: usize,
    pub total: usize,
}

impl Count {
    pub fn share(self) -> f64 {
        self.kept as f64 / self.total.max(1) as f64
    }
    pub fn labelled_share(self) -> f64 {
        self.labelled as f64 / self.total.max(1) as f64
    }
    fn add(&mut self, kept: bool, labelled: bool) {
        self.total += 1;
        self.kept += usize::from(kept);
        self.labelled += usize::from(labelled);
    }
}

/// Counts by row name for one strategy and share.
#[derive(Debug, Default, Clone)]
pub struct Column {
    pub rows: Vec<(String, Count)>,
    pub broken_pairs: usize,
    pub over_budget: usize,
}

impl Column {
    fn add(&mut self, row: &str, kept: bool, labelled: bool) {
        match self.rows.iter_mut().find(|(n, _)| n == row) {
            Some((_, c)) => c.add(kept, labelled),
            None => {
                let mut c = Count::default();
                c.add(kept, labelled);
                self.rows.push((row.to_owned(), c));
            }
        }
    }
    pub fn get(&self, row: &str) -> Count {
        self.rows
            .iter()
            .find(|(n, _)| n == row)
            .map(|r| r.1)
            .unwrap_or_default()
    }
}

pub fn shape_row(shape: Shape) -> String {
    format!("figure: {}", shape.name())
}

pub fn phrasing_row(style: Style, lang: Lang) -> String {
    format!("fact: {}, {}", style.name(), lang.name())
}

/// Scores one built window of `c` into `col`.
pub fn score(c: &Conversation, built: &Built, col: &mut Column) {
    for (shape, out) in &c.figures {
        let kept = built.text.contains(&out.figure);
        col.add(
            &shape_row(*shape),
            kept,
            built.labelled(&out.figure, &out.label),
        );
    }
    for f in &c.facts {
        let kept = built.text.contains(&f.proof);
        col.add(&phrasing_row(f.style, f.lang), kept, kept);
    }
    col.broken_pairs += built.broken_pairs;
    col.over_budget += usize::from(built.over_budget);
}

/// Every column of the table: (strategy, share) → counts, over all salts and per salt.
pub struct Scores {
    pub columns: Vec<((&'static str, f64), Column)>,
    pub per_salt: Vec<(u64, (&'static str, f64), Column)>,
}

impl Scores {
    pub fn run(salts: &[u64], counter: &MessageCounter) -> Self {
        let mut columns: Vec<((&'static str, f64), Column)> = Vec::new();
        let mut per_salt = Vec::new();
        for &salt in salts {
            let convs = conversations(salt);
            for strategy in ["key-messages", "truncate"] {
                let pipeline = Pipeline::named(strategy, None).unwrap();
                for share in [0.10, 0.25] {
                    let mut col = Column::default();
                    for c in &convs {
                        score(c, &build(&c.log, &pipeline, share, counter), &mut col);
                    }
                    match columns.iter_mut().find(|(k, _)| *k == (strategy, share)) {
                        Some((_, all)) => {
                            for (row, n) in &col.rows {
                                let slot = match all.rows.iter_mut().find(|(r, _)| r == row) {
                                    Some(s) => s,
                                    None => {
                                        all.rows.push((row.clone(), Count::default()));
                                        all.rows.last_mut().unwrap()
                                    }
                                };
                                slot.1.kept += n.kept;
                                slot.1.labelled += n.labelled;
                                slot.1.total += n.total;
                            }
                            all.broken_pairs += col.broken_pairs;
                            all.over_budget += col.over_budget;
                        }
                        None => columns.push(((strategy, share), col.clone())),
                    }
                    per_salt.push((salt, (strategy, share), col));
                }
            }
        }
        for (_, col) in &mut columns {
            col.rows.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Self { columns, per_salt }
    }

    pub fn column(&self, strategy: &str, share: f64) -> &Column {
        &self
            .columns
            .iter()
            .find(|(k, _)| k.0 == strategy && (k.1 - share).abs() < 1e-9)
            .unwrap()
            .1
    }

    /// The worst figure row and the worst fact row of a column.
    pub fn worst(col: &Column) -> ((String, f64), (String, f64)) {
        let pick = |prefix: &str| {
            col.rows
                .iter()
                .filter(|(n, _)| n.starts_with(prefix))
                .map(|(n, c)| (n.clone(), c.share()))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or_default()
        };
        (pick("figure:"), pick("fact:"))
    }

    pub fn table(&self, salts: &[u64]) -> String {
        let pct = |x: f64| format!("{:.1} %", x * 100.0);
        let km10 = self.column("key-messages", 0.10);
        let mut out = String::from(
            "| row | key-messages 10 % | with label | truncate 10 % | key-messages 25 % | with label | truncate 25 % |\n|---|---|---|---|---|---|---|\n",
        );
        for (row, _) in &km10.rows {
            let c = |s: &str, sh: f64| self.column(s, sh).get(row);
            let labelled = |n: Count| {
                if row.starts_with("figure:") {
                    pct(n.labelled_share())
                } else {
                    String::new()
                }
            };
            let k10 = c("key-messages", 0.10);
            let k25 = c("key-messages", 0.25);
            out.push_str(&format!(
                "| {row} | {} ({}/{}) | {} | {} | {} ({}/{}) | {} | {} |\n",
                pct(k10.share()),
                k10.kept,
                k10.total,
                labelled(k10),
                pct(c("truncate", 0.10).share()),
                pct(k25.share()),
                k25.kept,
                k25.total,
                labelled(k25),
                pct(c("truncate", 0.25).share()),
            ));
        }
        out.push('\n');
        for share in [0.10, 0.25] {
            let ((fs, f), (ps, p)) = Self::worst(self.column("key-messages", share));
            out.push_str(&format!(
                "key-messages at {:.0} %, salts {salts:?}: worst shape {fs} ({}), worst phrasing {ps} ({}).",
                share * 100.0,
                pct(f),
                pct(p)
            ));
            for (salt, k, col) in &self.per_salt {
                if k.0 == "key-messages" && (k.1 - share).abs() < 1e-9 {
                    let ((fs, f), (ps, p)) = Self::worst(col);
                    out.push_str(&format!(" Salt {salt}: {fs} {}, {ps} {}.", pct(f), pct(p)));
                }
            }
            out.push('\n');
        }
        let broken: usize = self.columns.iter().map(|c| c.1.broken_pairs).sum();
        let over: usize = self.columns.iter().map(|c| c.1.over_budget).sum();
        out.push_str(&format!(
            "Every build of every strategy, size and salt: {broken} broken pairs, {over} over budget.\n"
        ));
        out
    }
}

#[test]
fn the_bank_set_meets_the_fidelity_goals() {
    let counter = MessageCounter::exact(Encoding::Cl100kBase);
    let salts = salts();
    // Every conversation plants what it says it plants.
    for c in salts.iter().flat_map(|s| conversations(*s)) {
        let text: String = c.log.iter().map(|e| e.text().into_owned()).collect();
        assert!(c.figures.iter().all(|(_, o)| text.contains(&o.figure)));
        assert!(c.facts.iter().all(|f| text.contains(&f.proof)));
        let _ = c.lang;
    }
    let scores = Scores::run(&salts, &counter);
    let table = scores.table(&salts);
    eprintln!("{table}");
    if let Ok(path) = std::env::var("BA_AGENT_FIDELITY_BANK_TABLE") {
        std::fs::write(&path, &table).unwrap();
    }
    for ((strategy, share), col) in &scores.columns {
        assert_eq!(col.broken_pairs, 0, "{strategy} at {share}: broken pairs");
        assert_eq!(col.over_budget, 0, "{strategy} at {share}: over budget");
    }
    let ours = scores.column("key-messages", 0.10);
    let theirs = scores.column("truncate", 0.10);
    let ((fs, f), (ps, p)) = Scores::worst(ours);
    assert!(f >= 0.70, "worst shape at 10 %: {fs} {f:.3}");
    assert!(p >= 0.95, "worst phrasing at 10 %: {ps} {p:.3}");
    for (row, n) in &ours.rows {
        let b = theirs.get(row).share();
        assert!(
            n.share() >= 3.0 * b,
            "{row}: {:.3} is not 3× keep-most-recent's {b:.3}",
            n.share()
        );
    }
}

/// The third set's conversations of `salt` for the retrieval measure, each with five figures
/// (named by their measure and slice) and three constraints (named by what they are about) a
/// final question names.
pub fn asked(salt: u64) -> Vec<Asked> {
    conversations(salt)
        .into_iter()
        .enumerate()
        .map(|(n, c)| {
            let mut items = Vec::new();
            for k in 0..5 {
                let (shape, out) = &c.figures[(n * 7 + k * 11) % c.figures.len()];
                items.push(Named {
                    question: out.question.clone(),
                    proof: out.figure.clone(),
                    row: shape_row(*shape),
                    fact: false,
                });
            }
            for k in 0..3 {
                let f = &c.facts[(n + k * 3) % c.facts.len()];
                items.push(Named {
                    question: f.kind.question(f.lang).to_owned(),
                    proof: f.proof.clone(),
                    row: format!("fact: {:?}", f.kind),
                    fact: true,
                });
            }
            Asked { log: c.log, items }
        })
        .collect()
}

//! What the planted-facts benchmarks share: a seeded generator, the build of one conversation
//! down to a share of its size, and the tally of what survived. `bank` and `shapes` are the
//! third set's phrasings of constraints and shapes of tool output.

pub mod bank;
pub mod shapes;

use std::collections::HashSet;

use ba_context::{ContextBudget, MessageCounter, Pipeline, block_on};
use ba_protocol::LogEntry;

/// A 64-bit LCG: every run generates the same conversations.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// An item a question at the end of a conversation names: the question, what must be in the
/// window to answer it, and the row of the retrieval measure it is counted in.
#[derive(Debug, Clone)]
pub struct Named {
    pub question: String,
    pub proof: String,
    pub row: String,
    /// A constraint the user stated (otherwise a figure a tool found).
    pub fact: bool,
}

/// A conversation of a planted set and the items later questions name.
pub struct Asked {
    pub log: Vec<LogEntry>,
    pub items: Vec<Named>,
}

/// What survived one build (or several, added up).
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub facts: usize,
    pub facts_total: usize,
    pub figures: usize,
    pub figures_total: usize,
    pub broken_pairs: usize,
    pub over_budget: usize,
}

impl Tally {
    pub fn add(&mut self, o: Tally) {
        self.facts += o.facts;
        self.facts_total += o.facts_total;
        self.figures += o.figures;
        self.figures_total += o.figures_total;
        self.broken_pairs += o.broken_pairs;
        self.over_budget += o.over_budget;
    }
    pub fn fact_share(&self) -> f64 {
        self.facts as f64 / self.facts_total.max(1) as f64
    }
    pub fn figure_share(&self) -> f64 {
        self.figures as f64 / self.figures_total.max(1) as f64
    }
}

/// Calls without a result and results without a call.
pub fn broken_pairs(entries: &[LogEntry]) -> usize {
    let calls: HashSet<&str> = entries
        .iter()
        .flat_map(|e| e.calls().iter().map(|c| c.id.as_str()))
        .collect();
    let results: HashSet<&str> = entries
        .iter()
        .filter_map(|e| e.tool_call_id.as_deref())
        .collect();
    calls.symmetric_difference(&results).count()
}

/// A window built from a planted conversation.
pub struct Built {
    /// The text of every entry of the window, one after the other.
    pub text: String,
    /// Calls without a result and results without a call.
    pub broken_pairs: usize,
    /// Whether the request went over its budget.
    pub over_budget: bool,
}

impl Built {
    /// Whether some line of the window holds both `figure` and `label` (case aside).
    pub fn labelled(&self, figure: &str, label: &str) -> bool {
        let label = label.to_lowercase();
        self.text
            .lines()
            .any(|l| l.contains(figure) && l.to_lowercase().contains(&label))
    }
}

/// `log` built by `pipeline` down to `share` of its size (an eighth of it kept for the answer).
pub fn build(log: &[LogEntry], pipeline: &Pipeline, share: f64, counter: &MessageCounter) -> Built {
    let size = counter.entries(log);
    let total = (size as f64 * share) as usize;
    let budget = ContextBudget::new(total, total / 16);
    let out = block_on(pipeline.run(log, "You are a business analyst.", &budget, counter))
        .unwrap_or_else(|e| panic!("{:?} at {share}: {e}", pipeline.names()));
    let entries = out.window.entries();
    Built {
        text: entries.iter().map(|e| format!("{}\n", e.text())).collect(),
        broken_pairs: broken_pairs(&entries),
        over_budget: out.used > total - total / 16,
    }
}

/// `log` built by `strategy` down to `share` of its size: which of `facts` and `figures` are
/// still in the window's text, broken pairs, and whether it went over its budget.
pub fn measure(
    log: &[LogEntry],
    facts: &[&str],
    figures: &[String],
    strategy: &str,
    share: f64,
    counter: &MessageCounter,
) -> Tally {
    let pipeline = Pipeline::named(strategy, None).unwrap();
    let built = build(log, &pipeline, share, counter);
    let text = &built.text;
    Tally {
        facts: facts.iter().filter(|f| text.contains(*f)).count(),
        facts_total: facts.len(),
        figures: figures.iter().filter(|f| text.contains(f.as_str())).count(),
        figures_total: figures.len(),
        broken_pairs: built.broken_pairs,
        over_budget: usize::from(built.over_budget),
    }
}

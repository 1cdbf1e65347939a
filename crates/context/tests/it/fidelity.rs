//! The planted-facts benchmark: long synthetic business-analysis conversations in which the user
//! states constraints early and tools find figures inside large outputs, built down to 10 % and
//! 25 % of their size by every strategy. What survives in the window is counted: user-stated
//! facts, tool-found figures, and broken call/result pairs.
//!
//! The default strategy must keep ≥ 95 % of the user's facts and ≥ 70 % of the figures at 10 %,
//! ≥ 3× the keep-most-recent baseline of the same run, with no broken pair. With
//! `BA_AGENT_FIDELITY_TABLE=FILE` the table of every strategy is written to FILE (markdown),
//! which `cargo xtask bench` puts into docs/BENCHMARKS.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_context::{Encoding, MessageCounter, STRATEGY_NAMES};
use ba_protocol::{LogEntry, LogRole, LogToolCall};
use serde_json::json;

use crate::planted::{Asked, Named, Rng, Tally, measure};

/// A constraint a user states, with the words that prove it is still in the window.
struct Fact {
    sentence: &'static str,
    proof: &'static str,
    /// How a later question asks for it.
    question: &'static str,
}

const FACTS: &[Fact] = &[
    Fact {
        sentence: "Please exclude the Central region from every total.",
        proof: "Central region",
        question: "Which region did I want left out of the totals?",
    },
    Fact {
        sentence: "All amounts must be reported in EUR, not USD.",
        proof: "EUR",
        question: "Which currency should the amounts be reported in?",
    },
    Fact {
        sentence: "Our fiscal year starts in April, so Q1 is April to June.",
        proof: "starts in April",
        question: "When does our fiscal year begin?",
    },
    Fact {
        sentence: "Charge the work to cost center CC-7741.",
        proof: "CC-7741",
        question: "Which cost center does the work go to?",
    },
    Fact {
        sentence: "Only consider orders above 500 units.",
        proof: "above 500 units",
        question: "How big must an order be to count?",
    },
    Fact {
        sentence: "Name the final workbook west_q3_review.xlsx.",
        proof: "west_q3_review.xlsx",
        question: "What should the final workbook be called?",
    },
    Fact {
        sentence: "Returns must count as negative revenue.",
        proof: "negative revenue",
        question: "How should returns be counted?",
    },
    Fact {
        sentence: "The board deadline is 14 March, so keep it short.",
        proof: "14 March",
        question: "When is the board deadline?",
    },
    Fact {
        sentence: "Never include the test accounts ACC-0000 to ACC-0099.",
        proof: "ACC-0099",
        question: "Which test accounts must never be included?",
    },
    Fact {
        sentence: "Use the price list PL-2024-B for unit prices.",
        proof: "PL-2024-B",
        question: "Which price list gives the unit prices?",
    },
    Fact {
        sentence: "Round every percentage to one decimal.",
        proof: "one decimal",
        question: "How should percentages be rounded?",
    },
    Fact {
        sentence: "Treat the Pacific Partners deal as a one-off.",
        proof: "Pacific Partners",
        question: "Which deal should be treated as a one-off?",
    },
];

const FILLER: &[&str] = &[
    "Let's keep going with the analysis.",
    "Thanks, that helps.",
    "I want to understand what drives the numbers.",
    "Good, now dig a bit deeper.",
    "Interesting.",
    "Can you check that from another angle?",
];

const QUESTIONS: &[&str] = &[
    "How did sales develop by month for the West region?",
    "Which products carried the growth?",
    "Break the revenue down by sales channel.",
    "What does the customer churn look like this year?",
    "Compare the margins of the top ten customers.",
    "Which warehouses shipped late most often?",
    "How many new accounts did each sales rep open?",
    "What is the average order size by segment?",
];

/// How a figure is planted in a table (totals with or without a keyword, a peak, a note), and
/// how a later question asks for it.
const CSV_FORMATS: &[(&str, &str)] = &[
    (
        "TOTAL,,,{}",
        "what did the TOTAL row of the sales table say",
    ),
    (
        "Grand total revenue: {}",
        "what was the grand total revenue",
    ),
    ("net total {} EUR", "what was the net total in EUR"),
    (
        "peak month 2024-07 with {}",
        "how much did the peak month bring",
    ),
    (
        "# note: {} came from the corrected ledger",
        "which amount came from the corrected ledger",
    ),
];

const JSON_FORMATS: &[(&str, &str)] = &[
    ("  \"total_amount\": {},", "what was the total amount"),
    (
        "  \"average_order_value\": {},",
        "what was the average order value",
    ),
    ("  \"max_order\": {},", "how big was the largest order"),
];

const PRINT_FORMATS: &[(&str, &str)] = &[
    ("increase = {}", "how large was the increase"),
    ("sum of West Q3 = {}", "what did West add up to in Q3"),
    (
        "count of distinct customers: {}",
        "how many distinct customers were there",
    ),
    ("vs_target {}", "how far from target were we"),
];

/// The format of `formats` the generator draws next (as `Rng::pick` would draw its text).
fn pick_format(
    rng: &mut Rng,
    formats: &[(&'static str, &'static str)],
) -> (&'static str, &'static str) {
    formats[rng.below(formats.len() as u64) as usize]
}

/// Sentences users add around their questions.
const CONTEXT: &[&str] = &[
    "The regional managers will read this before the quarterly meeting.",
    "Last quarter the numbers looked odd, and finance had to correct the ledger twice.",
    "We changed the distributor contract in July, which may explain part of it.",
    "Marketing ran a campaign in the spring that targeted small businesses.",
    "Keep the explanation simple; not everyone reading it is an analyst.",
    "I am mostly interested in trends, not single orders.",
];

/// One conversation: its log, the facts the user stated and the figures the tools found.
struct Conversation {
    log: Vec<LogEntry>,
    facts: Vec<&'static str>,
    figures: Vec<String>,
    /// For each fact, how a later question asks for it.
    fact_questions: Vec<&'static str>,
    /// For each figure: its round, the output's kind and how a later question asks for it.
    figure_names: Vec<(usize, &'static str, &'static str)>,
}

fn entry(id: &mut usize, role: LogRole) -> LogEntry {
    *id += 1;
    LogEntry::new(format!("e{id}"), role, "2026-01-01T00:00:00Z")
}

fn conversation(seed: u64) -> Conversation {
    let mut rng = Rng(seed);
    let rounds = 40 + rng.below(31) as usize;
    let mut id = 0usize;
    let mut log = Vec::new();
    let mut facts = Vec::new();
    let mut figures = Vec::new();
    let mut fact_questions = Vec::new();
    let mut figure_names = Vec::new();
    // The user states 6 to 8 constraints over the first rounds, one or two at a time.
    let mut to_state: Vec<&Fact> = FACTS.iter().collect();
    let n_facts = 6 + rng.below(3) as usize;
    for round in 0..rounds {
        let mut text = String::new();
        text.push_str(rng.pick(FILLER));
        text.push(' ');
        if round < 5 && facts.len() < n_facts {
            for _ in 0..(1 + rng.below(2)) {
                if to_state.is_empty() || facts.len() >= n_facts {
                    break;
                }
                let f = to_state.remove(rng.below(to_state.len() as u64) as usize);
                text.push_str(f.sentence);
                text.push(' ');
                facts.push(f.proof);
                fact_questions.push(f.question);
            }
        }
        for _ in 0..(1 + rng.below(3)) {
            text.push_str(rng.pick(CONTEXT));
            text.push(' ');
        }
        text.push_str(rng.pick(QUESTIONS));
        log.push(entry(&mut id, LogRole::User).with_text(text));
        // One or two tool calls, each with a large output and one planted figure.
        let calls = 1 + rng.below(2) as usize;
        let mut call_entry = entry(&mut id, LogRole::Assistant).with_text("Let me query the data.");
        let mut results = Vec::new();
        let mut group = Vec::new();
        for c in 0..calls {
            let call_id = format!("call_{round}_{c}");
            let kind = rng.below(3);
            let tool = ["query_database", "file_reader", "run_python"][kind as usize];
            group.push(LogToolCall::new(
                call_id.clone(),
                tool,
                &json!({"query": format!("SELECT region, product, month, amount FROM sales WHERE r = {round}")}),
            ));
            let rows = 60 + rng.below(140) as usize;
            let planted_at = rows / 4 + rng.below((rows / 2) as u64) as usize;
            let value = format!(
                "{},{:03}.{:02}",
                1 + rng.below(9_000),
                rng.below(1_000),
                rng.below(100)
            );
            let regions = ["North", "South", "East", "West", "Central"];
            let products = ["Laptop Pro", "Tablet Air", "Monitor 27", "Support Plan"];
            let mut out = String::new();
            let mut asked = "";
            match kind {
                0 => {
                    out.push_str("region,product,month,amount\n");
                    for r in 0..rows {
                        if r == planted_at {
                            let (format, question) = pick_format(&mut rng, CSV_FORMATS);
                            asked = question;
                            out.push_str(&format.replace("{}", &value));
                            out.push('\n');
                        }
                        out.push_str(&format!(
                            "{},{},2024-{:02},{}.{:02}\n",
                            regions[r % 5],
                            products[r % 4],
                            1 + r % 12,
                            rng.below(9_000),
                            rng.below(100)
                        ));
                    }
                    out.push_str(&format!("({rows} rows)"));
                }
                1 => {
                    out.push_str("{\n  \"records\": [\n");
                    for r in 0..rows {
                        out.push_str(&format!(
                            "    {{\"region\": \"{}\", \"product\": \"{}\", \"amount\": {}.{:02}}},\n",
                            regions[r % 5],
                            products[r % 4],
                            rng.below(9_000),
                            rng.below(100)
                        ));
                    }
                    out.push_str("  ],\n");
                    let (format, question) = pick_format(&mut rng, JSON_FORMATS);
                    asked = question;
                    out.push_str(&format.replace("{}", &value.replace(',', "")));
                    out.push_str("\n  \"currency\": \"USD\"\n}");
                }
                _ => {
                    for r in 0..rows {
                        if r == planted_at {
                            let (format, question) = pick_format(&mut rng, PRINT_FORMATS);
                            asked = question;
                            out.push_str(&format.replace("{}", &value));
                            out.push('\n');
                        }
                        out.push_str(&format!(
                            "{} {} growth {:.3}\n",
                            regions[r % 5],
                            products[r % 4],
                            rng.below(2_000) as f64 / 1_000.0
                        ));
                    }
                }
            }
            figure_names.push((
                round,
                ["CSV table", "JSON document", "printed lines"][kind as usize],
                asked,
            ));
            figures.push(if kind == 1 {
                value.replace(',', "")
            } else {
                value
            });
            let mut result = entry(&mut id, LogRole::Tool).with_text(out);
            result.tool_call_id = Some(call_id);
            result.tool_name = Some(tool.to_owned());
            results.push(result);
        }
        call_entry.tool_calls = Some(group);
        log.push(call_entry);
        log.extend(results);
        log.push(entry(&mut id, LogRole::Assistant).with_text(format!(
            "Round {round}: the data shows the usual seasonal pattern; West leads and the \
             other regions follow. I will look at the details next."
        )));
    }
    Conversation {
        log,
        facts,
        figures,
        fact_questions,
        figure_names,
    }
}

/// The first set's conversations of `salt` for the retrieval measure (the fidelity test keeps
/// its own eight), each with five figures and three constraints a final question names. The
/// outputs print the same labels round after round, so a figure's question names the round
/// the assistant's note named ("Round 17: …") beside the label.
pub fn asked(salt: u64) -> Vec<Asked> {
    (1..=8u64)
        .map(|s| {
            let c = conversation(s * 7_919 + salt.wrapping_mul(1_000_003));
            let at = s as usize;
            // Figures whose round and label name them alone.
            let unique: Vec<usize> = (0..c.figures.len())
                .filter(|&i| {
                    let (round, _, q) = c.figure_names[i];
                    c.figure_names
                        .iter()
                        .filter(|n| n.0 == round && n.2 == q)
                        .count()
                        == 1
                })
                .collect();
            let mut items = Vec::new();
            for k in 0..5 {
                let i = unique[(at * 7 + k * 11) % unique.len()];
                let (round, kind, q) = c.figure_names[i];
                items.push(Named {
                    question: format!("Back in round {round}, {q}?"),
                    proof: c.figures[i].clone(),
                    row: format!("figure: {kind}"),
                    fact: false,
                });
            }
            for k in 0..3 {
                let i = (at + k * 3) % c.facts.len();
                items.push(Named {
                    question: c.fact_questions[i].to_owned(),
                    proof: c.facts[i].to_owned(),
                    row: "fact: stated once, English".to_owned(),
                    fact: true,
                });
            }
            Asked { log: c.log, items }
        })
        .collect()
}

#[test]
fn planted_facts_survive_compression() {
    let counter = MessageCounter::exact(Encoding::Cl100kBase);
    let conversations: Vec<Conversation> = (1..=8).map(|s| conversation(s * 7_919)).collect();
    let user_share: f64 = conversations
        .iter()
        .map(|c| {
            let users: Vec<LogEntry> = c
                .log
                .iter()
                .filter(|e| e.role == LogRole::User)
                .cloned()
                .collect();
            counter.entries(&users) as f64 / counter.entries(&c.log) as f64
        })
        .sum::<f64>()
        / conversations.len() as f64;
    let mut table = String::from(
        "| strategy | size | user facts kept | tool figures kept | broken pairs | over budget |\n|---|---|---|---|---|---|\n",
    );
    let mut results = Vec::new();
    for share in [0.10, 0.25] {
        for name in STRATEGY_NAMES {
            let mut tally = Tally::default();
            for c in &conversations {
                tally.add(measure(&c.log, &c.facts, &c.figures, name, share, &counter));
            }
            table.push_str(&format!(
                "| {name} | {:.0} % | {:.1} % ({}/{}) | {:.1} % ({}/{}) | {} | {} |\n",
                share * 100.0,
                tally.fact_share() * 100.0,
                tally.facts,
                tally.facts_total,
                tally.figure_share() * 100.0,
                tally.figures,
                tally.figures_total,
                tally.broken_pairs,
                tally.over_budget,
            ));
            results.push((share, *name, tally));
        }
    }
    let sizes: Vec<usize> = conversations
        .iter()
        .map(|c| counter.entries(&c.log))
        .collect();
    table.push_str(&format!(
        "\n{} conversations of {}–{} rounds, {}–{} tokens (cl100k_base); user messages are {:.1} % of the tokens.\n",
        conversations.len(),
        conversations.iter().map(|c| c.log.iter().filter(|e| e.role == LogRole::User).count()).min().unwrap_or(0),
        conversations.iter().map(|c| c.log.iter().filter(|e| e.role == LogRole::User).count()).max().unwrap_or(0),
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0),
        user_share * 100.0
    ));
    eprintln!("{table}");
    if let Ok(path) = std::env::var("BA_AGENT_FIDELITY_TABLE") {
        std::fs::write(&path, &table).unwrap();
    }
    let get = |share: f64, name: &str| {
        results
            .iter()
            .find(|(s, n, _)| (*s - share).abs() < 1e-9 && *n == name)
            .map(|r| r.2)
            .unwrap()
    };
    for (_, name, t) in &results {
        assert_eq!(t.broken_pairs, 0, "{name}: broken pairs");
        assert_eq!(t.over_budget, 0, "{name}: over budget");
    }
    let default = get(0.10, "key-messages");
    let baseline = get(0.10, "truncate");
    assert!(
        default.fact_share() >= 0.95,
        "user facts {:.3}",
        default.fact_share()
    );
    assert!(
        default.figure_share() >= 0.70,
        "figures {:.3}",
        default.figure_share()
    );
    let kept = |t: Tally| (t.facts + t.figures) as f64 / (t.facts_total + t.figures_total) as f64;
    assert!(
        kept(default) >= 3.0 * kept(baseline),
        "default {:.3} vs keep-most-recent {:.3}",
        kept(default),
        kept(baseline)
    );
}

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

use crate::planted::{Rng, Tally, measure};

/// A constraint a user states, with the words that prove it is still in the window.
struct Fact {
    sentence: &'static str,
    proof: &'static str,
}

const FACTS: &[Fact] = &[
    Fact {
        sentence: "Please exclude the Central region from every total.",
        proof: "Central region",
    },
    Fact {
        sentence: "All amounts must be reported in EUR, not USD.",
        proof: "EUR",
    },
    Fact {
        sentence: "Our fiscal year starts in April, so Q1 is April to June.",
        proof: "starts in April",
    },
    Fact {
        sentence: "Charge the work to cost center CC-7741.",
        proof: "CC-7741",
    },
    Fact {
        sentence: "Only consider orders above 500 units.",
        proof: "above 500 units",
    },
    Fact {
        sentence: "Name the final workbook west_q3_review.xlsx.",
        proof: "west_q3_review.xlsx",
    },
    Fact {
        sentence: "Returns must count as negative revenue.",
        proof: "negative revenue",
    },
    Fact {
        sentence: "The board deadline is 14 March, so keep it short.",
        proof: "14 March",
    },
    Fact {
        sentence: "Never include the test accounts ACC-0000 to ACC-0099.",
        proof: "ACC-0099",
    },
    Fact {
        sentence: "Use the price list PL-2024-B for unit prices.",
        proof: "PL-2024-B",
    },
    Fact {
        sentence: "Round every percentage to one decimal.",
        proof: "one decimal",
    },
    Fact {
        sentence: "Treat the Pacific Partners deal as a one-off.",
        proof: "Pacific Partners",
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

/// How a figure is planted in a table: totals with or without a keyword, a peak, a note.
const CSV_FORMATS: &[&str] = &[
    "TOTAL,,,{}",
    "Grand total revenue: {}",
    "net total {} EUR",
    "peak month 2024-07 with {}",
    "# note: {} came from the corrected ledger",
];

const JSON_FORMATS: &[&str] = &[
    "  \"total_amount\": {},",
    "  \"average_order_value\": {},",
    "  \"max_order\": {},",
];

const PRINT_FORMATS: &[&str] = &[
    "increase = {}",
    "sum of West Q3 = {}",
    "count of distinct customers: {}",
    "vs_target {}",
];

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
            match kind {
                0 => {
                    out.push_str("region,product,month,amount\n");
                    for r in 0..rows {
                        if r == planted_at {
                            out.push_str(&rng.pick(CSV_FORMATS).replace("{}", &value));
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
                    out.push_str(
                        &rng.pick(JSON_FORMATS)
                            .replace("{}", &value.replace(',', "")),
                    );
                    out.push_str("\n  \"currency\": \"USD\"\n}");
                }
                _ => {
                    for r in 0..rows {
                        if r == planted_at {
                            out.push_str(&rng.pick(PRINT_FORMATS).replace("{}", &value));
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
    }
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

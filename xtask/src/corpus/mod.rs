//! The counting benchmarks' real-text corpus: about 3 MB in eight files of the kinds an analysis
//! agent counts — English and Chinese prose (Markdown), Rust, Python and SQL code, JSON lines,
//! CSV and service logs.
//!
//! Everything is written by this module from its own word lists and templates with a seeded
//! generator (no third-party text), so every run produces the same bytes. Word choice is skewed
//! towards a head of common words with a long tail of made-up words, identifiers, numbers and
//! ids, as real text is: a counter's piece cache sees the same mix of hits and first sightings.
//!
//! `cargo xtask fixtures` writes the files into `fixtures/corpus/` (not committed: they are
//! larger than the repository should carry). The `ba-context` bench and token tests include
//! this module by path and generate the same text in memory; the bench checks it against
//! `fixtures/corpus/` when the files are there. The module uses `std` only for that reason.

mod words;

use std::fmt::Write as _;
use std::path::Path;

use words::{
    ADJECTIVES, ADVERBS, CODAS, CONNECTIVES, CONTRACTIONS, FUNCTION_WORDS, NOUNS, ONSETS,
    PREPOSITIONS, SUBJECTS, VERBS, VOWELS, ZH_PARTICLES, ZH_WORDS,
};

/// The generator's seed; changing it changes every file.
pub const SEED: u64 = 0x00BA_C0DE_2025;

/// Bytes per file, roughly (each file stops at the first line break past it).
const PART_BYTES: usize = 384 * 1024;

/// One file of the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The file name under `fixtures/corpus/`.
    pub name: &'static str,
    /// Its text.
    pub text: String,
}

/// Appends one block (a paragraph, a function, a record…) of a file's kind.
type Maker = fn(&mut Rng, &mut String);

/// Every file of the corpus, in a fixed order.
pub fn generate() -> Vec<Part> {
    let makers: [(&'static str, Maker); 8] = [
        ("english.md", english),
        ("chinese.md", chinese),
        ("report.rs", rust),
        ("pipeline.py", python),
        ("queries.sql", sql),
        ("orders.jsonl", json_lines),
        ("sales.csv", csv),
        ("service.log", log),
    ];
    makers
        .iter()
        .enumerate()
        .map(|(i, (name, make))| {
            let mut rng = Rng(SEED ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut text = String::with_capacity(PART_BYTES + 4096);
            while text.len() < PART_BYTES {
                make(&mut rng, &mut text);
            }
            Part { name, text }
        })
        .collect()
}

/// Writes every part into `dir` and prints a line; returns the files and bytes written.
pub fn write(dir: &Path) -> std::io::Result<(usize, usize)> {
    std::fs::create_dir_all(dir)?;
    let parts = generate();
    let bytes: usize = parts.iter().map(|p| p.text.len()).sum();
    for part in &parts {
        std::fs::write(dir.join(part.name), &part.text)?;
    }
    println!(
        "wrote {} ({} files, {bytes} bytes of corpus text)",
        dir.display(),
        parts.len()
    );
    Ok((parts.len(), bytes))
}

/// SplitMix64: small and stable across platforms and releases.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// Any element, uniformly.
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items.get(self.below(items.len())).copied().unwrap_or("")
    }

    /// An element skewed towards the front of the list (a quadratic bias: the first tenth of
    /// the list gets about a third of the draws).
    fn common<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let i = (u * u * items.len() as f64) as usize;
        items.get(i).copied().unwrap_or("")
    }

    /// A made-up word of two to four syllables: the long tail of rare words.
    fn rare_word(&mut self) -> String {
        let mut w = String::new();
        for _ in 0..self.range(2, 4) {
            w.push_str(self.pick(ONSETS));
            w.push_str(self.pick(VOWELS));
        }
        if self.chance(40) {
            w.push_str(self.pick(CODAS));
        }
        w
    }

    /// A common word or, one time in `rare_in`, a made-up one.
    fn word(&mut self, list: &[&str], rare_in: usize) -> String {
        if self.below(rare_in) == 0 {
            self.rare_word()
        } else {
            self.common(list).to_owned()
        }
    }

    fn hex(&mut self, digits: usize) -> String {
        (0..digits)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16)]))
            .collect()
    }

    fn date(&mut self) -> (u64, u64, u64) {
        (self.range(2023, 2026), self.range(1, 12), self.range(1, 28))
    }

    fn amount(&mut self) -> String {
        let digits = self.range(1, 6) as u32;
        let whole = self.range(1, 10u64.pow(digits));
        format!("{whole}.{:02}", self.below(100))
    }
}

fn sentence(rng: &mut Rng) -> String {
    let mut s = String::new();
    let clauses = rng.range(1, 3);
    for c in 0..clauses {
        if c > 0 {
            s.push_str(if rng.chance(60) { ", " } else { "; " });
            s.push_str(rng.pick(CONNECTIVES));
            s.push(' ');
        }
        match rng.below(6) {
            0 => {
                let _ = write!(
                    s,
                    "{} {} {} {} {}",
                    rng.pick(FUNCTION_WORDS),
                    rng.word(ADJECTIVES, 12),
                    rng.word(NOUNS, 8),
                    rng.pick(VERBS),
                    rng.common(ADVERBS)
                );
            }
            1 => {
                let _ = write!(
                    s,
                    "{} {} by {}.{}% {} {}",
                    rng.common(SUBJECTS),
                    rng.pick(VERBS),
                    rng.below(60),
                    rng.below(10),
                    rng.pick(PREPOSITIONS),
                    rng.word(NOUNS, 6)
                );
            }
            2 => {
                let (y, m, _) = rng.date();
                let _ = write!(
                    s,
                    "{} {} ${},{:03} in Q{} {y} ({} {})",
                    rng.common(CONTRACTIONS),
                    rng.pick(&["about", "roughly", "over", "under", "exactly"]),
                    rng.range(1, 999),
                    rng.below(1000),
                    (m - 1) / 3 + 1,
                    rng.pick(&["vs.", "against", "up from", "down from"]),
                    rng.amount()
                );
            }
            3 => {
                let _ = write!(
                    s,
                    "the \"{}\" {} {} {} {} {}",
                    rng.word(NOUNS, 5),
                    rng.word(NOUNS, 5),
                    rng.pick(VERBS),
                    rng.pick(PREPOSITIONS),
                    rng.pick(FUNCTION_WORDS),
                    rng.word(NOUNS, 10)
                );
            }
            4 => {
                let _ = write!(
                    s,
                    "{} {} — {} {} {}",
                    rng.common(SUBJECTS),
                    rng.common(CONTRACTIONS),
                    rng.pick(&["not", "only", "just", "still", "already"]),
                    rng.word(ADJECTIVES, 6),
                    rng.word(NOUNS, 6)
                );
            }
            _ => {
                let _ = write!(
                    s,
                    "{} {} {} {} {} {} {}",
                    rng.pick(PREPOSITIONS),
                    rng.pick(FUNCTION_WORDS),
                    rng.word(NOUNS, 8),
                    rng.common(SUBJECTS),
                    rng.common(ADVERBS),
                    rng.pick(VERBS),
                    rng.word(NOUNS, 8)
                );
            }
        }
    }
    let mut chars = s.chars();
    let mut out: String = chars
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    out.extend(chars);
    out.push(if rng.chance(8) { '?' } else { '.' });
    out
}

fn english(rng: &mut Rng, out: &mut String) {
    match rng.below(10) {
        0 => {
            let _ = writeln!(
                out,
                "## {} {} {}\n",
                rng.word(ADJECTIVES, 4),
                rng.word(NOUNS, 4),
                rng.pick(&["review", "update", "notes", "findings", "plan"])
            );
        }
        1 | 2 => {
            for i in 1..=rng.range(2, 6) {
                let marker = if rng.chance(50) {
                    "-".to_owned()
                } else {
                    format!("{i}.")
                };
                let _ = writeln!(
                    out,
                    "{marker} **{}**: {} (see `{}_{}`)",
                    rng.word(NOUNS, 5),
                    sentence(rng),
                    rng.word(NOUNS, 3),
                    rng.word(NOUNS, 3)
                );
            }
            out.push('\n');
        }
        3 => {
            let _ = writeln!(
                out,
                "| {} | {} | {} |\n|---|---:|---:|",
                rng.word(NOUNS, 4),
                rng.word(NOUNS, 4),
                rng.word(NOUNS, 4)
            );
            for _ in 0..rng.range(2, 6) {
                let _ = writeln!(
                    out,
                    "| {} | {} | {}.{}% |",
                    rng.word(NOUNS, 3),
                    rng.amount(),
                    rng.below(100),
                    rng.below(10)
                );
            }
            out.push('\n');
        }
        _ => {
            for _ in 0..rng.range(2, 7) {
                out.push_str(&sentence(rng));
                out.push(' ');
            }
            if rng.chance(20) {
                let _ = write!(
                    out,
                    "More at [{}](https://example.com/{}/{}?id={}).",
                    rng.word(NOUNS, 3),
                    rng.word(NOUNS, 3),
                    rng.rare_word(),
                    rng.range(100, 99_999)
                );
            }
            out.push_str("\n\n");
        }
    }
}

fn chinese(rng: &mut Rng, out: &mut String) {
    if rng.chance(10) {
        let _ = writeln!(
            out,
            "## {}{}{}\n",
            rng.common(ZH_WORDS),
            rng.common(ZH_WORDS),
            rng.pick(&["概况", "分析", "总结", "计划"])
        );
        return;
    }
    for _ in 0..rng.range(2, 6) {
        for clause in 0..rng.range(1, 4) {
            if clause > 0 {
                out.push_str(rng.pick(&["，", "，", "；", "、"]));
            }
            for _ in 0..rng.range(2, 6) {
                match rng.below(12) {
                    0 => {
                        let _ = write!(out, "{}.{}%", rng.below(80), rng.below(10));
                    }
                    1 => {
                        let (y, m, _) = rng.date();
                        let _ = write!(out, "{y}年{m}月");
                    }
                    2 => {
                        // A rarer character from the common CJK block: the long tail.
                        let c = char::from_u32(0x4e00 + rng.below(0x51a5) as u32).unwrap_or('字');
                        out.push(c);
                    }
                    3 => out.push_str(rng.pick(ZH_PARTICLES)),
                    4 if rng.chance(30) => {
                        let _ = write!(out, "“{}”", rng.common(ZH_WORDS));
                    }
                    5 if rng.chance(20) => {
                        let _ = write!(out, "（{}）", rng.word(NOUNS, 4));
                    }
                    _ => out.push_str(rng.common(ZH_WORDS)),
                }
            }
        }
        out.push_str(if rng.chance(10) { "？" } else { "。" });
    }
    out.push_str("\n\n");
}

fn snake(rng: &mut Rng) -> String {
    let n = rng.range(1, 3);
    let words: Vec<String> = (0..n).map(|_| rng.word(NOUNS, 6)).collect();
    words.join("_")
}

fn camel(rng: &mut Rng) -> String {
    (0..rng.range(1, 3))
        .map(|_| {
            let w = rng.word(NOUNS, 6);
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

fn rust(rng: &mut Rng, out: &mut String) {
    let ty = camel(rng);
    let fields: Vec<(String, &str)> = (0..rng.range(2, 6))
        .map(|_| {
            (
                snake(rng),
                rng.pick(&["f64", "u32", "String", "Vec<u8>", "Option<i64>", "bool"]),
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "/// {} {} for the {} {}.",
        rng.pick(&["One", "A", "The"]),
        rng.word(NOUNS, 3),
        rng.word(ADJECTIVES, 3),
        rng.word(NOUNS, 3)
    );
    let _ = writeln!(
        out,
        "#[derive(Debug, Clone, PartialEq)]\npub struct {ty} {{"
    );
    for (name, t) in &fields {
        let _ = writeln!(out, "    pub {name}: {t},");
    }
    let _ = writeln!(out, "}}\n\nimpl {ty} {{");
    for _ in 0..rng.range(1, 3) {
        let f = snake(rng);
        let _ = writeln!(
            out,
            "    pub fn {f}(&self, rows: &[{}]) -> Result<f64, ReportError> {{",
            camel(rng)
        );
        let _ = writeln!(
            out,
            "        // {} the {} before {}.",
            rng.pick(&["Skip", "Sum", "Filter", "Group"]),
            rng.word(NOUNS, 4),
            rng.word(NOUNS, 4)
        );
        let _ = writeln!(
            out,
            "        let total: f64 = rows\n            .iter()\n            .filter(|r| r.{} == \"{}\" && r.{} > {})\n            .map(|r| r.{} * {}.{})\n            .sum();",
            snake(rng),
            rng.word(ADJECTIVES, 4),
            snake(rng),
            rng.below(1000),
            snake(rng),
            rng.below(10),
            rng.below(100)
        );
        let _ = writeln!(
            out,
            "        if total.is_nan() {{\n            return Err(ReportError::Invalid {{ field: \"{}\".into() }});\n        }}",
            snake(rng)
        );
        let _ = writeln!(
            out,
            "        match self.{} {{\n            Some(x) if x > {} => Ok(total / x as f64),\n            _ => Ok(total),\n        }}\n    }}\n",
            fields.first().map_or("id", |f| f.0.as_str()),
            rng.below(100)
        );
    }
    out.push_str("}\n\n");
}

fn python(rng: &mut Rng, out: &mut String) {
    if rng.chance(15) {
        let _ = writeln!(
            out,
            "import {}\nfrom {}.{} import {}, {}\n",
            rng.pick(&[
                "json",
                "math",
                "csv",
                "datetime",
                "pandas as pd",
                "numpy as np"
            ]),
            snake(rng),
            snake(rng),
            camel(rng),
            snake(rng)
        );
    }
    let class = camel(rng);
    let _ = writeln!(
        out,
        "class {class}:\n    \"\"\"{}\"\"\"\n\n    def __init__(self, {}, {}=None):\n        self.{} = {}\n        self._cache = {{}}\n",
        sentence(rng),
        snake(rng),
        snake(rng),
        snake(rng),
        rng.pick(&["[]", "{}", "0", "None", "0.0"])
    );
    for _ in 0..rng.range(1, 3) {
        let f = snake(rng);
        let _ = writeln!(
            out,
            "    @property\n    def {f}(self):\n        rows = [r for r in self.{} if r[\"{}\"] >= {}]\n        total = sum(r[\"{}\"] * {}.{} for r in rows)\n        print(f\"{f}: {{total:,.2f}} over {{len(rows)}} rows\")\n        return total / max(len(rows), 1)\n",
            snake(rng),
            snake(rng),
            rng.below(500),
            snake(rng),
            rng.below(10),
            rng.below(100)
        );
    }
}

fn sql(rng: &mut Rng, out: &mut String) {
    let table = snake(rng);
    match rng.below(4) {
        0 => {
            let _ = writeln!(out, "CREATE TABLE IF NOT EXISTS {table} (");
            let _ = writeln!(out, "  id INTEGER PRIMARY KEY,");
            for _ in 0..rng.range(2, 6) {
                let _ = writeln!(
                    out,
                    "  {} {},",
                    snake(rng),
                    rng.pick(&[
                        "TEXT NOT NULL",
                        "REAL",
                        "INTEGER DEFAULT 0",
                        "DATE",
                        "NUMERIC(12, 2)"
                    ])
                );
            }
            let _ = writeln!(
                out,
                "  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP\n);\n"
            );
        }
        1 => {
            let _ = writeln!(
                out,
                "INSERT INTO {table} (id, region, amount, sold_on) VALUES"
            );
            let rows = rng.range(2, 8);
            for i in 0..rows {
                let (y, m, d) = rng.date();
                let _ = writeln!(
                    out,
                    "  ({}, '{}', {}, '{y}-{m:02}-{d:02}'){}",
                    rng.range(1, 99_999),
                    rng.pick(&[
                        "North",
                        "South",
                        "East",
                        "West",
                        "Central",
                        "华东",
                        "O'Brien & Co"
                    ]),
                    rng.amount(),
                    if i + 1 == rows { ";" } else { "," }
                );
            }
            out.push('\n');
        }
        _ => {
            let (y, m, _) = rng.date();
            let _ = writeln!(
                out,
                "WITH {} AS (\n  SELECT region, product, SUM(amount) AS total, COUNT(*) AS n\n  FROM {table}\n  WHERE sold_on >= '{y}-{m:02}-01' AND amount > {}\n  GROUP BY region, product\n)\nSELECT r.region, r.manager, t.total, ROUND(t.total * 100.0 / SUM(t.total) OVER (), 2) AS pct\nFROM {} t\nJOIN regions r ON r.region = t.region\nWHERE t.n >= {}\nORDER BY t.total DESC\nLIMIT {};\n",
                snake(rng),
                rng.below(1000),
                snake(rng),
                rng.below(20),
                rng.range(5, 100)
            );
        }
    }
}

fn json_string(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 => format!("{} \\\"{}\\\"", rng.word(NOUNS, 3), rng.word(NOUNS, 3)),
        1 => format!("{}{}", rng.common(ZH_WORDS), rng.common(ZH_WORDS)),
        2 => format!("Caf\\u00e9 {}", camel(rng)),
        3 => format!("{}\\n{}", sentence(rng), sentence(rng)),
        _ => sentence(rng),
    }
}

fn json_lines(rng: &mut Rng, out: &mut String) {
    let (y, m, d) = rng.date();
    let id = rng.range(1, 9_999_999);
    let items: Vec<String> = (0..rng.range(1, 4))
        .map(|_| {
            format!(
                "{{\"sku\":\"{}-{}\",\"qty\":{},\"unit_price\":{}}}",
                rng.pick(&["LAP", "TAB", "MON", "SUP", "STO"]),
                rng.range(100, 9999),
                rng.range(1, 50),
                rng.amount()
            )
        })
        .collect();
    if rng.chance(85) {
        let _ = writeln!(
            out,
            "{{\"id\":{id},\"created_at\":\"{y}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z\",\"customer\":{{\"name\":\"{}\",\"region\":\"{}\",\"tier\":\"{}\"}},\"items\":[{}],\"total\":{},\"currency\":\"{}\",\"paid\":{},\"note\":\"{}\",\"trace\":\"{}\"}}",
            rng.below(24),
            rng.below(60),
            rng.below(60),
            camel(rng),
            rng.pick(&["North", "South", "East", "West", "Central", "华东", "华南"]),
            rng.pick(&["gold", "silver", "bronze"]),
            items.join(","),
            rng.amount(),
            rng.pick(&["EUR", "USD", "CNY", "GBP"]),
            rng.chance(70),
            json_string(rng),
            rng.hex(16)
        );
    } else {
        // Pretty-printed, as tool results often are.
        let _ = writeln!(
            out,
            "{{\n  \"id\": {id},\n  \"summary\": {{\n    \"{}\": {},\n    \"{}\": [\n      {}\n    ],\n    \"flags\": [true, false, null]\n  }}\n}}",
            snake(rng),
            rng.amount(),
            snake(rng),
            items.join(",\n      ")
        );
    }
}

fn csv(rng: &mut Rng, out: &mut String) {
    if out.is_empty() {
        out.push_str("id,date,region,product,units,unit_price,amount,customer,note\r\n");
    }
    for _ in 0..16 {
        let (y, m, d) = rng.date();
        let units = rng.range(1, 400);
        let note = match rng.below(6) {
            0 => format!("\"{}, {}\"", rng.word(NOUNS, 3), rng.word(NOUNS, 3)),
            1 => format!("\"said \"\"{}\"\"\"", rng.word(ADJECTIVES, 3)),
            2 => rng.common(ZH_WORDS).to_owned(),
            _ => String::new(),
        };
        let _ = write!(
            out,
            "{},{y}-{m:02}-{d:02},{},{},{units},{},{},{},{note}\r\n",
            rng.range(1, 999_999),
            rng.pick(&["North", "South", "East", "West", "Central"]),
            rng.pick(&[
                "Laptop Pro",
                "Tablet Air",
                "Monitor 27",
                "Office Suite",
                "Cloud Storage",
                "Support Plan"
            ]),
            rng.amount(),
            rng.amount(),
            camel(rng)
        );
    }
}

fn log(rng: &mut Rng, out: &mut String) {
    let (y, m, d) = rng.date();
    let ts = format!(
        "{y}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rng.below(24),
        rng.below(60),
        rng.below(60),
        rng.below(1000)
    );
    match rng.below(8) {
        0 | 1 => {
            let _ = writeln!(
                out,
                "{}.{}.{}.{} - - [{d:02}/{}/{y}:{:02}:{:02}:{:02} +0000] \"{} /api/v{}/{}/{}?format={}&page={} HTTP/1.1\" {} {} \"-\" \"{}\"",
                rng.range(10, 192),
                rng.below(256),
                rng.below(256),
                rng.range(1, 254),
                rng.pick(&[
                    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                    "Dec"
                ]),
                rng.below(24),
                rng.below(60),
                rng.below(60),
                rng.pick(&["GET", "GET", "POST", "PUT", "DELETE"]),
                rng.range(1, 3),
                rng.word(NOUNS, 5),
                rng.range(1, 99_999),
                rng.pick(&["json", "csv", "md"]),
                rng.range(1, 40),
                rng.pick(&[
                    "200", "200", "200", "201", "204", "304", "400", "404", "500"
                ]),
                rng.range(0, 250_000),
                rng.pick(&[
                    "curl/8.5.0",
                    "ba-agent/0.1.0",
                    "Mozilla/5.0 (X11; Linux x86_64)",
                    "python-requests/2.32"
                ])
            );
        }
        2 => {
            let _ = writeln!(
                out,
                "{ts} ERROR ba_agent::tools::{}: {} failed: {} (attempt {}/{})\n    at {}::{} ({}.rs:{}:{})\n    at {}::{} ({}.rs:{}:{})",
                snake(rng),
                snake(rng),
                rng.pick(&[
                    "connection reset by peer",
                    "timeout after 30s",
                    "permission denied",
                    "no such table: sales_2023",
                    "invalid JSON at line 1 column 87"
                ]),
                rng.range(1, 3),
                rng.range(3, 5),
                snake(rng),
                snake(rng),
                snake(rng),
                rng.range(1, 900),
                rng.range(1, 80),
                snake(rng),
                snake(rng),
                snake(rng),
                rng.range(1, 900),
                rng.range(1, 80)
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "{ts} {} ba_agent::{}{{run_id={}-{}-{} call_id=call_{}}}: {} {}={} elapsed_ms={} bytes={}",
                rng.pick(&["INFO ", "INFO ", "DEBUG", "WARN ", "TRACE"]),
                rng.pick(&[
                    "agent::run",
                    "tools::query_database",
                    "model::anthropic",
                    "storage::file",
                    "context::pipeline"
                ]),
                rng.hex(8),
                rng.hex(4),
                rng.hex(12),
                rng.hex(10),
                rng.pick(&[
                    "request finished",
                    "tool call done",
                    "compressed window",
                    "appended entry",
                    "retrying"
                ]),
                rng.pick(&["rows", "tokens", "status", "entries"]),
                rng.range(0, 120_000),
                rng.range(0, 30_000),
                rng.range(0, 1 << 20)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    // Paths, not imports: the context bench includes this file too, and there (no test
    // harness) a `#[test]` function is dropped while an import would stay, unused.
    #[test]
    fn deterministic_and_varied() {
        let a = super::generate();
        assert_eq!(a, super::generate(), "the same seed gives the same bytes");
        let total: usize = a.iter().map(|p| p.text.len()).sum();
        assert!((2_500_000..4_000_000).contains(&total), "{total} bytes");
        let text = |name: &str| {
            a.iter()
                .find(|p| p.name == name)
                .map(|p| p.text.as_str())
                .unwrap_or_default()
        };
        assert!(text("chinese.md").contains("销售额"));
        assert!(text("english.md").contains("'s ") || text("english.md").contains("'t "));
        assert!(text("sales.csv").contains("\r\n"));
        assert!(text("report.rs").contains("impl "));
        assert!(text("service.log").contains("HTTP/1.1"));
        for part in &a {
            assert!(part.text.len() >= super::PART_BYTES, "{}", part.name);
        }
    }
}

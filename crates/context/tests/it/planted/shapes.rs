//! The figure shapes of the third planted-facts set: tool outputs rendered the way real tools
//! print them — psql's aligned tables with their `(N rows)` footers, pandas frames (whole,
//! cut in the middle, wrapped), pivots with an `All` or `Grand Total` margin, CSV with ROLLUP
//! rows, Markdown, fixed-width reports, nested JSON and YAML, service logs, tracebacks, prose
//! — each with one figure an analyst would come back for (a total, a one-row result, a margin,
//! a summary value). Written for this benchmark and read by nothing in `src/`.
//!
//! Totals add up: a grand total is the sum of the rows it closes, a margin the sum of its row
//! or column, as the tools that print them compute them.

use super::Rng;

/// A tool output with its planted figure.
#[derive(Debug, Clone)]
pub struct Output {
    /// What the tool printed.
    pub text: String,
    /// The figure, as printed.
    pub figure: String,
    /// What names the figure where it is printed (a column title, a row label, a key): a
    /// kept figure should keep it on its line.
    pub label: String,
    /// The tool that printed it.
    pub tool: &'static str,
    /// The call's arguments.
    pub call: String,
    /// How a later question names the figure.
    pub question: String,
}

/// A way of printing a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// CSV of a `GROUP BY ROLLUP`: subtotal and grand total rows with empty grouping cells.
    CsvRollup,
    /// TSV with a named total row.
    TsvTotalRow,
    /// A Markdown table with a bold total row.
    MarkdownTotal,
    /// psql: the rows, `(N rows)`, then a second query's one-row result (`SELECT sum(…)`).
    PsqlOneRowAfter,
    /// psql: `GROUPING SETS` rows with a grand total of empty grouping cells, `(N rows)`.
    PsqlGroupingTotal,
    /// A pandas frame with a `Total` row appended, printed whole.
    PandasTotalRow,
    /// A pandas frame printed cut in the middle (`...`, `[N rows x M columns]`), its total
    /// row last.
    PandasTruncated,
    /// A pandas pivot with margins (`All`), printed whole: the grand total ends a wide row.
    PivotWide,
    /// The same pivot printed wrapped at 80 columns (`\` after each block's header).
    PivotWrapped,
    /// A spreadsheet pivot exported as CSV: `Row Labels` … `Grand Total`.
    PivotCsv,
    /// A nested JSON document, pretty-printed: records and a summary object.
    JsonNested,
    /// The same document on one line.
    JsonOneLine,
    /// A nested YAML document.
    YamlNested,
    /// A service log with the figure in one line.
    Log,
    /// A Python traceback whose exception message holds the figure.
    Traceback,
    /// A paragraph of an analysis with many figures.
    Prose,
    /// A fixed-width report: title, aligned columns, a rule, the total line.
    FixedWidth,
    /// Several small tables printed by one script; the figure is the last table's one row.
    SeveralTables,
}

impl Shape {
    pub const ALL: [Shape; 18] = [
        Shape::CsvRollup,
        Shape::TsvTotalRow,
        Shape::MarkdownTotal,
        Shape::PsqlOneRowAfter,
        Shape::PsqlGroupingTotal,
        Shape::PandasTotalRow,
        Shape::PandasTruncated,
        Shape::PivotWide,
        Shape::PivotWrapped,
        Shape::PivotCsv,
        Shape::JsonNested,
        Shape::JsonOneLine,
        Shape::YamlNested,
        Shape::Log,
        Shape::Traceback,
        Shape::Prose,
        Shape::FixedWidth,
        Shape::SeveralTables,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Shape::CsvRollup => "CSV, ROLLUP rows",
            Shape::TsvTotalRow => "TSV, named total row",
            Shape::MarkdownTotal => "Markdown, total row",
            Shape::PsqlOneRowAfter => "psql, one-row result after the table",
            Shape::PsqlGroupingTotal => "psql, grouping-sets total + footer",
            Shape::PandasTotalRow => "pandas frame, Total row",
            Shape::PandasTruncated => "pandas frame cut with ..., Total row",
            Shape::PivotWide => "pivot, All margin at the end of a wide row",
            Shape::PivotWrapped => "pivot wrapped at 80 columns",
            Shape::PivotCsv => "spreadsheet pivot as CSV, Grand Total",
            Shape::JsonNested => "nested JSON document",
            Shape::JsonOneLine => "nested JSON on one line",
            Shape::YamlNested => "nested YAML document",
            Shape::Log => "service log",
            Shape::Traceback => "traceback",
            Shape::Prose => "prose",
            Shape::FixedWidth => "fixed-width report, rule and total",
            Shape::SeveralTables => "several tables, one-row last",
        }
    }
}

/// What an output is about: a measure and the slice it was cut to.
struct Topic {
    metric: &'static str,
    /// How the slice reads in a question and in the call.
    slice: String,
    /// The slice as a filter of the call.
    filter: String,
}

fn topic(rng: &mut Rng) -> Topic {
    let metric = rng.pick(&[
        "revenue",
        "freight_cost",
        "returns",
        "discounts",
        "gross_margin",
        "service_hours",
        "refunds",
        "ad_spend",
    ]);
    let (slice, filter) = match rng.below(4) {
        0 => {
            let w = 1 + rng.below(52);
            (format!("week {w}"), format!("week = {w}"))
        }
        1 => {
            let s = 100 + rng.below(800);
            (format!("store {s}"), format!("store_id = {s}"))
        }
        2 => {
            let c = rng.pick(&[
                "Spring Push",
                "Back to School",
                "Clearance",
                "Loyalty Boost",
            ]);
            (format!("the {c} campaign"), format!("campaign = '{c}'"))
        }
        _ => {
            let c = rng.pick(&["DHL", "UPS", "Kuehne", "DB Schenker", "Maersk"]);
            (format!("carrier {c}"), format!("carrier = '{c}'"))
        }
    };
    Topic {
        metric,
        slice,
        filter,
    }
}

const REGIONS: &[&str] = &[
    "NORTH", "SOUTH", "EAST", "WEST", "CENTRAL", "COAST", "METRO", "ALPINE",
];
const PRODUCTS: &[&str] = &[
    "Laptop Pro",
    "Tablet Air",
    "Monitor 27",
    "Support Plan",
    "Dock",
    "Stylus",
    "Headset X",
];
const MONTHS: &[&str] = &[
    "2024-01", "2024-02", "2024-03", "2024-04", "2024-05", "2024-06", "2024-07", "2024-08",
    "2024-09", "2024-10", "2024-11", "2024-12",
];

/// An amount in cents, between `lo` and `hi` units.
fn cents(rng: &mut Rng, lo: u64, hi: u64) -> i64 {
    (lo * 100 + rng.below((hi - lo) * 100)) as i64
}

/// Cents as `1234.56`.
fn money(c: i64) -> String {
    format!("{}.{:02}", c / 100, c % 100)
}

/// Cents as `1,234.56`.
fn money_grouped(c: i64) -> String {
    let units = (c / 100).to_string();
    let mut out = String::new();
    for (i, ch) in units.chars().enumerate() {
        if i > 0 && (units.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{out}.{:02}", c % 100)
}

/// The rows of a table: (region, product, month, cents).
fn rows(rng: &mut Rng, n: usize) -> Vec<(usize, usize, usize, i64)> {
    (0..n)
        .map(|i| {
            (
                i % REGIONS.len().min(5),
                rng.below(PRODUCTS.len() as u64) as usize,
                i % 12,
                cents(rng, 40, 9_000),
            )
        })
        .collect()
}

/// Whether a cell is printed right-aligned (a number).
fn numeric(cell: &str) -> bool {
    !cell.is_empty()
        && cell
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '-'))
}

/// psql's aligned format: centred titles, a `-+-` rule, numbers to the right, `(N rows)`.
fn psql(headers: &[&str], body: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..headers.len())
        .map(|c| {
            body.iter()
                .map(|r| r[c].chars().count())
                .chain([headers[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let head: Vec<String> = headers
        .iter()
        .zip(&widths)
        .map(|(h, w)| {
            let pad = w - h.chars().count();
            format!("{}{h}{}", " ".repeat(pad / 2), " ".repeat(pad - pad / 2))
        })
        .collect();
    out.push(' ');
    out.push_str(head.join(" | ").trim_end());
    out.push('\n');
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
    out.push_str(&rule.join("+"));
    out.push('\n');
    for r in body {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| {
                if numeric(c) {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        out.push(' ');
        out.push_str(cells.join(" | ").trim_end());
        out.push('\n');
    }
    let n = body.len();
    out.push_str(&format!("({n} row{})\n", if n == 1 { "" } else { "s" }));
    out
}

/// pandas' `to_string`: every column right-aligned to its widest cell, two spaces between,
/// the index first.
fn pandas(index_name: &str, headers: &[&str], body: &[(String, Vec<String>)]) -> Vec<String> {
    let iw = body
        .iter()
        .map(|(i, _)| i.chars().count())
        .chain([index_name.chars().count()])
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = (0..headers.len())
        .map(|c| {
            body.iter()
                .map(|(_, r)| r[c].chars().count())
                .chain([headers[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut lines = Vec::new();
    let mut head = format!("{:iw$}", "");
    for (h, w) in headers.iter().zip(&widths) {
        head.push_str(&format!("  {h:>w$}"));
    }
    lines.push(head);
    if !index_name.is_empty() {
        lines.push(index_name.to_owned());
    }
    for (i, r) in body {
        let mut line = format!("{i:<iw$}");
        for (c, w) in r.iter().zip(&widths) {
            line.push_str(&format!("  {c:>w$}"));
        }
        lines.push(line);
    }
    lines
}

/// One output of `shape`, with its figure.
pub fn output(shape: Shape, rng: &mut Rng) -> Output {
    let t = topic(rng);
    let m = t.metric;
    let sql = |what: &str| format!("SELECT {what} FROM facts WHERE {} -- {m}", t.filter);
    let question_total = format!("What did the {m} total come to for {}?", t.slice);
    let n = 30 + rng.below(90) as usize;
    match shape {
        Shape::CsvRollup => {
            let data = rows(rng, n);
            let nulls_first = rng.chance(30);
            let mut lines = vec![format!("region,product,{m}")];
            let mut total = 0;
            let mut body = Vec::new();
            for (region, name) in REGIONS.iter().enumerate().take(5) {
                let mut sub = 0;
                for r in data.iter().filter(|r| r.0 == region) {
                    body.push(format!("{},{},{}", REGIONS[r.0], PRODUCTS[r.1], money(r.3)));
                    sub += r.3;
                }
                body.push(format!("{name},,{}", money(sub)));
                total += sub;
            }
            let grand = format!(",,{}", money(total));
            if nulls_first {
                lines.push(grand);
                lines.extend(body);
            } else {
                lines.extend(body);
                lines.push(grand);
            }
            Output {
                text: lines.join("\n"),
                figure: money(total),
                label: m.to_owned(),
                tool: "query_database",
                call: sql(&format!(
                    "region, product, sum({m}) GROUP BY ROLLUP(region, product)"
                )),
                question: question_total,
            }
        }
        Shape::TsvTotalRow => {
            let data = rows(rng, n);
            let label = rng.pick(&["Total", "TOTAL", "Grand total", "合计", "Sum"]);
            let mut lines = vec![format!("month\tregion\t{m}")];
            let total: i64 = data.iter().map(|r| r.3).sum();
            let total_line = format!("{label}\t\t{}", money(total));
            let on_top = rng.chance(25);
            if on_top {
                lines.push(total_line.clone());
            }
            for r in &data {
                lines.push(format!("{}\t{}\t{}", MONTHS[r.2], REGIONS[r.0], money(r.3)));
            }
            if !on_top {
                lines.push(total_line);
            }
            Output {
                text: lines.join("\n"),
                figure: money(total),
                label: label.to_owned(),
                tool: "file_reader",
                call: format!("{{\"path\": \"exports/{m}_by_month.tsv\"}}"),
                question: question_total,
            }
        }
        Shape::MarkdownTotal => {
            let data = rows(rng, n);
            let total: i64 = data.iter().map(|r| r.3).sum();
            let label = rng.pick(&["**Total**", "**Grand total**", "**合计**", "Total"]);
            let mut lines = vec![
                format!("| region | product | {m} |"),
                "|---|---|---:|".to_owned(),
            ];
            for r in &data {
                lines.push(format!(
                    "| {} | {} | {} |",
                    REGIONS[r.0],
                    PRODUCTS[r.1],
                    money_grouped(r.3)
                ));
            }
            lines.push(format!("| {label} | | {} |", money_grouped(total)));
            Output {
                text: lines.join("\n"),
                figure: money_grouped(total),
                label: label.trim_matches('*').to_owned(),
                tool: "run_python",
                call: format!(
                    "{{\"code\": \"print(df.groupby(['region','product'])['{m}'].sum().to_markdown())\"}}"
                ),
                question: question_total,
            }
        }
        Shape::PsqlOneRowAfter => {
            let data = rows(rng, n);
            let body: Vec<Vec<String>> = data
                .iter()
                .map(|r| {
                    vec![
                        REGIONS[r.0].to_owned(),
                        PRODUCTS[r.1].to_owned(),
                        MONTHS[r.2].to_owned(),
                        money(r.3),
                    ]
                })
                .collect();
            let total: i64 = data.iter().map(|r| r.3).sum();
            let title = rng.pick(&["sum", "total", "q_total", "all_regions", "amount"]);
            let mut text = psql(&["region", "product", "month", m], &body);
            text.push('\n');
            text.push_str(&psql(&[title], &[vec![money(total)]]));
            Output {
                text,
                figure: money(total),
                label: title.to_owned(),
                tool: "query_database",
                call: format!(
                    "{}; {}",
                    sql(&format!("region, product, month, {m}")),
                    sql(&format!("sum({m}) AS {title}"))
                ),
                question: question_total,
            }
        }
        Shape::PsqlGroupingTotal => {
            let data = rows(rng, n);
            let mut body = Vec::new();
            let mut total = 0;
            for (region, name) in REGIONS.iter().enumerate().take(5) {
                let sub: i64 = data.iter().filter(|r| r.0 == region).map(|r| r.3).sum();
                let count = data.iter().filter(|r| r.0 == region).count();
                body.push(vec![(*name).to_owned(), count.to_string(), money(sub)]);
                total += sub;
                for r in data.iter().filter(|r| r.0 == region).take(4) {
                    body.push(vec![
                        format!("{} {}", REGIONS[r.0], PRODUCTS[r.1]),
                        "1".to_owned(),
                        money(r.3),
                    ]);
                }
            }
            body.push(vec![String::new(), data.len().to_string(), money(total)]);
            let text = psql(&["segment", "orders", m], &body);
            Output {
                text,
                figure: money(total),
                label: m.to_owned(),
                tool: "query_database",
                call: sql(&format!(
                    "segment, count(*) AS orders, sum({m}) GROUP BY GROUPING SETS ((region), (region, product), ())"
                )),
                question: question_total,
            }
        }
        Shape::PandasTotalRow | Shape::PandasTruncated => {
            let data = rows(rng, n);
            let total: i64 = data.iter().map(|r| r.3).sum();
            let qty: i64 = data.iter().map(|r| 1 + r.3 % 37).sum();
            let mut body: Vec<(String, Vec<String>)> = data
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    (
                        i.to_string(),
                        vec![
                            REGIONS[r.0].to_owned(),
                            MONTHS[r.2].to_owned(),
                            (1 + r.3 % 37).to_string(),
                            money(r.3),
                        ],
                    )
                })
                .collect();
            body.push((
                "Total".to_owned(),
                vec![String::new(), String::new(), qty.to_string(), money(total)],
            ));
            let lines = pandas("", &["region", "month", "units", m], &body);
            let text = if shape == Shape::PandasTruncated {
                // pandas prints the first and last five rows of a long frame.
                let mut cut: Vec<String> = lines[..6].to_vec();
                let dots = lines[0]
                    .split_whitespace()
                    .map(|_| "...")
                    .collect::<Vec<_>>()
                    .join("  ");
                cut.push(format!("..   {dots}"));
                cut.extend(lines[lines.len() - 5..].iter().cloned());
                cut.push(String::new());
                cut.push(format!("[{} rows x 4 columns]", body.len()));
                cut.join("\n")
            } else {
                lines.join("\n")
            };
            Output {
                text,
                figure: money(total),
                label: "Total".to_owned(),
                tool: "run_python",
                call: format!(
                    "{{\"code\": \"df.loc['Total'] = df.sum(numeric_only=True)\\nprint(df)  # {}\"}}",
                    t.filter
                ),
                question: question_total,
            }
        }
        Shape::PivotWide | Shape::PivotWrapped | Shape::PivotCsv => {
            let regions = 4 + rng.below(4) as usize;
            let grid: Vec<Vec<i64>> = (0..regions)
                .map(|_| (0..12).map(|_| cents(rng, 200, 40_000)).collect())
                .collect();
            let row_totals: Vec<i64> = grid.iter().map(|r| r.iter().sum()).collect();
            let col_totals: Vec<i64> = (0..12).map(|c| grid.iter().map(|r| r[c]).sum()).collect();
            let grand: i64 = row_totals.iter().sum();
            if shape == Shape::PivotCsv {
                let label = rng.pick(&["Grand Total", "总计", "Total Result"]);
                let mut lines = vec![format!("Row Labels,{},{label}", MONTHS.join(","))];
                for (r, row) in grid.iter().enumerate() {
                    let cells: Vec<String> = row.iter().map(|c| money(*c)).collect();
                    lines.push(format!(
                        "{},{},{}",
                        REGIONS[r],
                        cells.join(","),
                        money(row_totals[r])
                    ));
                }
                let cells: Vec<String> = col_totals.iter().map(|c| money(*c)).collect();
                lines.push(format!("{label},{},{}", cells.join(","), money(grand)));
                return Output {
                    text: lines.join("\n"),
                    figure: money(grand),
                    label: label.to_owned(),
                    tool: "file_reader",
                    call: format!("{{\"path\": \"pivots/{m}_by_region.csv\"}}"),
                    question: question_total,
                };
            }
            let mut headers: Vec<&str> = MONTHS.to_vec();
            headers.push("All");
            let mut body: Vec<(String, Vec<String>)> = grid
                .iter()
                .enumerate()
                .map(|(r, row)| {
                    let mut cells: Vec<String> = row.iter().map(|c| money(*c)).collect();
                    cells.push(money(row_totals[r]));
                    (REGIONS[r].to_owned(), cells)
                })
                .collect();
            let mut last: Vec<String> = col_totals.iter().map(|c| money(*c)).collect();
            last.push(money(grand));
            body.push(("All".to_owned(), last));
            let mut lines = pandas("region", &headers, &body);
            lines[0].replace_range(..5, "month");
            let text = if shape == Shape::PivotWrapped {
                // Blocks of columns that fit 80 characters, each header ending in `\` but the
                // last, a blank line between blocks.
                let iw = REGIONS.iter().map(|r| r.len()).max().unwrap_or(6).max(6);
                let per = 5;
                let mut out = Vec::new();
                let blocks: Vec<(usize, usize)> = (0..headers.len())
                    .step_by(per)
                    .map(|s| (s, (s + per).min(headers.len())))
                    .collect();
                for (k, &(s, e)) in blocks.iter().enumerate() {
                    let hs: Vec<&str> = headers[s..e].to_vec();
                    let bs: Vec<(String, Vec<String>)> = body
                        .iter()
                        .map(|(i, r)| (i.clone(), r[s..e].to_vec()))
                        .collect();
                    let mut block = pandas("region", &hs, &bs);
                    let end = 5.min(block[0].len());
                    block[0].replace_range(..end, "month");
                    if k + 1 < blocks.len() {
                        block[0].push_str("  \\");
                    }
                    let _ = iw;
                    out.push(block.join("\n"));
                }
                out.join("\n\n")
            } else {
                lines.join("\n")
            };
            Output {
                text,
                figure: money(grand),
                label: "All".to_owned(),
                tool: "run_python",
                call: format!(
                    "{{\"code\": \"print(pd.pivot_table(df, values='{m}', index='region', columns='month', aggfunc='sum', margins=True))  # {}\"}}",
                    t.filter
                ),
                question: question_total,
            }
        }
        Shape::JsonNested | Shape::JsonOneLine => {
            let data = rows(rng, n.min(60));
            let total: i64 = data.iter().map(|r| r.3).sum();
            let key = rng.pick(&["net", "sum", "value", "amount_total"]);
            let records: Vec<serde_json::Value> = data
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "region": REGIONS[r.0],
                        "product": PRODUCTS[r.1],
                        "month": MONTHS[r.2],
                        m: r.3 as f64 / 100.0,
                    })
                })
                .collect();
            let summary = serde_json::json!({
                "totals": { m: { key: total as f64 / 100.0, "currency_rate": 1.0 } },
                "orders": data.len(),
            });
            let doc = if rng.chance(50) {
                serde_json::json!({"report": {"slice": t.slice, "summary": summary, "records": records}})
            } else {
                serde_json::json!({"report": {"slice": t.slice, "records": records, "summary": summary}})
            };
            let text = if shape == Shape::JsonOneLine {
                doc.to_string()
            } else {
                serde_json::to_string_pretty(&doc).unwrap()
            };
            // serde_json prints the figure as the shortest float that reads back.
            let figure = serde_json::json!(total as f64 / 100.0).to_string();
            Output {
                text,
                figure,
                label: key.to_owned(),
                tool: "web_reader",
                call: format!(
                    "{{\"url\": \"https://reports.internal/api/{m}?{}\"}}",
                    t.filter.replace(' ', "")
                ),
                question: question_total,
            }
        }
        Shape::YamlNested => {
            let data = rows(rng, n.min(50));
            let total: i64 = data.iter().map(|r| r.3).sum();
            let key = rng.pick(&["net", "closing", "value", "sum"]);
            let mut text = format!(
                "report:\n  slice: {}\n  generated: 2024-10-02T08:00:00Z\n",
                t.slice
            );
            let items = |text: &mut String| {
                text.push_str("  items:\n");
                for r in &data {
                    text.push_str(&format!(
                        "    - region: {}\n      product: {}\n      {m}: {}\n",
                        REGIONS[r.0],
                        PRODUCTS[r.1],
                        money(r.3)
                    ));
                }
            };
            let summary = |text: &mut String| {
                text.push_str(&format!(
                    "  summary:\n    orders: {}\n    totals:\n      {m}:\n        {key}: {}\n        currency_rate: 1.0\n",
                    data.len(),
                    money(total)
                ));
            };
            if rng.chance(50) {
                summary(&mut text);
                items(&mut text);
            } else {
                items(&mut text);
                summary(&mut text);
            }
            Output {
                text,
                figure: money(total),
                label: key.to_owned(),
                tool: "file_reader",
                call: format!("{{\"path\": \"reports/{m}.yaml\"}}"),
                question: question_total,
            }
        }
        Shape::Log => {
            let total = cents(rng, 50_000, 9_000_000);
            let mut lines = Vec::new();
            let at = rng.below(n as u64) as usize;
            let mut second = 0u64;
            for i in 0..n {
                second += 1 + rng.below(4);
                let ts = format!(
                    "2024-10-02T08:{:02}:{:02}.{:03}Z",
                    second / 60 % 60,
                    second % 60,
                    rng.below(1000)
                );
                if i == at {
                    let line = match rng.below(3) {
                        0 => format!(
                            "{ts} INFO  settle: batch B-{} closed, {m} settled {} across {} invoices",
                            100 + rng.below(900),
                            money(total),
                            200 + rng.below(2000)
                        ),
                        1 => format!(
                            "{ts} INFO  reconcile: {m}={} matched={} unmatched={}",
                            money(total),
                            900 + rng.below(100),
                            rng.below(9)
                        ),
                        _ => format!(
                            "{ts} WARN  ledger: {m} for {} is {} after late postings",
                            t.slice,
                            money(total)
                        ),
                    };
                    lines.push(line);
                }
                let level = if rng.chance(8) {
                    "WARN "
                } else if rng.chance(3) {
                    "ERROR"
                } else {
                    "INFO "
                };
                lines.push(format!(
                    "{ts} {level} worker-{}: processed chunk {} of {} ({} rows, {} ms)",
                    rng.below(8),
                    i + 1,
                    n,
                    200 + rng.below(800),
                    10 + rng.below(400)
                ));
            }
            Output {
                text: lines.join("\n"),
                figure: money(total),
                label: m.to_owned(),
                tool: "run_command",
                call: format!("{{\"command\": \"tail -n {n} /var/log/settle/{m}.log\"}}"),
                question: format!("What did the log say {m} came to for {}?", t.slice),
            }
        }
        Shape::Traceback => {
            let total = cents(rng, 50_000, 9_000_000);
            let mut lines = vec!["Traceback (most recent call last):".to_owned()];
            let frames = 4 + rng.below(30) as usize;
            for f in 0..frames {
                lines.push(format!(
                    "  File \"/srv/jobs/{}.py\", line {}, in {}",
                    rng.pick(&["pipeline", "loaders", "checks", "reconcile", "io_utils"]),
                    10 + rng.below(600),
                    rng.pick(&["run", "load", "check_totals", "apply", "_step", "wrapper"])
                ));
                lines.push(format!(
                    "    {}",
                    rng.pick(&[
                        "result = step(frame)",
                        "return fn(*args, **kwargs)",
                        "frame = frame.merge(rates, on='currency')",
                        "assert abs(got - want) < 0.01, msg",
                        "rows = list(reader)",
                    ])
                ));
                let _ = f;
            }
            let exc = rng.pick(&[
                "AssertionError",
                "ValueError",
                "ReconcileMismatch",
                "RuntimeError",
            ]);
            lines.push(format!(
                "{exc}: {m} for {} came to {} against the ledger's {}",
                t.slice,
                money(total),
                money(total + cents(rng, 1, 900))
            ));
            Output {
                text: lines.join("\n"),
                figure: money(total),
                label: m.to_owned(),
                tool: "run_python",
                call: format!("{{\"code\": \"reconcile('{m}', {})\"}}", t.filter),
                question: format!("What {m} did the failed check find for {}?", t.slice),
            }
        }
        Shape::Prose => {
            let total = cents(rng, 50_000, 9_000_000);
            let mut sentences: Vec<String> = (0..n / 4 + 4)
                .map(|_| {
                    let region = rng.pick(REGIONS);
                    let product = rng.pick(PRODUCTS);
                    match rng.below(4) {
                        0 => format!(
                            "{region} sold {} units of {product} at {} on average.",
                            10 + rng.below(900),
                            money(cents(rng, 20, 900))
                        ),
                        1 => format!(
                            "In {region}, {product} moved {} % against the prior month.",
                            rng.below(40)
                        ),
                        2 => format!(
                            "The {product} line in {region} booked {} in the period.",
                            money(cents(rng, 500, 90_000))
                        ),
                        _ => format!(
                            "Orders from {region} averaged {} days to ship.",
                            1 + rng.below(9)
                        ),
                    }
                })
                .collect();
            let at = rng.below(sentences.len() as u64 + 1) as usize;
            let lead = rng.pick(&[
                "Across every region, {m} for {s} came to {v}.",
                "Taken together, {s} brought {m} of {v}.",
                "All in all, the {m} of {s} stands at {v}.",
            ]);
            sentences.insert(
                at,
                lead.replace("{m}", m)
                    .replace("{s}", &t.slice)
                    .replace("{v}", &money(total)),
            );
            Output {
                text: sentences.join(" "),
                figure: money(total),
                label: m.to_owned(),
                tool: "run_python",
                call: format!("{{\"code\": \"print(narrate('{m}', {}))\"}}", t.filter),
                question: question_total,
            }
        }
        Shape::FixedWidth => {
            let data = rows(rng, n);
            let total: i64 = data.iter().map(|r| r.3).sum();
            let label = rng.pick(&["TOTAL", "GRAND TOTAL", "Total", "总计"]);
            let mut lines = vec![
                format!("{m} REPORT — {}", t.slice.to_uppercase()),
                "RUN 2024-10-02 08:00                                PAGE 1".to_owned(),
                String::new(),
                format!(
                    "{:<10}{:<14}{:<10}{:>14}",
                    "REGION",
                    "PRODUCT",
                    "MONTH",
                    m.to_uppercase()
                ),
            ];
            for r in &data {
                lines.push(format!(
                    "{:<10}{:<14}{:<10}{:>14}",
                    REGIONS[r.0],
                    PRODUCTS[r.1],
                    MONTHS[r.2],
                    money(r.3)
                ));
            }
            lines.push(format!("{:<34}{:>14}", "", "-".repeat(14)));
            lines.push(format!("{:<34}{:>14}", label, money(total)));
            Output {
                text: lines.join("\n"),
                figure: money(total),
                label: label.to_owned(),
                tool: "file_reader",
                call: format!(
                    "{{\"path\": \"reports/{m}_{}.txt\"}}",
                    t.filter.replace(' ', "")
                ),
                question: question_total,
            }
        }
        Shape::SeveralTables => {
            let data = rows(rng, n.min(40));
            let by_region: Vec<(String, Vec<String>)> = (0..5)
                .map(|g| {
                    let s: i64 = data.iter().filter(|r| r.0 == g).map(|r| r.3).sum();
                    (REGIONS[g].to_owned(), vec![money(s)])
                })
                .collect();
            let by_month: Vec<(String, Vec<String>)> = (0..12)
                .map(|g| {
                    let s: i64 = data.iter().filter(|r| r.2 == g).map(|r| r.3).sum();
                    (MONTHS[g].to_owned(), vec![money(s)])
                })
                .collect();
            let total: i64 = data.iter().map(|r| r.3).sum();
            let title = rng.pick(&["overall", "all_rows", "sum", "total"]);
            let mut text = format!(
                "By region:\n{}\n\nBy month:\n{}\n\n",
                pandas("region", &[m], &by_region).join("\n"),
                pandas("month", &[m], &by_month).join("\n")
            );
            text.push_str(&format!(
                "Overall:\n{}",
                pandas("", &[title], &[("0".to_owned(), vec![money(total)])]).join("\n")
            ));
            Output {
                text,
                figure: money(total),
                label: title.to_owned(),
                tool: "run_python",
                call: format!(
                    "{{\"code\": \"for g in ['region','month']: print(df.groupby(g)['{m}'].sum())  # {}\"}}",
                    t.filter
                ),
                question: question_total,
            }
        }
    }
}

//! The structural reader on real outputs: psql, pandas, sqlite3, PyYAML and jq renderings of
//! the demo's database (`fixtures/outputs/`, written by those programs), and the tool results of
//! the recorded Claude Code sessions in `../shared/fixtures` (a Python traceback, an Elixir
//! crash, a JavaScript stack, an Elixir log, `ls -l`, JSON lines, a report in sentences, a file
//! read by lines). Each kind is recognised, its key figure comes first, and every figure the
//! reader keeps has its label.

use std::path::PathBuf;

use ba_context::{OutputKind, Reading, read_output, trace_text};
use ba_protocol::LogRole;

fn output(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/outputs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn first(r: &Reading) -> String {
    r.items.first().map(|i| i.render(120)).unwrap_or_default()
}

/// Every item that holds figures names them: a label, or a title for each value.
fn labelled(r: &Reading) -> Result<(), String> {
    for item in r.items.iter().filter(|i| !i.pairs.is_empty()) {
        if item.label.is_empty() && item.pairs.iter().any(|(t, _)| t.is_empty()) {
            return Err(format!("{item:?}"));
        }
    }
    Ok(())
}

#[test]
fn psql_tables_are_read_with_their_totals_and_one_row_results() {
    // GROUP BY ROLLUP: subtotals and the grand total with empty grouping cells.
    let r = read_output(&output("psql_1.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(first(&r), "(all) · amount = 3511053.50");
    assert_eq!(r.items[1].render(120), "Central · amount = 573090.50");
    // Two queries: twelve rows, then `SELECT sum(…)`'s one row.
    let r = read_output(&output("psql_2.txt"));
    assert_eq!(r.kind, OutputKind::Tables);
    assert_eq!(first(&r), "sum = 444645.00");
    assert!(r.items.iter().any(|i| i.line == "(12 rows)"));
    // Quarters in columns, a total column and a total row.
    let r = read_output(&output("psql_3.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(
        first(&r),
        "Total · total = 3511053.50; q4 = 898714.00; q3 = 1064202.50; q2 = 796970.00; q1 = 751167.00"
    );
    assert!(
        r.items
            .iter()
            .any(|i| i.render(80) == "West · total = 860231.50")
    );
}

#[test]
fn pandas_frames_are_read_whole_cut_and_wrapped() {
    let r = read_output(&output("pandas_total_row.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(first(&r), "Total · amount = 3511053.5; units = 8685");
    // A pivot with margins, its middle columns cut (`...`) or wrapped in blocks (`\`).
    let r = read_output(&output("pandas_pivot.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert!(first(&r).starts_with("All · All = 3511053.5; 2024-12 = 328363.0"));
    assert!(r.items.iter().any(|i| i.line == "[6 rows x 13 columns]"));
    let r = read_output(&output("pandas_pivot_wrapped.txt"));
    assert_eq!(r.kind, OutputKind::Tables);
    assert!(first(&r).starts_with("All · All = 3511053.5"));
    // A long frame printed head and tail: nothing sums it up, its size does.
    let r = read_output(&output("pandas_frame.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(first(&r), "[1942 rows x 6 columns]");
    // describe(): every row a statistic, each with its name.
    let r = read_output(&output("pandas_describe.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    for stat in ["count", "mean", "max"] {
        assert!(
            r.items
                .iter()
                .any(|i| i.why == "aggregate row" && i.label == stat),
            "{stat}: {:?}",
            r.items
        );
    }
    // A Series: its name and type are its footer.
    let r = read_output(&output("pandas_series.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert!(
        r.items
            .iter()
            .any(|i| i.line == "Name: amount, dtype: float64")
    );
}

#[test]
fn sqlite_csv_yaml_and_json_renderings_are_read_by_their_structure() {
    let r = read_output(&output("sqlite_column.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(first(&r), "TOTAL · amount = 3511053.5; orders = 1942");
    let r = read_output(&output("sqlite_rollup.csv.txt"));
    assert_eq!(r.kind, OutputKind::Table);
    assert_eq!(first(&r), "(all) · amount = 3511053.5; units = 8685");
    assert_eq!(
        r.items[1].render(120),
        "Cloud Storage · amount = 106972.0; units = 1387"
    );
    let r = read_output(&output("pyyaml_summary.yaml.txt"));
    assert_eq!(r.kind, OutputKind::Yaml);
    assert_eq!(
        first(&r),
        "report.totals · amount = 3511053.5; units = 8685"
    );
    let r = read_output(&output("jq_summary.json.txt"));
    assert_eq!(r.kind, OutputKind::Json);
    assert_eq!(
        first(&r),
        "report.totals · orders = 1942; amount = 3511053.5"
    );
}

#[test]
fn a_trace_keeps_the_key_figure_with_its_label_at_every_size() {
    for (name, line) in [
        ("psql_1.txt", "(all) · amount = 3511053.50"),
        ("psql_2.txt", "sum = 444645.00"),
        ("pandas_pivot_wrapped.txt", "All · All = 3511053.5"),
        ("sqlite_column.txt", "TOTAL · amount = 3511053.5"),
        (
            "pyyaml_summary.yaml.txt",
            "report.totals · amount = 3511053.5",
        ),
    ] {
        let text = output(name);
        for cap in [320, 120, 60] {
            // An output that fits the cap is kept whole.
            let Some(t) = trace_text(&text, "run_python", true, "recall e1", cap) else {
                assert!(text.chars().count() < cap, "{name} at {cap}");
                continue;
            };
            let kept = t.lines().nth(1).unwrap_or("");
            assert!(kept.starts_with(line), "{name} at {cap}: {t}");
            // Traced again at a smaller cap, the line stays first.
            let again = trace_text(&t, "x", true, "x", 40).unwrap_or(t);
            assert!(
                again
                    .lines()
                    .nth(1)
                    .unwrap_or("")
                    .contains(line.rsplit(' ').next().unwrap()),
                "{name} at {cap} then 40: {again}"
            );
        }
    }
}

/// The tool results of the long recorded sessions, by entry id.
fn session_results() -> Option<Vec<(String, String)>> {
    let dir = ba_testkit::fixture("transcripts/spotter")?;
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for e in ba_protocol::claude_code::session_to_log(&text).value {
            if e.role == LogRole::Tool {
                out.push((e.id.clone(), e.text().into_owned()));
            }
        }
    }
    Some(out)
}

#[test]
fn real_tool_results_of_recorded_sessions_are_read_by_their_kind() {
    let Some(results) = session_results() else {
        return;
    };
    let get = |id: &str| {
        results
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, t)| read_output(t))
            .unwrap_or_else(|| panic!("no tool result {id}"))
    };
    let cases: [(&str, OutputKind, &str); 8] = [
        (
            "67abcfe7-216a-4d7d-8429-261e27c33198",
            OutputKind::Traceback,
            "json.decoder.JSONDecodeError: Unterminated string starting at: line 1 column 256 (char 255)",
        ),
        (
            "d3d855ad-c8d3-48e2-bae9-4200261535d3",
            OutputKind::Traceback,
            "** (Mix) Could not start application opentelemetry: exited in: :opentelemetry_app.start(:normal, [])",
        ),
        (
            "85cb9306-46e8-4ed2-9e1b-97fc99e0353e",
            OutputKind::Traceback,
            "error: Could not resolve \"js/app.js\"",
        ),
        (
            "bc5e3a47-77ad-4afa-92b6-5b4101cfa051",
            OutputKind::Log,
            "[info] == Migrated 20260211203856 in 0.0s",
        ),
        (
            "caedb9c0-43b4-43fe-8745-f614209aa62d",
            OutputKind::Table,
            "-rw-r--r--  1 marco marco 12389 Feb 12 15:13 README.md",
        ),
        ("657ec1c7-e662-4959-ab5a-402bf07d0b9a", OutputKind::Json, ""),
        (
            "5909b4ea-7ddf-465e-ad57-218dfacc5ec3",
            OutputKind::Prose,
            "✓ Closed spotter-dov.2: Removed silent 5-line truncation.",
        ),
        (
            "e49c8775-5beb-4fd7-aeb3-2016ccb1e57b",
            OutputKind::Prose,
            "",
        ),
    ];
    for (id, kind, best) in cases {
        let r = get(id);
        assert_eq!(r.kind, kind, "{id}");
        if !best.is_empty() {
            assert_eq!(first(&r), best, "{id}");
        }
    }
}

#[test]
fn every_figure_the_reader_keeps_has_its_label() {
    let mut texts: Vec<String> = session_results()
        .unwrap_or_default()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/outputs");
    for f in std::fs::read_dir(dir).unwrap().flatten() {
        texts.push(std::fs::read_to_string(f.path()).unwrap());
    }
    let mut kinds = std::collections::BTreeSet::new();
    for t in &texts {
        let r = read_output(t);
        kinds.insert(r.kind.name());
        if let Err(item) = labelled(&r) {
            panic!("a figure without its label: {item}\nin:\n{t}");
        }
    }
    // The outputs hold every kind the reader knows.
    assert!(kinds.len() >= 7, "{kinds:?}");
}

//! `cargo xtask bench [FILTER]`: runs every criterion bench of the workspace briefly, then
//! tables the results in `docs/BENCHMARKS.md`.
//!
//! Convention: inside a benchmark group, the comparison point is the function whose id starts
//! with `baseline`; every other function of the group is reported as a ratio against it,
//! measured in the same run (baseline time / candidate time: above 1 means faster).
//!
//! A bench may leave a note on a group (`target/criterion/<group>/note.md`, written with
//! `ba_testkit::bench_note`): what the group compares, or what it ran on. Notes are listed
//! under the table. The context crate's quality figures (planted facts, prompt-cache share)
//! follow, then the sections written by hand after the table (from the first `## ` heading),
//! which are kept.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde_json::Value;

struct Measure {
    median_ns: f64,
    bytes: Option<f64>,
    elements: Option<f64>,
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut cargo_args = vec![
        "bench",
        "--workspace",
        "--all-features",
        "--bench",
        "*",
        "--",
        "--warm-up-time",
        "1",
        "--measurement-time",
        "3",
    ];
    if let Some(filter) = args.first() {
        cargo_args.push(filter);
    }
    let target: std::path::PathBuf = std::env::var("CARGO_TARGET_DIR")
        .map(Into::into)
        .unwrap_or_else(|_| crate::root().join("target"));
    let target = std::fs::canonicalize(&target).unwrap_or(target);
    // Criterion finds its output folder through CARGO_TARGET_DIR, else `cargo metadata`, else
    // `target` under the bench's working folder (its crate): name it, so every group lands in
    // the one folder read below.
    let status =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(&cargo_args)
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(crate::root())
            .status()
            .context("running cargo bench")?;
    anyhow::ensure!(status.success(), "cargo bench failed ({status})");
    let (results, notes) = collect(&target.join("criterion"))?;
    let path = crate::root().join("docs/BENCHMARKS.md");
    let mut text = render(&results, &notes);
    text.push_str(&context_quality(&target)?);
    text.push_str(&kept_sections(
        &std::fs::read_to_string(&path).unwrap_or_default(),
    ));
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The context crate's quality figures, measured the same way every time: the planted-facts
/// benchmark (what each strategy keeps at 10 % and 25 % of a conversation) and `context replay`
/// on the long Claude Code sessions of the shared fixtures (the share of input tokens a prompt
/// cache could serve at a 32k budget, with compactions persisted and rebuilt every request).
fn context_quality(target: &Path) -> anyhow::Result<String> {
    let mut out = String::from("\n## Context fidelity (planted facts)\n\n");
    let table = target.join("fidelity.md");
    let status =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "test",
                "--release",
                "-p",
                "ba-context",
                "--test",
                "fidelity",
                "--quiet",
            ])
            .env("BA_AGENT_FIDELITY_TABLE", &table)
            .current_dir(crate::root())
            .status()
            .context("running the planted-facts benchmark")?;
    if !status.success() {
        anyhow::bail!("the planted-facts benchmark failed ({status})");
    }
    out.push_str(
        "Synthetic business-analysis conversations (`crates/context/tests/fidelity.rs`): the user\n\
         states constraints in the first rounds, each tool output hides one figure (a total, a peak,\n\
         a note) among many rows. Each conversation is built down to a budget of 10 % and 25 % of its\n\
         size (`truncate` is the keep-most-recent baseline).\n\n",
    );
    out.push_str(&std::fs::read_to_string(&table).context("reading the fidelity table")?);
    out.push_str("\n## Context fidelity across shapes (planted facts)\n\n");
    let shapes = target.join("fidelity-shapes.md");
    let status =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "test",
                "--release",
                "-p",
                "ba-context",
                "--test",
                "fidelity_shapes",
                "--quiet",
            ])
            .env("BA_AGENT_FIDELITY_SHAPES_TABLE", &shapes)
            .current_dir(crate::root())
            .status()
            .context("running the planted-facts benchmark across shapes")?;
    if !status.success() {
        anyhow::bail!("the planted-facts benchmark across shapes failed ({status})");
    }
    out.push_str(
        "Conversations generated by seed in shapes the strategies were not written against \
         (`crates/context/tests/fidelity_shapes.rs`), two per shape, 30–50 rounds: user turns short \
         (20–60 words) or long (150–300 words), English or Chinese, six constraints stated once or \
         restated; tool outputs as CSV with a `ROLLUP` total row, a JSON array with a summary \
         object, a Markdown table with a total row, prose with figures, a workbook preview, an \
         error output, the figure at the head, in the middle or at the tail among many other \
         numbers. Each shape is scored on its own; the worst shape is named.\n\n",
    );
    out.push_str(&std::fs::read_to_string(&shapes).context("reading the shapes table")?);
    out.push_str("\n## Prompt-cache share (`ba-agent context replay`, 32k budget)\n\n");
    let dir = crate::root().join("../shared/fixtures/transcripts/spotter");
    let mut sessions: Vec<_> = std::fs::read_dir(&dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 1_000_000))
                .collect()
        })
        .unwrap_or_default();
    sessions.sort();
    if sessions.is_empty() {
        out.push_str(&format!("Skipped: {} is absent.\n", dir.display()));
        return Ok(out);
    }
    crate::cargo(&["build", "--release", "-p", "ba-cli", "--quiet"])?;
    let bin = target.join("release/ba-agent");
    out.push_str(
        "Each long Claude Code session of `../shared/fixtures/transcripts/spotter` played request by\n\
         request (key-messages): the share of input tokens whose front repeats the previous request,\n\
         with compactions persisted (the product) and rebuilt at every request (before).\n\n\
         | session | requests | persisted: compactions | persisted: cacheable | rebuilt: compactions | rebuilt: cacheable |\n|---|---|---|---|---|---|\n",
    );
    for session in sessions {
        let replay = |stateless: bool| -> anyhow::Result<Value> {
            let mut args = vec!["context", "replay", "--budget", "32000", "--json"];
            if stateless {
                args.push("--stateless");
            }
            let o = std::process::Command::new(&bin)
                .args(&args)
                .arg(&session)
                .output()
                .context("running context replay")?;
            anyhow::ensure!(
                o.status.success(),
                "context replay failed on {}",
                session.display()
            );
            Ok(serde_json::from_slice(&o.stdout)?)
        };
        let (kept, rebuilt) = (replay(false)?, replay(true)?);
        let name: String = session
            .file_stem()
            .map(|s| s.to_string_lossy().chars().take(8).collect())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {:.1} % | {} | {:.1} % |",
            kept["totals"]["requests"],
            kept["totals"]["compactions"],
            kept["totals"]["cacheable_share"].as_f64().unwrap_or(0.0) * 100.0,
            rebuilt["totals"]["compactions"],
            rebuilt["totals"]["cacheable_share"].as_f64().unwrap_or(0.0) * 100.0,
        );
    }
    Ok(out)
}

type Results = BTreeMap<String, BTreeMap<String, Measure>>;

/// The measures by group and function, and the notes by group folder.
fn collect(dir: &Path) -> anyhow::Result<(Results, BTreeMap<String, String>)> {
    let mut out: Results = BTreeMap::new();
    let mut notes = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(note) = std::fs::read_to_string(d.join("note.md"))
            && let Some(group) = d.file_name()
        {
            notes.insert(group.to_string_lossy().into_owned(), note.trim().to_owned());
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let bench = path.join("new/benchmark.json");
            let estimates = path.join("new/estimates.json");
            if bench.is_file() && estimates.is_file() {
                let info: Value = serde_json::from_str(&std::fs::read_to_string(&bench)?)?;
                let est: Value = serde_json::from_str(&std::fs::read_to_string(&estimates)?)?;
                let group = info["group_id"].as_str().unwrap_or("?").to_owned();
                let function = info["function_id"]
                    .as_str()
                    .or(info["value_str"].as_str())
                    .unwrap_or("?")
                    .to_owned();
                let median_ns = est["median"]["point_estimate"].as_f64().unwrap_or(f64::NAN);
                let bytes = info["throughput"]["Bytes"].as_f64();
                let elements = info["throughput"]["Elements"].as_f64();
                out.entry(group).or_default().insert(
                    function,
                    Measure {
                        median_ns,
                        bytes,
                        elements,
                    },
                );
            } else {
                stack.push(path);
            }
        }
    }
    Ok((out, notes))
}

/// The hand-written sections after the table (from the first `## ` heading on), kept when the
/// table is rewritten.
/// The headings of the sections `cargo xtask bench` writes itself after the table.
const GENERATED: [&str; 2] = ["## Context fidelity", "## Prompt-cache share"];

/// The hand-written sections of the old file (after the table), without the generated ones.
fn kept_sections(old: &str) -> String {
    let Some(start) = old.find("\n## ") else {
        return String::new();
    };
    let mut out = String::new();
    for section in old[start..].split("\n## ").filter(|s| !s.trim().is_empty()) {
        let section = format!("\n## {section}");
        if !GENERATED
            .iter()
            .any(|g| section.starts_with(&format!("\n{g}")))
        {
            out.push_str(&section);
        }
    }
    out
}

fn human(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.2} s", n / 1e9),
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.2} µs", n / 1e3),
        n => format!("{n:.0} ns"),
    }
}

fn render(results: &Results, notes: &BTreeMap<String, String>) -> String {
    let mut s = String::from(
        "# Benchmarks\n\nWritten by `cargo xtask bench` (criterion, 1 s warm-up, 3 s measurement, medians).\n\
         Each ratio compares a candidate with the group's `baseline…` function measured in the same run:\n\
         baseline time / candidate time, so above 1 means the candidate is faster. The machine is shared and\n\
         noisy; read ratios, not absolute times.\n\n\
         | group | function | median | throughput | vs baseline |\n|---|---|---|---|---|\n",
    );
    for (group, functions) in results {
        let baseline = functions
            .iter()
            .find(|(name, _)| name.starts_with("baseline"))
            .map(|(_, m)| m.median_ns);
        for (name, m) in functions {
            let throughput = match (m.bytes, m.elements) {
                (Some(b), _) => format!("{:.1} MiB/s", b / (m.median_ns / 1e9) / (1024.0 * 1024.0)),
                (_, Some(e)) => format!("{:.0} elem/s", e / (m.median_ns / 1e9)),
                _ => String::new(),
            };
            let ratio = match baseline {
                Some(b) if !name.starts_with("baseline") => format!("{:.2}×", b / m.median_ns),
                Some(_) => "baseline".to_owned(),
                None => String::new(),
            };
            let _ = writeln!(
                s,
                "| {group} | {name} | {} | {throughput} | {ratio} |",
                human(m.median_ns)
            );
        }
    }
    let notes: Vec<(&String, &String)> = notes
        .iter()
        .filter(|(group, _)| results.contains_key(*group))
        .collect();
    if !notes.is_empty() {
        s.push_str("\nNotes:\n\n");
        for (group, note) in notes {
            let _ = writeln!(s, "- `{group}`: {}", note.replace('\n', " "));
        }
    }
    s
}

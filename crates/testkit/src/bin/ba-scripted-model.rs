//! `ba-scripted-model`: the scripted model as a program, for test suites that are not Rust
//! (the Python package's pytest suite and its example notebook). It listens on 127.0.0.1,
//! prints its OpenAI-compatible base URL (`http://127.0.0.1:PORT/v1`) on standard output, and
//! serves until standard input closes or it is killed.
//!
//! `--script analyst` (the default) answers as an analyst would, by these rules in order:
//! - a user message `call NAME {JSON}` calls the tool NAME with those arguments;
//! - a message with an upload has it read with `file_reader`, then runs `run_python` over the
//!   uploaded CSV: the sum of its last column by its first, one `- KEY: TOTAL` line each;
//! - in a workflow's node, `complete_node` is called with every output the node asks for (a
//!   value 1, a decision its first option, a table one row, anything else the text `done`);
//! - after `run_python` the answer gives its figures; after any other tool, what it said (or
//!   that it failed, and why);
//! - anything else is echoed (`You said: …`).
//!
//! `--script echo` only echoes.

use std::io::{Read as _, Write as _};
use std::process::ExitCode;

use ba_testkit::model::{Request, ScriptedModel, Turn};
use serde_json::{Value, json};

const USAGE: &str = "usage: ba-scripted-model [--script analyst|echo]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let script = match args.as_slice() {
        [] => "analyst".to_owned(),
        [flag, name] if flag == "--script" => name.clone(),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    if !matches!(script.as_str(), "analyst" | "echo") {
        eprintln!("unknown script `{script}`; {USAGE}");
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    // Standard input is read on a thread of its own: its end (the parent closed the pipe or
    // went away) is the signal to stop.
    std::thread::spawn(move || {
        let mut sink = [0u8; 1024];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        let _ = closed_tx.send(());
    });
    rt.block_on(async move {
        let model = build(&script).start().await;
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{}", model.openai_base_url())
            .and_then(|()| out.flush())
            .is_err()
        {
            return ExitCode::FAILURE;
        }
        drop(out);
        let _ = closed_rx.await;
        ExitCode::SUCCESS
    })
}

fn build(script: &str) -> ba_testkit::model::Builder {
    let echo = |r: &Request| Turn::text(format!("You said: {}", r.last_user_text()));
    if script == "echo" {
        return ScriptedModel::builder().rule("echo", |_| true, echo);
    }
    ScriptedModel::builder()
        .rule(
            "call the tool named",
            |r| r.round() == 0 && named_call(r.last_user_text()).is_some(),
            |r| match named_call(r.last_user_text()) {
                Some((name, input)) => Turn::call(name, input),
                None => Turn::text("nothing to call"),
            },
        )
        .rule(
            "complete the workflow's node",
            |r| {
                r.offers("complete_node")
                    && r.last_result().is_none_or(|l| l.name != "complete_node")
                    && node_to_complete(&format!("{}\n{}", r.system(), r.last_user_text()))
                        .is_some()
            },
            |r| match node_to_complete(&format!("{}\n{}", r.system(), r.last_user_text())) {
                Some(input) => Turn::call("complete_node", input),
                None => Turn::text("no node to complete"),
            },
        )
        .rule(
            "read the upload",
            |r| r.round() == 0 && r.offers("file_reader") && !r.uploads().is_empty(),
            |r| {
                Turn::calls(
                    r.uploads()
                        .into_iter()
                        .map(|u| ("file_reader", json!({"file": u}))),
                )
            },
        )
        .rule(
            "sum the upload",
            |r| {
                r.offers("run_python")
                    && r.last_result()
                        .is_some_and(|l| l.name == "file_reader" && !l.is_error)
            },
            |r| {
                Turn::call(
                    "run_python",
                    json!({"code": sum_code(&csv_name(r.last_user_text()))}),
                )
            },
        )
        .rule(
            "give the figures",
            |r| r.last_result().is_some_and(|l| l.name == "run_python"),
            |r| {
                let text = r.last_result().map(|l| l.text.clone()).unwrap_or_default();
                Turn::text(format!(
                    "The totals by group, from the upload:\n{}",
                    figures(&text)
                ))
            },
        )
        .rule(
            "say what the tool said",
            |r| r.last_result().is_some(),
            |r| match r.last_result() {
                Some(l) if l.is_error => {
                    Turn::text(format!("The tool `{}` failed: {}", l.name, l.text))
                }
                Some(l) => Turn::text(format!("The tool `{}` said: {}", l.name, l.text)),
                None => Turn::text("no tool answered"),
            },
        )
        .rule("echo", |_| true, echo)
}

/// `call NAME {JSON}`: the tool and its arguments.
fn named_call(text: &str) -> Option<(String, Value)> {
    let rest = text.trim().strip_prefix("call ")?;
    let (name, args) = rest.split_once(' ')?;
    let args: Value = serde_json::from_str(args.trim()).ok()?;
    args.is_object().then(|| (name.to_owned(), args))
}

/// The `complete_node` input for the node a workflow's brief describes: its id (from the
/// brief's `{"node": "ID", …}`) and a value for each output the brief's `It must produce:`
/// lists (`- `NAME` (KIND)…`, a decision's options after `one of:`).
fn node_to_complete(brief: &str) -> Option<Value> {
    let after = brief.split("{\"node\": \"").nth(1)?;
    let node = after.split('"').next()?.to_owned();
    let produce = brief.split("It must produce:").nth(1)?;
    let mut outputs = serde_json::Map::new();
    for line in produce.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("- `") else {
            if !outputs.is_empty() && !line.is_empty() {
                break;
            }
            continue;
        };
        let Some((name, rest)) = rest.split_once("` (") else {
            continue;
        };
        let kind = rest.split(')').next().unwrap_or_default();
        let value = match kind {
            "value" => json!(1),
            "table" => json!([{"row": 1}]),
            "decision" => rest
                .split("one of: ")
                .nth(1)
                .and_then(|o| o.split(',').next())
                .map_or(json!("done"), |o| json!(o.trim())),
            _ => json!("done"),
        };
        outputs.insert(name.to_owned(), value);
    }
    Some(json!({"node": node, "outputs": outputs}))
}

/// The name of the first `.csv` upload the message's note lists (`<file_ref>ID</file_ref>
/// NAME (type, size)`).
fn csv_name(text: &str) -> String {
    text.split("</file_ref>")
        .skip(1)
        .filter_map(|after| after.trim_start().split(" (").next())
        .find(|name| name.ends_with(".csv"))
        .unwrap_or("data.csv")
        .to_owned()
}

/// Code summing the last column of `name` by its first, one `- KEY: TOTAL` line a group.
fn sum_code(name: &str) -> String {
    let name = serde_json::to_string(name).unwrap_or_else(|_| "\"data.csv\"".to_owned());
    format!(
        "import csv\n\
         with open({name}, newline='') as f:\n    rows = list(csv.DictReader(f))\n\
         key, value = list(rows[0])[0], list(rows[0])[-1]\n\
         totals = {{}}\n\
         for row in rows:\n    totals[row[key]] = totals.get(row[key], 0.0) + float(row[value])\n\
         for k in sorted(totals):\n    print(f'- {{k}}: {{totals[k]:g}}')\n"
    )
}

/// The `- KEY: TOTAL` lines of what the code printed (the result's `stdout`, or its whole text
/// when it is not the tool's JSON).
fn figures(result: &str) -> String {
    let stdout = serde_json::from_str::<Value>(result)
        .ok()
        .and_then(|v| v.get("stdout").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| result.to_owned());
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("- ") && l.contains(": "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_outputs_are_filled_by_their_kind() {
        let brief = "Node `check`: Check the month.\n\nIt must produce:\n\
                     - `rows` (value): how many rows\n\
                     - `verdict` (decision): whether it holds — one of: on_track, behind\n\
                     - `note` (text)\n\n\
                     When the node is done, call `complete_node` with {\"node\": \"check\", \
                     \"outputs\": {…}} holding every output above.";
        assert_eq!(
            node_to_complete(brief),
            Some(json!({"node": "check", "outputs":
                {"rows": 1, "verdict": "on_track", "note": "done"}}))
        );
        assert_eq!(node_to_complete("no workflow here"), None);
    }

    #[test]
    fn a_named_call_is_read_with_its_arguments() {
        assert_eq!(
            named_call(r#"call scale {"factor": 3}"#),
            Some(("scale".to_owned(), json!({"factor": 3})))
        );
        assert_eq!(named_call("call scale [1]"), None);
        assert_eq!(named_call("please call scale"), None);
    }

    #[test]
    fn the_csv_name_comes_from_the_attachment_note() {
        let text = "Totals?\n\nUploaded files (read one with file_reader):\n\
                    - <file_ref>upload_001</file_ref> notes.txt (text/plain, 4 bytes)\n\
                    - <file_ref>upload_002</file_ref> sales by region.csv (text/csv, 80 bytes)";
        assert_eq!(csv_name(text), "sales by region.csv");
        assert_eq!(csv_name("no files"), "data.csv");
    }

    #[test]
    fn figures_are_the_total_lines_only() {
        let printed = "exit code 0\nstdout:\n- north: 125.5\n- south: 40\nstderr: (none)";
        assert_eq!(figures(printed), "- north: 125.5\n- south: 40");
        let result = json!({"exit_code": 0, "stdout": "- north: 125.5\nnote\n- south: 40\n"});
        assert_eq!(figures(&result.to_string()), "- north: 125.5\n- south: 40");
    }
}

//! `WORKFLOW.md` files written into temporary folders: what loads, and the exact diagnostic of
//! each broken one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ba_skills::{
    Diagnostic, InputType, Next, OutputKind, Rule, Severity, WorkflowSet, validate_workflow,
};

const GOOD: &str = "---
name: review
description: Reviews a month.
inputs:
  - name: month
    type: month
    default: 2024-09
  - name: region
    type: string
    description: The region to review.
nodes:
  - id: load
    title: Load the data
    brief: |
      Load the month's rows.
      Check them.
    tools: [query_database, file_reader]
    outputs:
      - name: rows
        kind: value
  - id: decide
    title: Decide
    brief: Decide.
    tools: run_python
    outputs:
      verdict:
        kind: decision
        options: [on_track, behind]
    next:
      on: verdict
      cases:
        behind: explain
        on_track: end
  - id: explain
    title: Explain
    brief: Explain the shortfall.
    skills: [sales-report]
    outputs:
      causes: text
---
Keep it short.
";

fn write(root: &Path, name: &str, text: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("WORKFLOW.md");
    std::fs::write(&path, text).unwrap();
    path
}

fn tools() -> BTreeSet<String> {
    ["file_reader", "query_database", "run_python"]
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// A workflow named `w` with these node lines (YAML, indented by two).
fn with_nodes(nodes: &str) -> String {
    format!("---\nname: w\ndescription: d\nnodes:\n{nodes}---\n")
}

/// What strict validation finds (with the demo's tools known), each about the file.
fn found(text: &str) -> Vec<Diagnostic> {
    let tmp = tempfile::tempdir().unwrap();
    let path = write(tmp.path(), "w", text);
    let found = validate_workflow(&path, Some(&tools()));
    assert!(found.iter().all(|d| d.path == path), "{found:#?}");
    found
}

/// The one diagnostic strict validation gives.
fn only(text: &str) -> Diagnostic {
    let mut found = found(text);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0)
}

#[test]
fn a_good_workflow_loads_with_its_parts() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "review", GOOD);
    let set = WorkflowSet::load(&[tmp.path().to_path_buf()]);
    assert!(set.diagnostics().is_empty(), "{:#?}", set.diagnostics());
    let def = set.get("review").unwrap();
    assert_eq!(def.body, "Keep it short.\n");
    assert_eq!(def.inputs[0].ty, InputType::Month);
    assert_eq!(def.inputs[0].default, Some(serde_json::json!("2024-09")));
    assert!(!def.inputs[0].required);
    assert!(def.inputs[1].required);
    let load = def.first_node().unwrap();
    assert_eq!(load.brief, "Load the month's rows.\nCheck them.\n");
    assert_eq!(load.next, Next::Node("decide".into()));
    let decide = def.node("decide").unwrap();
    assert_eq!(
        decide.tools.as_deref(),
        Some(&["run_python".to_owned()][..])
    );
    assert_eq!(decide.outputs[0].kind, OutputKind::Decision);
    assert_eq!(decide.outputs[0].options, ["on_track", "behind"]);
    let explain = def.node("explain").unwrap();
    assert_eq!(explain.next, Next::End);
    assert_eq!(explain.outputs[0].kind, OutputKind::Text);
    assert!(validate_workflow(tmp.path(), Some(&tools())).is_empty());

    let outputs = decide
        .check_outputs(&serde_json::json!({"verdict": "behind"}))
        .unwrap();
    assert_eq!(decide.next_after(&outputs), Ok(Some("explain")));
    let inputs = def
        .resolve_inputs(&BTreeMap::from([("region".into(), "West".into())]))
        .unwrap();
    assert_eq!(
        serde_json::Value::Object(inputs),
        serde_json::json!({"month": "2024-09", "region": "West"})
    );
}

#[test]
fn a_cycle_without_an_exit() {
    let found = found(&with_nodes(
        "  - {id: a, title: A, brief: b}\n  - {id: b, title: B, brief: b, next: a}\n",
    ));
    let messages: Vec<_> = found
        .iter()
        .map(|d| (d.severity, d.rule, d.message.as_str()))
        .collect();
    assert_eq!(
        messages,
        vec![
            (
                Severity::Error,
                Rule::NoWayOut,
                "node `a` has no way out: every path from it loops among `a`, `b` without reaching `end`"
            ),
            (
                Severity::Error,
                Rule::NoWayOut,
                "node `b` has no way out: every path from it loops among `a`, `b` without reaching `end`"
            ),
        ]
    );
}

#[test]
fn a_node_with_no_way_out_beside_one_with() {
    let d = only(&with_nodes(
        "  - id: a\n    title: A\n    brief: b\n    outputs: {go: decision}\n    next: {on: go, cases: {x: end, y: c}}\n  - {id: c, title: C, brief: b, next: c}\n",
    ));
    assert_eq!((d.severity, d.rule), (Severity::Error, Rule::NoWayOut));
    assert_eq!(
        d.message,
        "node `c` has no way out: every path from it loops among `c` without reaching `end`"
    );
}

#[test]
fn an_unknown_tool() {
    let d = only(&with_nodes(
        "  - {id: a, title: A, brief: b, tools: [run_python, sql]}\n",
    ));
    assert_eq!((d.severity, d.rule), (Severity::Error, Rule::UnknownTool));
    assert_eq!(
        d.message,
        "node `a`: tool `sql` is not known (the known tools are `file_reader`, `query_database`, `run_python`)"
    );
}

#[test]
fn an_unknown_next_node() {
    let d = only(&with_nodes(
        "  - {id: a, title: A, brief: b}\n  - {id: b, title: B, brief: b, next: summary}\n",
    ));
    assert_eq!((d.severity, d.rule), (Severity::Error, Rule::UnknownNode));
    assert_eq!(
        d.message,
        "node `b`: `next` names `summary`, which is not a node of this workflow (the nodes are `a`, `b`; `end` ends it)"
    );
}

#[test]
fn a_branch_on_an_undeclared_output() {
    let d = only(&with_nodes(
        "  - id: a\n    title: A\n    brief: b\n    outputs: [{name: verdict, kind: decision}]\n    next: {on: verdcit, cases: {x: end}}\n",
    ));
    assert_eq!(
        (d.severity, d.rule),
        (Severity::Error, Rule::BranchOnUndeclared)
    );
    assert_eq!(
        d.message,
        "node `a` branches on `verdcit`, which is not one of its outputs (it declares `verdict`)"
    );
}

#[test]
fn a_branch_missing_an_option() {
    let d = only(&with_nodes(
        "  - id: a\n    title: A\n    brief: b\n    outputs: {verdict: {kind: decision, options: [on_track, behind]}}\n    next: {on: verdict, cases: {on_track: end}}\n",
    ));
    assert_eq!(
        (d.severity, d.rule),
        (Severity::Warning, Rule::BranchMissesOption)
    );
    assert_eq!(
        d.message,
        "node `a`: the branch on `verdict` has no case for `behind` and no default; a run that decides it stops with an error"
    );
}

#[test]
fn duplicate_node_ids() {
    let d = only(&with_nodes(
        "  - {id: a, title: A, brief: b, next: end}\n  - {id: a, title: A2, brief: b}\n",
    ));
    assert_eq!((d.severity, d.rule), (Severity::Error, Rule::DuplicateId));
    assert_eq!(d.message, "node id `a` is used by more than one node");
}

#[test]
fn bad_input_types_and_output_kinds() {
    let d = only(
        "---\nname: w\ndescription: d\ninputs: {month: {type: monthly}}\nnodes:\n  - {id: a, title: A, brief: b}\n---\n",
    );
    assert_eq!(
        (d.severity, d.rule),
        (Severity::Error, Rule::UnknownInputType)
    );
    assert_eq!(
        d.message,
        "input `month`: unknown type `monthly`; the types are string, number, integer, boolean, date, month"
    );
    let d = only(&with_nodes(
        "  - {id: a, title: A, brief: b, outputs: {chart: picture}}\n",
    ));
    assert_eq!(d.rule, Rule::UnknownOutputKind);
    assert_eq!(
        d.message,
        "node `a`, output `chart`: unknown kind `picture`; the kinds are table, figure, file, decision, value, text"
    );
    let d = only(
        "---\nname: w\ndescription: d\ninputs: {n: {type: integer, default: many}}\nnodes:\n  - {id: a, title: A, brief: b}\n---\n",
    );
    assert_eq!(d.rule, Rule::BadDefault);
    assert_eq!(
        d.message,
        "input `n`: the default `many` is not a whole number"
    );
}

#[test]
fn empty_nodes_and_bad_names() {
    let d = only("---\nname: w\ndescription: d\nnodes: []\n---\n");
    assert_eq!(d.rule, Rule::NoNodes);
    let tmp = tempfile::tempdir().unwrap();
    let path = write(
        tmp.path(),
        "Review",
        "---\nname: Review\ndescription: d\nnodes:\n  - {id: a, title: A, brief: b}\n---\n",
    );
    let found = validate_workflow(&path, None);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].rule, Rule::NameNotLowercase);
    assert_eq!(found[0].message, "name `Review` must be lowercase");
}

#[test]
fn unreachable_is_a_warning_and_unknown_fields_are_strict_errors() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "w",
        &with_nodes(
            "  - {id: a, title: A, brief: b, next: end, output: x}\n  - {id: b, title: B, brief: b}\n",
        ),
    );
    let strict = validate_workflow(tmp.path(), None);
    let seen: Vec<_> = strict.iter().map(|d| (d.severity, d.rule)).collect();
    assert_eq!(
        seen,
        vec![
            (Severity::Error, Rule::UnexpectedField),
            (Severity::Warning, Rule::Unreachable)
        ]
    );
    assert_eq!(
        strict[0].message,
        "node `a`: unexpected field `output`; the fields are `id`, `title`, `brief`, `tools`, `skills`, `outputs`, `next`"
    );
    assert_eq!(
        strict[1].message,
        "node `b` cannot be reached from the first node `a`"
    );
    // Loading is lenient: both are warnings and the workflow loads.
    let set = WorkflowSet::load(&[tmp.path().to_path_buf()]);
    assert!(set.get("w").is_some());
    assert!(set.diagnostics().iter().all(|d| !d.is_error()));
}

#[test]
fn loading_keeps_the_good_and_reports_the_bad() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "review", GOOD);
    write(
        tmp.path(),
        "w",
        &with_nodes("  - {id: a, title: A, brief: b, next: nowhere}\n"),
    );
    write(tmp.path(), "broken", "no frontmatter\n");
    let set = WorkflowSet::load(&[tmp.path().to_path_buf(), tmp.path().join("missing")]);
    assert_eq!(
        set.workflows().map(|w| w.name.as_str()).collect::<Vec<_>>(),
        ["review"]
    );
    let rules: Vec<_> = set.diagnostics().iter().map(|d| d.rule).collect();
    assert_eq!(
        rules,
        vec![
            Rule::RootUnreadable,
            Rule::MissingFrontmatter,
            Rule::UnknownNode
        ]
    );
    assert_eq!(
        set.diagnostics()[0].message,
        format!(
            "workflow root {} is not a readable folder",
            tmp.path().join("missing").display()
        )
    );
}

#[test]
fn a_second_root_loses_a_name_clash() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    write(a.path(), "review", GOOD);
    let second = write(b.path(), "review", GOOD);
    let set = WorkflowSet::load(&[a.path().to_path_buf(), b.path().to_path_buf()]);
    assert_eq!(set.diagnostics().len(), 1);
    assert_eq!(set.diagnostics()[0].rule, Rule::NameClash);
    assert_eq!(set.diagnostics()[0].path, second);
    assert!(set.get("review").unwrap().path.starts_with(a.path()));
}

#[test]
fn oversized_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let body = "x".repeat(usize::try_from(ba_skills::MAX_WORKFLOW_BYTES).unwrap());
    write(
        tmp.path(),
        "w",
        &format!("{}{body}", with_nodes("  - {id: a, title: A, brief: b}\n")),
    );
    let set = WorkflowSet::load(&[tmp.path().to_path_buf()]);
    assert!(set.get("w").is_none());
    assert_eq!(set.diagnostics()[0].rule, Rule::BodyTooLarge);
}

#[cfg(unix)]
#[test]
fn a_link_out_of_the_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside.md");
    std::fs::write(&outside, with_nodes("  - {id: a, title: A, brief: b}\n")).unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("w")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("w/WORKFLOW.md")).unwrap();
    let set = WorkflowSet::load(&[root]);
    assert!(set.get("w").is_none());
    assert_eq!(
        set.diagnostics()[0].message,
        "WORKFLOW.md is a link to a file outside its folder; it is not read"
    );
}

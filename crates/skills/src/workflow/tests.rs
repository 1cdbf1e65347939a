use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::*;
use crate::diagnostic::Rule;

fn node(id: &str, next: Next) -> WorkflowNode {
    WorkflowNode {
        id: id.into(),
        title: id.into(),
        brief: format!("Do {id}."),
        tools: None,
        skills: Vec::new(),
        outputs: Vec::new(),
        next,
    }
}

fn decision(name: &str, options: &[&str]) -> NodeOutput {
    NodeOutput {
        name: name.into(),
        kind: OutputKind::Decision,
        description: None,
        options: options.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn branch(on: &str, cases: &[(&str, &str)], default: Option<&str>) -> Next {
    Next::Branch {
        on: on.into(),
        cases: cases
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        default: default.map(str::to_owned),
    }
}

fn def(nodes: Vec<WorkflowNode>) -> WorkflowDef {
    WorkflowDef {
        name: "w".into(),
        description: "d".into(),
        inputs: Vec::new(),
        nodes,
        body: String::new(),
        path: "w/WORKFLOW.md".into(),
    }
}

fn outputs(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn rules(def: &WorkflowDef) -> Vec<Rule> {
    def.check(None).into_iter().map(|d| d.rule).collect()
}

#[test]
fn next_after_follows_fixed_next_and_end() {
    let a = node("a", Next::Node("b".into()));
    assert_eq!(a.next_after(&Map::new()), Ok(Some("b")));
    let b = node("b", Next::End);
    assert_eq!(b.next_after(&Map::new()), Ok(None));
    let c = node("c", Next::Node(END.into()));
    assert_eq!(c.next_after(&Map::new()), Ok(None));
}

#[test]
fn next_after_reads_branch_values_as_text() {
    let mut n = node("t", branch("ok", &[("true", "x"), ("false", END)], None));
    n.outputs.push(decision("ok", &[]));
    assert_eq!(n.next_after(&outputs(json!({"ok": true}))), Ok(Some("x")));
    assert_eq!(n.next_after(&outputs(json!({"ok": "false"}))), Ok(None));
    let n2 = node("n", branch("k", &[("3", "x")], Some("y")));
    assert_eq!(n2.next_after(&outputs(json!({"k": 3}))), Ok(Some("x")));
    assert_eq!(n2.next_after(&outputs(json!({"k": 4}))), Ok(Some("y")));
    assert_eq!(n2.next_after(&Map::new()), Ok(Some("y")));
}

#[test]
fn next_after_without_a_case_or_default_is_an_error() {
    let n = node("t", branch("verdict", &[("behind", "s")], None));
    let err = n
        .next_after(&outputs(json!({"verdict": "ahead"})))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `t` branches on `verdict`, whose value `ahead` is none of the cases (behind)"
    );
    let err = n
        .next_after(&outputs(json!({"verdict": null})))
        .unwrap_err();
    assert_eq!(
        err,
        WorkflowError::BranchValueMissing {
            node: "t".into(),
            on: "verdict".into()
        }
    );
}

#[test]
fn check_outputs_names_every_problem() {
    let mut n = node("targets", Next::End);
    n.outputs.push(decision("verdict", &["on_track", "behind"]));
    n.outputs.push(NodeOutput {
        name: "gaps".into(),
        kind: OutputKind::Table,
        description: None,
        options: Vec::new(),
    });
    let good = n
        .check_outputs(&json!({"verdict": "behind", "gaps": [[1]]}))
        .unwrap();
    assert_eq!(good.len(), 2);
    let problems = n
        .check_outputs(&json!({"verdict": "late", "extra": 1}))
        .unwrap_err();
    assert_eq!(
        problems,
        vec![
            "output `verdict` of node `targets` is `late`, which is not one of its options: on_track, behind",
            "output `gaps` (table) of node `targets` is missing",
            "output `extra` is not declared by node `targets`, which declares `verdict`, `gaps`",
        ]
    );
    let problems = n
        .check_outputs(&json!({"verdict": "behind", "gaps": null}))
        .unwrap_err();
    assert_eq!(
        problems,
        vec!["output `gaps` (table) of node `targets` is null; give it a value"]
    );
    assert_eq!(
        n.check_outputs(&json!([1])).unwrap_err(),
        vec!["the outputs of node `targets` must be a JSON object (it declares `verdict`, `gaps`)"]
    );
}

#[test]
fn input_types_read_their_text() {
    use InputType::*;
    assert_eq!(Number.read("1.5"), Ok(json!(1.5)));
    assert!(Number.read("NaN").is_err());
    assert_eq!(Integer.read(" 7 "), Ok(json!(7)));
    assert!(Integer.read("7.5").is_err());
    assert_eq!(Boolean.read("TRUE"), Ok(json!(true)));
    assert!(Boolean.read("yes").is_err());
    assert_eq!(Date.read("2024-02-29"), Ok(json!("2024-02-29")));
    assert!(Date.read("2023-02-29").is_err());
    assert!(Date.read("2024-2-01").is_err());
    assert!(Date.read("2024-09").is_err());
    assert_eq!(Month.read("2024-09"), Ok(json!("2024-09")));
    assert!(Month.read("2024-00").is_err());
    assert!(Month.read("2024-09-01").is_err());
    assert_eq!(String.read(" x "), Ok(json!(" x ")));
    for ty in InputType::ALL {
        assert_eq!(InputType::from_name(ty.as_str()), Some(ty));
    }
}

#[test]
fn resolve_inputs_applies_defaults_and_reports() {
    let mut d = def(vec![node("a", Next::End)]);
    d.inputs = vec![
        WorkflowInput {
            name: "month".into(),
            ty: InputType::Month,
            default: Some(json!("2024-09")),
            description: None,
            required: false,
        },
        WorkflowInput {
            name: "limit".into(),
            ty: InputType::Integer,
            default: None,
            description: None,
            required: true,
        },
    ];
    let given = BTreeMap::from([("limit".to_owned(), "5".to_owned())]);
    assert_eq!(
        Value::Object(d.resolve_inputs(&given).unwrap()),
        json!({"month": "2024-09", "limit": 5})
    );
    let given = BTreeMap::from([
        ("month".to_owned(), "Sept".to_owned()),
        ("region".to_owned(), "West".to_owned()),
    ]);
    assert_eq!(
        d.resolve_inputs(&given).unwrap_err(),
        vec![
            "unknown input `region`; the workflow takes `month`, `limit`",
            "input `month` (month): `Sept` is not a month written YYYY-MM",
            "input `limit` (integer) is required and has no default",
        ]
    );
}

#[test]
fn helpers_find_nodes() {
    let d = def(vec![
        node("a", Next::Node("b".into())),
        node("b", Next::End),
    ]);
    assert_eq!(d.first_node().map(|n| n.id.as_str()), Some("a"));
    assert_eq!(d.node("b").map(|n| n.id.as_str()), Some("b"));
    assert!(d.node("c").is_none());
    assert!(def(Vec::new()).first_node().is_none());
    assert_eq!(rules(&def(Vec::new())), vec![Rule::NoNodes]);
    assert!(rules(&d).is_empty());
}

#[test]
fn graph_rules() {
    // a → b → a: no way out of either.
    let looped = def(vec![
        node("a", Next::Node("b".into())),
        node("b", Next::Node("a".into())),
    ]);
    let found = looped.check(None);
    assert_eq!(
        found.iter().map(|d| d.rule).collect::<Vec<_>>(),
        vec![Rule::NoWayOut, Rule::NoWayOut]
    );
    assert_eq!(
        found[0].message,
        "node `a` has no way out: every path from it loops among `a`, `b` without reaching `end`"
    );
    // A loop with an exit is fine.
    let mut check = node("check", branch("again", &[("true", "fix")], Some(END)));
    check.outputs.push(decision("again", &["true", "false"]));
    let retry = def(vec![node("fix", Next::Node("check".into())), check]);
    assert!(rules(&retry).is_empty(), "{:?}", retry.check(None));
    // An island is unreachable.
    let island = def(vec![node("a", Next::End), node("b", Next::End)]);
    assert_eq!(rules(&island), vec![Rule::Unreachable]);
}

#[test]
fn next_serialises_plainly() {
    assert_eq!(serde_json::to_value(Next::End).unwrap(), json!("end"));
    assert_eq!(
        serde_json::to_value(Next::Node("b".into())).unwrap(),
        json!({"node": "b"})
    );
    let b = branch("v", &[("x", "a")], None);
    let text = serde_json::to_value(&b).unwrap();
    assert_eq!(text, json!({"branch": {"on": "v", "cases": {"x": "a"}}}));
    assert_eq!(serde_json::from_value::<Next>(text).unwrap(), b);
}

mod props {
    use proptest::prelude::*;

    use super::*;

    /// A random graph over `n` nodes: each node ends, goes to a node, or branches to two.
    fn graph() -> impl Strategy<Value = Vec<Vec<Option<usize>>>> {
        (1usize..7).prop_flat_map(|n| {
            proptest::collection::vec(
                proptest::collection::vec(proptest::option::of(0..n), 1..3),
                n,
            )
        })
    }

    fn build(targets: &[Vec<Option<usize>>]) -> WorkflowDef {
        let id = |t: &Option<usize>| t.map_or_else(|| END.to_owned(), |i| format!("n{i}"));
        def(targets
            .iter()
            .enumerate()
            .map(|(i, ts)| {
                let next = match ts.as_slice() {
                    [one] => Next::Node(id(one)),
                    many => Next::Branch {
                        on: "d".into(),
                        cases: many
                            .iter()
                            .enumerate()
                            .map(|(k, t)| (k.to_string(), id(t)))
                            .collect(),
                        default: None,
                    },
                };
                let mut n = node(&format!("n{i}"), next);
                n.outputs.push(decision("d", &[]));
                n
            })
            .collect())
    }

    proptest! {
        /// A node is reported as having no way out exactly when no walk of `next_after`
        /// choices from it reaches the end.
        #[test]
        fn no_way_out_matches_walks(targets in graph()) {
            let d = build(&targets);
            let trapped: Vec<String> = d
                .check(None)
                .into_iter()
                .filter(|x| x.rule == Rule::NoWayOut)
                .filter_map(|x| x.message.split('`').nth(1).map(str::to_owned))
                .collect();
            for (i, start) in d.nodes.iter().enumerate() {
                // Breadth-first over every choice the branch allows.
                let mut seen = vec![false; d.nodes.len()];
                let mut queue = vec![start];
                let mut ends = false;
                seen[i] = true;
                while let Some(n) = queue.pop() {
                    let choices = match &n.next {
                        Next::Branch { cases, .. } => cases.keys().cloned().collect(),
                        _ => vec![String::new()],
                    };
                    for choice in choices {
                        let out = outputs(json!({"d": choice}));
                        match n.next_after(&out) {
                            Ok(None) => ends = true,
                            Ok(Some(id)) => {
                                let j = d.nodes.iter().position(|m| m.id == id).unwrap();
                                if !seen[j] {
                                    seen[j] = true;
                                    queue.push(&d.nodes[j]);
                                }
                            }
                            Err(e) => prop_assert!(false, "{e}"),
                        }
                    }
                }
                prop_assert_eq!(!ends, trapped.contains(&start.id), "{:?}", targets);
            }
        }
    }
}

#[test]
fn file_references_are_the_names_figure_and_file_outputs_give() {
    let mut n = node("draw", Next::End);
    for (name, kind) in [
        ("chart", OutputKind::Figure),
        ("exports", OutputKind::File),
        ("note", OutputKind::Text),
    ] {
        n.outputs.push(NodeOutput {
            name: name.into(),
            kind,
            description: None,
            options: Vec::new(),
        });
    }
    let outputs = n
        .check_outputs(&json!({
            "chart": "outputs/chart.png",
            "exports": ["<file_ref>output_002</file_ref>", " table.csv ", "", "data_001", "v2.0 draft"],
            "note": "see chart.png"
        }))
        .unwrap();
    let found: Vec<(String, String)> = n
        .file_references(&outputs)
        .into_iter()
        .map(|r| (r.output, r.reference))
        .collect();
    assert_eq!(
        found,
        [
            ("chart".to_owned(), "chart.png".to_owned()),
            ("exports".to_owned(), "output_002".to_owned()),
            ("exports".to_owned(), "table.csv".to_owned()),
            ("exports".to_owned(), "data_001".to_owned()),
        ]
    );
    // Words that describe a chart drawn in the report name no file.
    let described = n
        .check_outputs(&json!({
            "chart": "bar chart of September's amount per region, drawn in the final report",
            "exports": [], "note": "-"
        }))
        .unwrap();
    assert!(n.file_references(&described).is_empty());
}

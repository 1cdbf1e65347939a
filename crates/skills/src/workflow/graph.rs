//! The rules over a whole definition: unique ids, `next` naming real nodes, branches on
//! declared outputs, known tools, every node reachable and every node able to reach the end.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::{END, Next, OutputKind, WorkflowDef, WorkflowNode};
use crate::diagnostic::{Diagnostic, Rule, Severity};

fn ticked<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

struct Checker<'a> {
    def: &'a WorkflowDef,
    /// Node id → index of its first node.
    index: BTreeMap<&'a str, usize>,
    found: Vec<Diagnostic>,
}

impl<'a> Checker<'a> {
    fn push(&mut self, severity: Severity, rule: Rule, message: String) {
        self.found
            .push(Diagnostic::new(&self.def.path, severity, rule, message));
    }

    fn duplicates(&mut self) {
        let mut seen = HashSet::new();
        for input in &self.def.inputs {
            if !seen.insert(input.name.as_str()) {
                self.push(
                    Severity::Error,
                    Rule::DuplicateId,
                    format!("input `{}` is declared more than once", input.name),
                );
            }
        }
        let mut seen = HashSet::new();
        for node in &self.def.nodes {
            if !seen.insert(node.id.as_str()) {
                self.push(
                    Severity::Error,
                    Rule::DuplicateId,
                    format!("node id `{}` is used by more than one node", node.id),
                );
            }
            let mut outputs = HashSet::new();
            for out in &node.outputs {
                if !outputs.insert(out.name.as_str()) {
                    self.push(
                        Severity::Error,
                        Rule::DuplicateId,
                        format!(
                            "node `{}`: output `{}` is declared more than once",
                            node.id, out.name
                        ),
                    );
                }
            }
        }
    }

    fn known(&self, id: &str) -> bool {
        id == END || self.index.contains_key(id)
    }

    fn targets(&mut self, node: &WorkflowNode) {
        let all_ids = || ticked(self.def.nodes.iter().map(|n| n.id.as_str()));
        let mut unknown = Vec::new();
        match &node.next {
            Next::End => {}
            Next::Node(id) => {
                if !self.known(id) {
                    unknown.push(format!("`next` names `{id}`"));
                }
            }
            Next::Branch { on, cases, default } => {
                for (value, id) in cases {
                    if !self.known(id) {
                        unknown.push(format!(
                            "case `{value}` of the branch on `{on}` leads to `{id}`"
                        ));
                    }
                }
                if let Some(id) = default.as_ref().filter(|id| !self.known(id)) {
                    unknown.push(format!(
                        "the default of the branch on `{on}` leads to `{id}`"
                    ));
                }
            }
        }
        for what in unknown {
            let message = format!(
                "node `{}`: {what}, which is not a node of this workflow (the nodes are {}; `{END}` ends it)",
                node.id,
                all_ids()
            );
            self.push(Severity::Error, Rule::UnknownNode, message);
        }
    }

    fn branch(&mut self, node: &WorkflowNode) {
        let Next::Branch { on, cases, default } = &node.next else {
            return;
        };
        let Some(output) = node.output(on) else {
            let declared = if node.outputs.is_empty() {
                "no outputs".to_owned()
            } else {
                ticked(node.outputs.iter().map(|o| o.name.as_str()))
            };
            self.push(
                Severity::Error,
                Rule::BranchOnUndeclared,
                format!(
                    "node `{}` branches on `{on}`, which is not one of its outputs (it declares {declared})",
                    node.id
                ),
            );
            return;
        };
        if output.kind != OutputKind::Decision || output.options.is_empty() {
            return;
        }
        let missed: Vec<&str> = output
            .options
            .iter()
            .map(String::as_str)
            .filter(|o| !cases.contains_key(*o))
            .collect();
        if !missed.is_empty() && default.is_none() {
            self.push(
                Severity::Warning,
                Rule::BranchMissesOption,
                format!(
                    "node `{}`: the branch on `{on}` has no case for {} and no default; a run that decides {} stops with an error",
                    node.id,
                    ticked(missed.iter().copied()),
                    if missed.len() == 1 { "it" } else { "one of them" }
                ),
            );
        }
        for value in cases.keys() {
            if !output.options.contains(value) {
                self.push(
                    Severity::Warning,
                    Rule::CaseNotAnOption,
                    format!(
                        "node `{}`: case `{value}` of the branch on `{on}` is not one of its options ({})",
                        node.id,
                        ticked(output.options.iter().map(String::as_str))
                    ),
                );
            }
        }
    }

    fn tools(&mut self, node: &WorkflowNode, known: &BTreeSet<String>) {
        for tool in node.tools.iter().flatten() {
            if !known.contains(tool) {
                self.push(
                    Severity::Error,
                    Rule::UnknownTool,
                    format!(
                        "node `{}`: tool `{tool}` is not known (the known tools are {})",
                        node.id,
                        ticked(known.iter().map(String::as_str))
                    ),
                );
            }
        }
    }

    /// The indexes of the nodes `node` leads to (unknown ids and `end` left out).
    fn successors(&self, node: &WorkflowNode) -> Vec<usize> {
        node.next
            .targets()
            .into_iter()
            .filter_map(|id| self.index.get(id).copied())
            .collect()
    }

    /// Every node reachable from `start` (itself included), in visiting order.
    fn reach(&self, start: usize) -> Vec<usize> {
        let mut seen = vec![false; self.def.nodes.len()];
        let mut order = Vec::new();
        let mut stack = vec![start];
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            order.push(i);
            stack.extend(self.successors(&self.def.nodes[i]).into_iter().rev());
        }
        order
    }

    fn reachability(&mut self) {
        let nodes = &self.def.nodes;
        let Some(first) = nodes.first() else {
            return;
        };
        let reached: HashSet<usize> = self.reach(0).into_iter().collect();
        // A node can end when it names `end` (or an unknown node, already an error) or leads to
        // one that can; repeated until nothing changes.
        let mut can_end: Vec<bool> = nodes
            .iter()
            .map(|n| {
                n.next
                    .targets()
                    .into_iter()
                    .any(|id| !self.index.contains_key(id))
            })
            .collect();
        let mut changed = true;
        while changed {
            changed = false;
            for (i, node) in nodes.iter().enumerate() {
                if !can_end[i] && self.successors(node).into_iter().any(|j| can_end[j]) {
                    can_end[i] = true;
                    changed = true;
                }
            }
        }
        let mut found = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            if self.index.get(node.id.as_str()) != Some(&i) {
                continue;
            }
            if !reached.contains(&i) {
                found.push((
                    Severity::Warning,
                    Rule::Unreachable,
                    format!(
                        "node `{}` cannot be reached from the first node `{}`",
                        node.id, first.id
                    ),
                ));
            }
            if !can_end[i] {
                let mut loop_ids: Vec<usize> = self.reach(i);
                loop_ids.sort_unstable();
                found.push((
                    Severity::Error,
                    Rule::NoWayOut,
                    format!(
                        "node `{}` has no way out: every path from it loops among {} without reaching `{END}`",
                        node.id,
                        ticked(loop_ids.iter().map(|&j| nodes[j].id.as_str()))
                    ),
                ));
            }
        }
        for (severity, rule, message) in found {
            self.push(severity, rule, message);
        }
    }
}

/// Every rule of the whole definition, in the order: no nodes, duplicates, then per node its
/// targets, branch and tools, then reachability and ways out.
pub(super) fn check(def: &WorkflowDef, known_tools: Option<&BTreeSet<String>>) -> Vec<Diagnostic> {
    let mut index = BTreeMap::new();
    for (i, node) in def.nodes.iter().enumerate() {
        index.entry(node.id.as_str()).or_insert(i);
    }
    let mut checker = Checker {
        def,
        index,
        found: Vec::new(),
    };
    if def.nodes.is_empty() {
        checker.push(
            Severity::Error,
            Rule::NoNodes,
            "the workflow has no nodes; `nodes` must list at least one".to_owned(),
        );
    }
    checker.duplicates();
    for node in &def.nodes {
        checker.targets(node);
        checker.branch(node);
        if let Some(known) = known_tools {
            checker.tools(node, known);
        }
    }
    checker.reachability();
    checker.found
}

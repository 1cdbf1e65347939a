//! Rules of the code that are not dependency edges, checked over the sources (docs/ARCHITECTURE.md,
//! "Invariants").
//!
//! - **No code outside a tool decides by a tool's name.** What a tool needs from the loop or the
//!   runtime (to be callable under any skill, to be shown whole, to run long, never to be
//!   retried) is one of its `ToolCapabilities`; what it did beyond its text is in its result or
//!   its run scope. A comparison of a call's or a result's tool name, or a configuration entry
//!   keyed by a tool's name constant, anywhere but in a file that implements a tool, breaks the
//!   rule. Tests are exempt: they name the tools they script.
//! - **In the agent, `History` is the only door to a conversation's log.** No module of
//!   `crates/agent/src` but `history.rs` calls the store's `load`, `load_from` or `append`:
//!   the rewinds are applied once, where the log is loaded, and every append names the last
//!   sequence number the run has seen.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Crates whose code may decide by tool names: the tools themselves, and the test kit
    /// whose scripted model answers by the tools it is offered.
    const EXEMPT_CRATES: [&str; 2] = ["builtins", "testkit"];

    /// Whether `side` (an operand, as written) names one tool: a string literal, `Some("…")`,
    /// or a constant (`TASK_TOOL`, `ba_skills::ACTIVATE_SKILL`).
    fn names_one_tool(side: &str) -> bool {
        let side = side.trim().trim_start_matches('&');
        let side = side.strip_prefix("Some(").unwrap_or(side);
        if side.starts_with('"') {
            return true;
        }
        let last = side.rsplit("::").next().unwrap_or(side);
        last.len() > 2
            && last
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
    }

    /// What deciding by a tool's name looks like in this code base: a call's or a result's
    /// tool name compared with one tool's name, or a configuration entry keyed by one.
    fn decides_by_name(line: &str) -> bool {
        let code = line.split("//").next().unwrap_or("");
        let fields = ["function.name", "tool_name", "call.name", "c.name"];
        let is_field = |side: &str| {
            let side = side.trim();
            let side = side
                .trim_end_matches(".as_deref()")
                .trim_end_matches(".as_str()");
            fields.iter().any(|f| side.ends_with(f))
        };
        for op in ["==", "!="] {
            let mut rest = code;
            while let Some(at) = rest.find(op) {
                let (left, right) = (&rest[..at], &rest[at + op.len()..]);
                // The operands as far as an expression goes on each side.
                let stop = |c: char| {
                    !(c.is_alphanumeric() || matches!(c, '_' | '.' | ':' | '&' | '"' | '(' | ')'))
                };
                let left_operand = left.trim_end().rsplit(stop).next().unwrap_or("");
                let right_operand = right
                    .trim_start()
                    .split([')', ' ', '{', ','])
                    .next()
                    .unwrap_or("");
                let right_operand = if right.trim_start().starts_with("Some(") {
                    right.trim_start()
                } else {
                    right_operand
                };
                if (is_field(left_operand) && names_one_tool(right_operand))
                    || (names_one_tool(left_operand) && is_field(right_operand))
                {
                    return true;
                }
                rest = right;
            }
        }
        ["ACTIVATE_SKILL", "TASK_TOOL"]
            .iter()
            .any(|c| code.contains(&format!(".entry({c}")))
    }

    /// Whether the file implements a tool (it may decide by its own name).
    fn implements_a_tool(text: &str) -> bool {
        text.contains("impl Tool for") || text.contains("impl ba_tools::Tool for")
    }

    /// The non-test part of a source file: everything before its `#[cfg(test)]` module.
    fn non_test(text: &str) -> &str {
        match text.find("#[cfg(test)]") {
            Some(at) => &text[..at],
            None => text,
        }
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "tests") {
                    continue;
                }
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_none_or(|n| n != "tests.rs")
            {
                out.push(path);
            }
        }
    }

    #[test]
    fn no_code_outside_a_tool_decides_by_a_tool_name() {
        let root = crate::root();
        let mut files = Vec::new();
        let Ok(crates) = std::fs::read_dir(root.join("crates")) else {
            unreachable!("the workspace has a crates folder");
        };
        for krate in crates.flatten() {
            let name = krate.file_name();
            if EXEMPT_CRATES.iter().any(|e| name == *e) {
                continue;
            }
            sources(&krate.path().join("src"), &mut files);
        }
        assert!(files.len() > 50, "found only {} source files", files.len());
        let mut found = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            if implements_a_tool(&text) {
                continue;
            }
            for (n, line) in non_test(&text).lines().enumerate() {
                if decides_by_name(line) {
                    let shown = file.strip_prefix(&root).unwrap_or(file);
                    found.push(format!("{}:{}: {}", shown.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "code outside a tool decides by a tool's name (give the tool a capability \
             instead):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_rule_sees_the_shapes_it_forbids() {
        for bad in [
            "if c.function.name == ba_skills::ACTIVATE_SKILL {",
            "if call.function.name == \"run_python\" {",
            "e.tool_name.as_deref() == Some(\"task\")",
            "if \"task\" == call.name {",
            "config.tools.entry(TASK_TOOL.to_owned())",
            "if c.name != \"lookup\" {",
        ] {
            assert!(decides_by_name(bad), "missed: {bad}");
        }
        for fine in [
            "if name == \"final_answer\" {",
            "let tool = lookup(&self.registry, &call.name)?;",
            "// if c.function.name == \"x\"",
            "assert_eq!(a.name, b.name);",
            "match tools.iter_mut().find(|(n, _)| *n == call.function.name) {",
        ] {
            assert!(!decides_by_name(fine), "flagged: {fine}");
        }
    }

    /// A call of the store's log methods, as the agent's code would write it.
    fn reaches_the_log(line: &str) -> bool {
        let code = line.split("//").next().unwrap_or("");
        let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        ["load(", "load_from(", "append("].iter().any(|m| {
            compact.contains(&format!("store.{m}")) || compact.contains(&format!("store().{m}"))
        })
    }

    #[test]
    fn only_history_reaches_a_conversations_log_in_the_agent() {
        let root = crate::root();
        let mut files = Vec::new();
        sources(&root.join("crates/agent/src"), &mut files);
        assert!(files.len() > 20, "found only {} agent files", files.len());
        let mut found = Vec::new();
        for file in &files {
            if file.ends_with("history.rs") {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for (n, line) in non_test(&text).lines().enumerate() {
                if reaches_the_log(line) {
                    let shown = file.strip_prefix(&root).unwrap_or(file);
                    found.push(format!("{}:{}: {}", shown.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "the agent reaches a conversation's log outside History (go through History):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn the_log_rule_sees_the_calls_it_forbids() {
        for bad in [
            "let loaded = self.inner.store.load(id).await?;",
            "inner.store.append(&id, &entry, Some(seq)).await?;",
            "let log = self.store().load_from(id, 3).await?;",
        ] {
            assert!(reaches_the_log(bad), "missed: {bad}");
        }
        for fine in [
            "history.append(entry).await?;",
            "self.lost.load(Ordering::SeqCst)",
            "servers.append(&mut snapshot.servers);",
            "// store.load(id) is History's",
        ] {
            assert!(!reaches_the_log(fine), "flagged: {fine}");
        }
    }
}

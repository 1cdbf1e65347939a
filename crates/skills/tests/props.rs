//! Invariants over generated input: parsing never panics, the reader never leaves the folder,
//! the activation stack never holds a cycle or exceeds its depth.

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ba_skills::{ActivationStack, SkillSet, SkillsError};
use ba_skills::{parse_document, split_tools};
use proptest::prelude::*;

/// A generated `SKILL.md`: its text and what it must read back as.
#[derive(Debug, Clone)]
struct Document {
    text: String,
    name: String,
    description: String,
    body: String,
}

/// Skill names; YAML's own words (`true`, `null`, …) would not read back as text.
fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,20}".prop_filter("a YAML keyword", |n| {
        !matches!(n.as_str(), "true" | "false" | "null")
    })
}

/// A description and how the head writes it: plain, double-quoted (any text, escaped) or a
/// literal block over several lines.
fn description(eol: &'static str) -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        "[A-Za-z][A-Za-z0-9 ,.()]{0,60}[A-Za-z0-9.)]".prop_map(|d| (d.clone(), d)),
        "[ -~é中👍\t]{1,60}"
            .prop_filter("an empty description", |d| !d.trim().is_empty())
            .prop_map(|d| (serde_json::to_string(&d).unwrap(), d)),
        proptest::collection::vec("[A-Za-z0-9][A-Za-z0-9 ,.:#'\"-]{0,30}", 1..4).prop_map(
            move |lines| {
                let written = lines
                    .iter()
                    .map(|l| format!("{eol}  {l}"))
                    .collect::<String>();
                (format!("|-{written}"), lines.join("\n"))
            }
        ),
    ]
}

/// A valid head named by `names` (other optional fields included at random), LF or CRLF line
/// ends, then a body: any text, or lines that look like delimiters and headings.
fn document(names: impl Strategy<Value = String>) -> impl Strategy<Value = Document> {
    let extras = prop::sample::subsequence(
        vec![
            "license: Apache-2.0",
            "allowed-tools: Read Grep Bash(python:*)",
            "model: inherit",
            "compatibility: any",
            "metadata:\n  author: someone\n  version: \"1.0\"",
        ],
        0..=3,
    );
    let body = prop_oneof![
        "(?s).{0,200}",
        proptest::collection::vec(
            prop_oneof!["---", "# [A-Za-z ]{0,12}", "[ -~]{0,30}", "\r?"],
            0..8
        )
        .prop_map(|lines| lines.join("\n")),
    ];
    (
        names,
        prop::sample::select(vec!["\n", "\r\n"]),
        extras,
        body,
    )
        .prop_flat_map(|(name, eol, extras, body)| {
            description(eol).prop_map(move |(written, description)| {
                let mut head = format!("---{eol}name: {name}{eol}description: {written}{eol}");
                for extra in &extras {
                    head.push_str(&extra.replace('\n', eol));
                    head.push_str(eol);
                }
                head.push_str("---");
                head.push_str(eol);
                Document {
                    text: format!("{head}{body}"),
                    name: name.clone(),
                    description,
                    body: body.clone(),
                }
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn parsing_any_text_never_panics(text in "(---\n)?[ -~\n\r\t:|>\\-\"'\\[\\]{}#é]{0,200}(\n---\n)?[ -~\n]{0,40}") {
        let _ = parse_document(&text);
    }

    #[test]
    fn loading_any_bytes_gives_a_skill_or_a_diagnostic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        std::fs::create_dir_all(&dir).unwrap();
        let mut content = b"---\nname: s\n".to_vec();
        content.extend_from_slice(&bytes);
        std::fs::write(dir.join("SKILL.md"), &content).unwrap();
        let set = SkillSet::load([tmp.path()]);
        prop_assert!(set.len() == 1 || set.diagnostics().iter().any(|d| d.is_error()));
        if set.len() == 1 {
            // Level 2 of a loaded skill is text or a clear error, never a panic.
            let _ = set.body("s");
        }
    }

    #[test]
    fn a_valid_head_parses_to_its_fields_and_its_body(doc in document(name())) {
        let (fm, _findings, body) = parse_document(&doc.text)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{:?}", doc.text)))?;
        prop_assert_eq!(fm.name.as_deref(), Some(doc.name.as_str()));
        prop_assert_eq!(fm.description.as_deref(), Some(doc.description.as_str()));
        prop_assert_eq!(body, doc.body.replace("\r\n", "\n"));
    }

    #[test]
    fn a_valid_head_loads_and_level_2_is_its_body_or_a_clear_error(
        doc in document(Just("s".to_owned())),
        raw in prop_oneof![
            Just(None),
            proptest::collection::vec(any::<u8>(), 0..200).prop_map(Some),
        ],
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        std::fs::create_dir_all(&dir).unwrap();
        // The body as generated text, or as arbitrary bytes after the same head.
        let mut content = doc.text.as_bytes()[..doc.text.len() - doc.body.len()].to_vec();
        let body = raw.unwrap_or_else(|| doc.body.clone().into_bytes());
        content.extend_from_slice(&body);
        std::fs::write(dir.join("SKILL.md"), &content).unwrap();
        let set = SkillSet::load([tmp.path()]);
        prop_assert_eq!(set.len(), 1, "{:?}", set.diagnostics());
        match std::str::from_utf8(&body) {
            Ok(text) if !text.contains('\0') => {
                let loaded = set.body("s").map_err(|e| TestCaseError::fail(e.to_string()))?;
                let want = text.replace("\r\n", "\n");
                prop_assert_eq!(&*loaded, want.as_str());
            }
            _ => {
                let err = set.body("s").unwrap_err();
                prop_assert!(matches!(err, SkillsError::Frontmatter { .. }), "{err}");
            }
        }
    }

    #[test]
    fn the_reader_never_returns_outside_content(
        parts in proptest::collection::vec(
            prop::sample::select(vec!["..", ".", "in", "in.md", "out.md", "link", "", "/"]),
            1..6,
        )
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        let dir = root.join("s");
        std::fs::create_dir_all(dir.join("in")).unwrap();
        std::fs::write(dir.join("SKILL.md"), "---\nname: s\ndescription: d\n---\n").unwrap();
        std::fs::write(dir.join("in/in.md"), "inside").unwrap();
        std::fs::write(dir.join("in.md"), "inside").unwrap();
        std::fs::write(tmp.path().join("out.md"), "outside").unwrap();
        std::fs::write(root.join("out.md"), "outside").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(tmp.path(), dir.join("link")).unwrap();
        let set = SkillSet::load([&root]);
        let path = parts.join("/");
        match set.read_resource("s", &path) {
            Ok(text) => prop_assert_eq!(text, "inside"),
            Err(
                SkillsError::InvalidResourcePath { .. }
                | SkillsError::ResourceNotFound { .. }
                | SkillsError::ResourceEscapes { .. }
                | SkillsError::ResourceNotAFile { .. },
            ) => {}
            Err(other) => prop_assert!(false, "unexpected error for {path:?}: {other}"),
        }
    }

    #[test]
    fn tool_lists_split_back(tools in proptest::collection::vec("[A-Za-z_][A-Za-z0-9_]{0,8}(\\([a-z :*]{0,8}\\))?", 0..6)) {
        prop_assert_eq!(split_tools(&tools.join(" ")), tools.clone());
        prop_assert_eq!(split_tools(&tools.join(", ")), tools);
    }

    #[test]
    fn the_stack_never_holds_a_cycle_or_exceeds_its_depth(
        ops in proptest::collection::vec((prop::sample::select(vec!["a", "b", "c", "d", "e"]), any::<bool>()), 0..40),
        max_depth in 1u32..5,
    ) {
        let stack = ActivationStack::with_max_depth(max_depth);
        let mut guards = Vec::new();
        for (skill, pop) in ops {
            if pop {
                guards.pop();
            } else if let Ok(guard) = stack.push(skill) {
                guards.push(guard);
            }
            let chain = stack.chain();
            prop_assert!(chain.len() <= max_depth as usize);
            let mut unique = chain.clone();
            unique.sort_unstable();
            unique.dedup();
            prop_assert_eq!(unique.len(), chain.len());
            prop_assert_eq!(chain.len(), guards.len());
        }
        drop(guards);
        prop_assert_eq!(stack.depth(), 0);
    }
}

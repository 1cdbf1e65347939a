//! Invariants over generated input: parsing never panics, the reader never leaves the folder,
//! the activation stack never holds a cycle or exceeds its depth.

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ba_skills::frontmatter::{parse_document, split_tools};
use ba_skills::{ActivationStack, SkillSet, SkillsError};
use proptest::prelude::*;

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

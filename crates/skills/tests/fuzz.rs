//! Fuzzing of the frontmatter reader with byte and structure mutations of valid `SKILL.md`
//! files: the text parser, and a whole skill folder loaded from mutated bytes (not UTF-8, cut
//! inside a character, YAML anchors, huge numbers). Nothing may panic; a skill that cannot be
//! read becomes a diagnostic naming its file, never a missing or half-read skill without one.
//! `cargo xtask fuzz --cases N` runs longer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_skills::SkillSet;
use ba_skills::parse_document;
use ba_testkit::fuzz::{cases, mutated, mutated_text};
use proptest::prelude::*;

const PLAIN: &str = "---\nname: sales-analysis\ndescription: Analyse regional sales against targets. Use when the user asks about quarters, regions or growth.\nallowed-tools: query_database file_reader\nmetadata:\n  owner: analytics\n  version: \"1.2\"\n---\n# Sales analysis\n\n1. Query the quarter.\n2. Compare with the targets sheet.\n";

const FOLDED: &str = "---\r\nname: report-writer\r\ndescription: >-\r\n  Writes the final report\r\n  in Markdown.\r\nlicense: Apache-2.0\r\nallowed-tools: [run_python, \"file_reader\"]\r\nanchors: &a {x: 1}\r\nmore: *a\r\n---\r\nBody with a table:\r\n\r\n| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\n";

const QUOTED: &str = "---\nname: 'quoted-name'\ndescription: \"Line one\\nline two: with a colon, and 中文说明\"\nallowed-tools: Bash(git:*) Read\n---\n";

fn seeds() -> Vec<Vec<u8>> {
    [PLAIN, FOLDED, QUOTED]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect()
}

fn file_cases() -> u32 {
    // Each case writes and loads a folder: a quarter of the text cases.
    (cases() / 4).max(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn frontmatter_text_never_panics(text in mutated_text(seeds())) {
        match parse_document(&text) {
            Ok((fm, findings, body)) => {
                // The body is a suffix of the input, modulo CRLF → LF.
                prop_assert!(body.len() <= text.len());
                for f in &findings {
                    prop_assert!(!f.is_empty());
                }
                // The YAML parse is deterministic: the same text gives the same answer.
                let again = parse_document(&text).map(|(f, _, b)| (f.name, f.description, b));
                prop_assert_eq!(again.ok(), Some((fm.name, fm.description, body.clone())));
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: file_cases(), ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_skill_folder_loads_or_is_diagnosed(bytes in mutated(seeds())) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("fuzzed");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), &bytes).unwrap();
        let set = SkillSet::load([root.path()]);
        let diagnostics = set.diagnostics();
        if set.is_empty() {
            // Refused: at least one diagnostic, and it says something.
            prop_assert!(!diagnostics.is_empty(), "a refused skill must be diagnosed");
            for d in &diagnostics {
                prop_assert!(!d.to_string().is_empty());
            }
        } else {
            // Loaded (level 1 reads the head only): the body is text, or a typed error that
            // names the file and where it went wrong.
            for name in set.names() {
                if let Err(e) = set.body(&name) {
                    let text = e.to_string();
                    prop_assert!(text.contains("SKILL.md"), "{text}");
                    prop_assert!(text.contains("offset") || text.contains("large"), "{text}");
                }
            }
            prop_assert!(!set.render_catalogue().is_empty());
        }
    }
}

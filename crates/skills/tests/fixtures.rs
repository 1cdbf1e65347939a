//! The real skills of the fixture collection: loading, strict validation, every body reference
//! through the Level 3 reader, activation.

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use ba_protocol::ApproxCounter;
use ba_protocol::{SkillActivationRequest, SkillMessageKind, Visibility};
use ba_skills::references;
use ba_skills::{ActivateSkill, LoadOptions, Rule, Severity, SkillSet, SkillsError};

/// The fixture skills (a skip, or a failure under CI, when they are absent).
fn fixtures() -> Option<PathBuf> {
    ba_testkit::fixture("skills/anthropics")
}

const NAMES: [&str; 12] = [
    "algorithmic-art",
    "brand-guidelines",
    "canvas-design",
    "claude-api",
    "frontend-design",
    "internal-comms",
    "mcp-builder",
    "skill-creator",
    "slack-gif-creator",
    "theme-factory",
    "web-artifacts-builder",
    "webapp-testing",
];

#[test]
fn every_fixture_skill_loads_with_one_warning() {
    let Some(root) = fixtures() else { return };
    let set = SkillSet::load([&root]);
    assert_eq!(set.names(), NAMES);
    let diags = set.diagnostics();
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].path, root.join("claude-api/SKILL.md"));
    assert_eq!(diags[0].severity, Severity::Warning);
    assert_eq!(diags[0].rule, Rule::DescriptionTooLong);
    assert_eq!(
        diags[0].message,
        "description is 1068 characters, over the limit of 1024"
    );

    let api = set.get("claude-api").unwrap();
    // `description: |-` block scalar: lines joined with LF, no trailing newline.
    let description = api.description();
    assert!(description.starts_with("Reference for the Claude API"));
    assert_eq!(description.lines().count(), 3);
    assert!(!description.ends_with('\n'));
    assert_eq!(
        api.frontmatter.license.as_deref(),
        Some("Complete terms in LICENSE.txt")
    );
    // skill-creator has no license at all.
    assert_eq!(set.get("skill-creator").unwrap().frontmatter.license, None);
}

/// The expectation computed once from the specification (SPEC.mdx: name ≤ 64 of `a-z0-9-`, no
/// edge or double hyphens, equal to the folder; description 1–1024; compatibility ≤ 500; only
/// the six specified fields) against the twelve fixture frontmatters: the one violation is
/// claude-api's 1068-character description.
#[test]
fn strict_validation_reports_exactly_the_reference_violations() {
    let Some(root) = fixtures() else { return };
    let diags = ba_skills::validate([&root], &LoadOptions::default());
    let found: Vec<(PathBuf, Severity, Rule)> = diags
        .iter()
        .map(|d| {
            (
                d.path.strip_prefix(&root).unwrap().to_path_buf(),
                d.severity,
                d.rule,
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![(
            PathBuf::from("claude-api/SKILL.md"),
            Severity::Error,
            Rule::DescriptionTooLong
        )]
    );
}

#[test]
fn the_constraints_table_of_the_specification_matches_the_validator() {
    let Some(spec) = ba_testkit::fixture("skills/SPEC.mdx") else {
        return;
    };
    let spec = ba_testkit::read(&spec);
    let row = |field: &str| {
        spec.lines()
            .find(|l| l.starts_with(&format!("| `{field}` |")))
            .unwrap_or_else(|| panic!("no row for {field}"))
            .to_owned()
    };
    assert!(row("name").contains(&format!("Max {} characters", ba_skills::MAX_NAME_CHARS)));
    assert!(row("description").contains(&format!(
        "Max {} characters",
        ba_skills::MAX_DESCRIPTION_CHARS
    )));
    assert!(row("compatibility").contains(&format!(
        "Max {} characters",
        ba_skills::MAX_COMPATIBILITY_CHARS
    )));
    for field in ba_skills::SPEC_FIELDS {
        row(field);
    }
}

/// Files the bodies point at that were left out of the fixture (scripts, HTML templates) or
/// that live in the user's workspace rather than in the skill (`evals/evals.json`).
const MISSING: [(&str, &str); 7] = [
    ("algorithmic-art", "templates/viewer.html"),
    ("skill-creator", "assets/eval_review.html"),
    ("skill-creator", "eval-viewer/generate_review.py"),
    ("skill-creator", "evals/evals.json"),
    ("web-artifacts-builder", "scripts/bundle-artifact.sh"),
    ("web-artifacts-builder", "scripts/init-artifact.sh"),
    ("webapp-testing", "scripts/with_server.py"),
];

#[test]
fn every_body_reference_resolves_or_is_a_clear_not_found() {
    let Some(root) = fixtures() else { return };
    let set = SkillSet::load([&root]);
    let mut resolved = 0;
    let mut missing = Vec::new();
    for name in set.names() {
        let body = set.body(&name).unwrap();
        for reference in references(&body) {
            match set.read_resource(&name, &reference) {
                Ok(text) => {
                    assert!(!text.is_empty(), "{name}/{reference} is empty");
                    resolved += 1;
                }
                Err(err @ SkillsError::ResourceNotFound { .. }) => {
                    assert!(!root.join(&name).join(&reference).exists());
                    assert_eq!(
                        err.to_string(),
                        format!(
                            "resource `{reference}` of skill `{name}` does not exist in {}",
                            root.join(&name).display()
                        )
                    );
                    missing.push((name.clone(), reference));
                }
                Err(other) => panic!("{name}/{reference}: {other}"),
            }
        }
    }
    let expected: Vec<(String, String)> = MISSING
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    missing.sort();
    assert_eq!(missing, expected);
    // mcp-builder's Markdown links, claude-api's shared/ and per-language files, …
    assert!(resolved >= 30, "only {resolved} references resolved");
}

#[test]
fn levels_and_their_costs() {
    let Some(root) = fixtures() else { return };
    let set = SkillSet::load([&root]);
    let catalogue = set.catalogue(&ApproxCounter);
    assert_eq!(catalogue.len(), 12);
    for entry in &catalogue {
        // ~100 tokens a skill (claude-api's long description costs more).
        assert!(entry.tokens > 40 && entry.tokens < 400, "{entry:?}");
    }
    let rendered = set.render_catalogue();
    assert_eq!(rendered.lines().count(), 14);
    assert!(rendered.contains("<skill name=\"mcp-builder\">Guide for creating"));

    let first = set.body("claude-api").unwrap();
    let again = set.body("claude-api").unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "the second read comes from the cache"
    );
    assert_eq!(*first, *set.body_from_disk("claude-api").unwrap());
    assert!(!first.starts_with("---"));

    let resources = set.resources("claude-api").unwrap();
    assert_eq!(resources.len(), 65); // 66 files less SKILL.md
    assert!(resources.iter().any(|r| r.path == "shared/models.md"));
    assert!(
        resources
            .iter()
            .any(|r| r.path == "python/claude-api/README.md")
    );

    let costs = set.level_costs("mcp-builder", &ApproxCounter).unwrap();
    assert!(costs.level2 > costs.level1);
    assert_eq!(costs.level3.len(), 5); // four references + LICENSE.txt
}

#[test]
fn activation_of_a_real_skill() {
    let Some(root) = fixtures() else { return };
    let tool = ActivateSkill::new(Arc::new(SkillSet::load([&root])));
    let schema = tool.input_schema();
    assert_eq!(
        schema["properties"]["skill"]["enum"]
            .as_array()
            .unwrap()
            .len(),
        12
    );
    assert!(
        tool.description()
            .contains("<skill name=\"theme-factory\">")
    );

    let request = tool
        .parse_arguments(&serde_json::json!({"skill": "mcp-builder", "load_level": 3}))
        .unwrap();
    let result = tool.activate(&request).unwrap();
    assert!(result.success);
    assert_eq!(result.skill_name, "mcp-builder");
    assert_eq!(result.messages[0].visibility, Visibility::Visible);
    assert_eq!(result.messages[1].kind, SkillMessageKind::Instruction);
    assert!(
        result.messages[1]
            .content
            .contains("# MCP Server Development Guide")
    );
    assert!(
        result.messages[1]
            .content
            .contains("- reference/evaluation.md (")
    );
    // Level 3 inlines the referenced files first, within the budget.
    assert!(result.messages[2].content.starts_with("File reference/"));
    assert!(
        result
            .messages
            .iter()
            .all(|m| m.kind != SkillMessageKind::Permissions)
    );
    assert_eq!(result.context_modifier, Default::default());

    // At the default level the skill brings its metadata and its body.
    let level2 = tool
        .activate(&SkillActivationRequest::new("theme-factory"))
        .unwrap();
    assert_eq!(level2.messages[0].kind, SkillMessageKind::Metadata);
    assert!(
        level2
            .messages
            .iter()
            .any(|m| m.kind == SkillMessageKind::Instruction && m.content.contains("theme")),
        "{:#?}",
        level2.messages
    );
    let mut l1 = SkillActivationRequest::new("theme-factory");
    l1.load_level = 1;
    let result = tool.activate(&l1).unwrap();
    assert_eq!(result.messages.len(), 2);
    assert_eq!(result.messages[1].kind, SkillMessageKind::Metadata);
}
